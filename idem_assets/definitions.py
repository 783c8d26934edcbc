"""The code location: everything under ``idem_assets/defs`` plus project-wide resources.

``defs/`` holds YAML components (the declared landing sources) and Python modules (the
downstream assets, jobs, schedules); ``load_from_defs_folder`` finds them all.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import dagster as dg

from idem_assets._loading import collector_paused

_PACKAGE = Path(__file__).resolve().parent

# Dagster's default executor, in-process unless a run asks for `multiprocess`: a run's steps
# (an asset and its checks are one step) then share one import of the code location and
# one set of resources. Runs still run side by side (the run queue), writers of one table
# queue on its pool. Measured with `dg launch` on 2 cores: one partition of orders 6.2 ->
# 3.7 s, three days of orders, customers, events and daily_sales with every check
# 14.2 -> 6.2 s. A large local run can still ask for processes:
# `execution: {config: {multiprocess: {max_concurrent: 2}}}`.
EXECUTOR = dg.ExecutorDefinition(
    name="in_process_unless_asked",
    config_schema=dg.Field(
        dg.multi_or_in_process_executor.config_schema.config_type, default_value={"in_process": {}}
    ),
    executor_creation_fn=dg.multi_or_in_process_executor.executor_creation_fn,
    requirements=dg.multi_or_in_process_executor.get_requirements,
    description="In-process by default; `multiprocess` on request.",
)


def project_definitions() -> dg.Definitions:
    """Every definition declared under ``idem_assets/defs``, without resources."""
    if (_PACKAGE.parent / "pyproject.toml").is_file():
        return dg.load_from_defs_folder(path_within_project=_PACKAGE)
    # An installed wheel carries no pyproject.toml: load the same folder from the module.
    defs_module = importlib.import_module("idem_assets.defs")
    return dg.ComponentTree.from_module(
        defs_module=defs_module, project_root=_PACKAGE.parent
    ).build_defs()


def build_definitions(resources: dict[str, object]) -> dg.Definitions:
    """Every domain's definitions, with the lake's maintenance job, bound to ``resources``."""
    from idem_assets.lib.maintenance import maintenance_definitions  # with the collector paused

    project = project_definitions()
    return dg.Definitions.merge(
        project,
        maintenance_definitions(project),
        dg.Definitions(resources=resources, executor=EXECUTOR),
    )


with collector_paused():
    from idem_assets.lib.console import quiet_handler_notice
    from idem_assets.lib.resources import default_resources

    quiet_handler_notice()

    defs = build_definitions(default_resources())
