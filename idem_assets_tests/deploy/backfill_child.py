"""A Dagster asset backfill of the declared ``orders`` source, driven by Dagster's own
backfill daemon logic against a real instance whose run launcher runs each run
synchronously in this process.

``python -m idem_assets_tests.deploy.backfill_child <home> <location.py> <first> <last>``
runs one backfill to its end (or until ``IDEM_CRASH_AT`` kills the process): the child
process of ``test_chunked_backfill``, which imports the same helpers to run in process.
This reaches into Dagster internals (``dagster._daemon.backfill``, ``dagster._core``): there
is no public API for "run the backfill daemon now". Expect to revisit it on upgrades.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.storage.dagster_run import RunsFilter
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.utils import make_new_backfill_id
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.backfill import execute_backfill_iteration

import idem_assets
from idem_assets.definitions import EXECUTOR
from idem_assets.lib import source_definitions
from idem_assets.lib.resources import default_resources
from idem_assets.resources import CheckpointResource, LakeResource, NotificationResource
from idem_assets.sources import LandingSource

ORDERS_YAML = Path(idem_assets.__file__).parent / "defs" / "orders" / "defs.yaml"
BACKFILL = {"max_days_per_run": 10, "writers": 2}
DONE = {BulkActionStatus.COMPLETED, BulkActionStatus.COMPLETED_SUCCESS}
# Runs launch at once (no queue) and run synchronously inside the daemon iteration; pools
# as in the project's dagster.yaml.
INSTANCE_YAML = """\
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
run_launcher:
  module: dagster._core.launcher.sync_in_memory_run_launcher
  class: SyncInMemoryRunLauncher
concurrency:
  pools:
    default_limit: 1
telemetry:
  enabled: false
"""
LOCATION_PY = """\
from pathlib import Path
from idem_assets_tests.deploy.backfill_child import location_definitions

defs = location_definitions(Path({landing!r}), Path({root!r}))
"""
_logger = logging.getLogger("idem_assets_tests.backfill_daemon")


def orders_source() -> LandingSource:
    """The shipped orders declaration, split into backfill runs of at most 10 days."""
    attributes = yaml.safe_load(ORDERS_YAML.read_text())["attributes"]
    attributes.pop("sensor")  # it also requests daily_sales, not in this code location
    return LandingSource.model_validate({**attributes, "backfill": BACKFILL})


def orders_resources(landing: Path, root: Path) -> dict[str, object]:
    """Resources of a lake and checkpoint store under ``root``."""
    return default_resources(
        LakeResource(landing_dir=str(landing), lake_dir=str(root / "lake")),
        CheckpointResource(url=f"sqlite:///{root / 'state.db'}"),
        NotificationResource(base_url="http://127.0.0.1:9", token="unused"),
    )


def location_definitions(landing: Path, root: Path) -> dg.Definitions:
    """The code location of the backfill: the declaration, its resources, the executor."""
    return dg.Definitions.merge(
        source_definitions(orders_source()),
        dg.Definitions(resources=orders_resources(landing, root), executor=EXECUTOR),
    )


def write_location(landing: Path, root: Path) -> Path:
    """A code location file for ``location_definitions`` (runs are reloaded from it)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "location.py"
    path.write_text(LOCATION_PY.format(landing=str(landing), root=str(root)))
    return path


def new_instance(home: Path) -> dg.DagsterInstance:
    """A SQLite instance in ``home`` whose runs run in process, as soon as they launch."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    return dg.DagsterInstance.from_config(str(home))


def run_backfill(instance: dg.DagsterInstance, location: Path, keys: list[str]) -> str:
    """Backfill ``orders`` for ``keys`` as the backfill daemon does; the backfill id."""
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(python_file=str(location), working_directory=str(location.parent)),
        location_name="backfill_test",
    )
    target = InProcessWorkspaceLoadTarget([origin])
    with create_test_daemon_workspace_context(target, instance) as context:
        backfill = PartitionBackfill.from_asset_partitions(
            backfill_id=make_new_backfill_id(),
            asset_graph=context.create_request_context().asset_graph,
            partition_names=keys,
            asset_selection=[dg.AssetKey("orders")],
            backfill_timestamp=dt.datetime.now(dt.UTC).timestamp(),
            tags={},
            dynamic_partitions_store=instance,
            all_partitions=False,
            title=None,
            description=None,
            run_config=None,
        )
        instance.add_backfill(backfill)
        for _ in range(20):
            list(execute_backfill_iteration(context, _logger))
            status = instance.get_backfill(backfill.backfill_id).status  # type: ignore[union-attr]
            if status in DONE:
                return backfill.backfill_id
        raise AssertionError(f"backfill {backfill.backfill_id} still {status} after 20 iterations")


def backfill_runs(instance: dg.DagsterInstance, backfill_id: str) -> list[dg.DagsterRun]:
    """The backfill's runs, by first day."""
    runs = instance.get_runs(filters=RunsFilter.for_backfill(backfill_id))
    return sorted(runs, key=lambda run: run.tags.get("dagster/asset_partition_range_start", ""))


def run_metadata(instance: dg.DagsterInstance, run_id: str) -> list[dict[str, Any]]:
    """Metadata values of each materialization of ``orders`` in a run (one per day)."""
    out = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        mat = entry.asset_materialization
        assert mat is not None
        out.append({k: getattr(v, "value", v) for k, v in mat.metadata.items()})
    return out


if __name__ == "__main__":
    home, location, first, last = sys.argv[1:]
    days = (dt.date.fromisoformat(last) - dt.date.fromisoformat(first)).days + 1
    keys = [(dt.date.fromisoformat(first) + dt.timedelta(days=i)).isoformat() for i in range(days)]
    print(run_backfill(new_instance(Path(home)), Path(location), keys))
