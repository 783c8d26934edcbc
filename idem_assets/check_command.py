"""``idem-assets check``: run asset checks against the existing lake, fail CI on ERROR.

Dagster has no command that runs asset checks and fails when one fails (``dagster asset
materialize`` and ``dg launch`` exit 0 when a non-blocking check fails). This one::

    idem-assets check --select 'key:orders or key:daily_sales' \\
        --partition-range 2024-03-01...2024-03-07 --junit-xml checks.xml

loads the code location as ``dagster``/``dg`` find it (``-m`` / ``-f``, else
``[tool.dg.project] code_location_target_module`` or ``[tool.dagster] module_name`` in the
nearest ``pyproject.toml``), resolves the selection with Dagster's asset selection syntax,
runs the selected assets' checks without writing (``--materialize``: materializes them
first, for CI jobs that build a staging lake), prints one row per (asset, partition,
check), optionally writes JUnit XML, and exits 1 when an ERROR check failed or a check
could not run. A failed WARN check is listed and exits 0. Results are recorded in the
Dagster instance of ``DAGSTER_HOME`` when it is set (the UI shows them), else in a
temporary one.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from idem_assets.partitions import PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG

_RANGE = "..."
# Dagster's own variable for where its instance lives (see idem_assets.resources).
DAGSTER_HOME_ENV = "DAGSTER_HOME"
# Metadata worth a column in the table, in this order, when a check reports it.
_KEY_METADATA = (
    "rows_differing",
    "duplicated_keys",
    "unaccounted",
    "offending_rows",
    "quarantined",
    "mismatched_days",
    "stored_rows",
    "rows_checked",
)


class CheckCommandError(Exception):
    """A usage problem the command reports in one line (exit 2)."""


@dataclass(frozen=True)
class Outcome:
    """One check evaluation of one partition."""

    asset: str
    partition: str | None
    check: str
    passed: bool
    severity: str
    metadata: dict[str, Any]
    description: str | None

    @property
    def fails_ci(self) -> bool:
        """An ERROR check that did not pass."""
        return not self.passed and self.severity == "ERROR"

    def key_metadata(self) -> str:
        """The metadata a reader looks at first, as ``name=value`` pairs."""
        shown = [f"{name}={self.metadata[name]}" for name in _KEY_METADATA if name in self.metadata]
        return ", ".join(shown[:3])


@dataclass(frozen=True)
class RunReport:
    """What one check run produced."""

    outcomes: list[Outcome]
    errors: list[str]  # steps that failed for another reason than a failed check


# --- the code location --------------------------------------------------------------------


def _pyproject_module(start: Path) -> str | None:
    for folder in (start, *start.parents):
        path = folder / "pyproject.toml"
        if path.is_file():
            tool = tomllib.loads(path.read_text()).get("tool", {})
            project = tool.get("dg", {}).get("project", {})
            module = project.get("code_location_target_module") or tool.get("dagster", {}).get(
                "module_name"
            )
            if module:
                if str(folder) not in sys.path:
                    sys.path.insert(0, str(folder))
                return str(module)
    return None


def load_definitions(
    module_name: str | None, python_file: str | None, attribute: str | None, cwd: Path
) -> dg.Definitions:
    """The code location's Definitions, found as ``dagster``/``dg`` find it."""
    if python_file:
        path = Path(python_file)
        if not path.is_file():
            raise CheckCommandError(f"no such file: {python_file}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.resolve().parent))
        spec.loader.exec_module(module)
    else:
        name = module_name or _pyproject_module(cwd)
        if name is None:
            raise CheckCommandError(
                "no code location: pass -m MODULE or -f FILE, or run where a pyproject.toml "
                "declares [tool.dg.project] code_location_target_module"
            )
        module = importlib.import_module(name)
    found = (
        [getattr(module, attribute)]
        if attribute
        else [value for value in vars(module).values() if isinstance(value, dg.Definitions)]
    )
    if attribute is None and not found and hasattr(module, "defs"):
        found = [module.defs]
    if len(found) != 1:
        raise CheckCommandError(
            f"{module.__name__} has {len(found)} Definitions objects; name one with -a"
        )
    value = found[0]
    definitions = value() if callable(value) and not isinstance(value, dg.Definitions) else value
    if not isinstance(definitions, dg.Definitions):
        raise CheckCommandError(f"{module.__name__}.{attribute} is not a dagster Definitions")
    return definitions


# --- running the checks ---------------------------------------------------------------------


def _partition_tags(partition: str | None, partition_range: str | None) -> dict[str, str]:
    if partition_range:
        first, sep, last = partition_range.partition(_RANGE)
        if not sep or not first or not last:
            raise CheckCommandError(
                f"--partition-range wants FIRST{_RANGE}LAST, got {partition_range!r}"
            )
        return {RANGE_START_TAG: first, RANGE_END_TAG: last}
    return {PARTITION_TAG: partition} if partition else {}


def _groups(
    definitions: dg.Definitions, selection: str
) -> list[tuple[dg.PartitionsDefinition | None, list[dg.AssetKey]]]:
    """The selected assets that have checks, grouped by partitions definition."""
    graph = definitions.resolve_asset_graph()
    try:
        keys = dg.AssetSelection.from_string(selection).resolve(graph)
    except Exception as error:  # noqa: BLE001  (the parser raises several kinds)
        raise CheckCommandError(f"--select {selection!r}: {error}") from error
    groups: dict[str, tuple[dg.PartitionsDefinition | None, list[dg.AssetKey]]] = {}
    for key in sorted(keys, key=lambda k: k.to_user_string()):
        node = graph.get(key)
        if not node.check_keys:
            continue
        partitions = node.partitions_def
        label = repr(partitions) if partitions is not None else ""
        groups.setdefault(label, (partitions, []))[1].append(key)
    if not groups:
        raise CheckCommandError(f"--select {selection!r} matches no asset with checks")
    return list(groups.values())


def _outcomes(result: dg.ExecuteInProcessResult) -> list[Outcome]:
    return [
        Outcome(
            asset=e.asset_key.to_user_string(),
            partition=e.partition,
            check=e.check_name,
            passed=e.passed,
            severity=e.severity.value,
            metadata={k: getattr(v, "value", v) for k, v in e.metadata.items()},
            description=e.description,
        )
        for e in result.get_asset_check_evaluations()
    ]


def _step_errors(result: dg.ExecuteInProcessResult) -> list[str]:
    errors = []
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error
        message = error.message.strip().splitlines()[0] if error else "step failed"
        if error is not None and error.cls_name == "DagsterAssetCheckFailedError":
            continue  # a blocking check that failed: already an outcome
        errors.append(f"{event.step_key}: {message}")
    return errors


def run_checks(
    definitions: dg.Definitions,
    selection: str,
    *,
    partition: str | None,
    partition_range: str | None,
    materialize: bool,
    instance: dg.DagsterInstance,
) -> RunReport:
    """Run the checks of the selection (after materializing it, with ``materialize``)."""
    tags = _partition_tags(partition, partition_range)
    outcomes: list[Outcome] = []
    errors: list[str] = []
    for number, (partitions, keys) in enumerate(_groups(definitions, selection)):
        if partitions is not None and not tags:
            raise CheckCommandError(
                f"{', '.join(k.to_user_string() for k in keys)} are partitioned: pass "
                "--partition KEY or --partition-range FIRST...LAST"
            )
        checks = dg.AssetSelection.checks_for_assets(*keys)
        target = dg.AssetSelection.assets(*keys) | checks if materialize else checks
        job = dg.define_asset_job(
            f"idem_assets_check_{number}", selection=target, partitions_def=partitions
        )
        resolved = dg.Definitions.merge(definitions, dg.Definitions(jobs=[job]))
        result = resolved.resolve_job_def(job.name).execute_in_process(
            instance=instance, tags=tags if partitions is not None else {}, raise_on_error=False
        )
        outcomes += _outcomes(result)
        errors += _step_errors(result)
    return RunReport(outcomes, errors)


# --- reporting ------------------------------------------------------------------------------


def table(outcomes: Sequence[Outcome]) -> str:
    """The outcomes as an aligned text table."""
    header = ("asset", "partition", "check", "passed", "severity", "metadata")
    rows = [
        (
            o.asset,
            o.partition or "-",
            o.check,
            "yes" if o.passed else "NO",
            o.severity,
            o.key_metadata(),
        )
        for o in outcomes
    ]
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def junit_xml(report: RunReport) -> str:
    """JUnit XML: a test case per (asset, check, partition); ERROR failures fail it."""
    failures = sum(o.fails_ci for o in report.outcomes)
    suite = ET.Element(
        "testsuite",
        name="idem-assets check",
        tests=str(len(report.outcomes) + len(report.errors)),
        failures=str(failures),
        errors=str(len(report.errors)),
    )
    for outcome in report.outcomes:
        name = outcome.check + (f"[{outcome.partition}]" if outcome.partition else "")
        case = ET.SubElement(suite, "testcase", classname=outcome.asset, name=name)
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="severity", value=outcome.severity)
        ET.SubElement(properties, "property", name="partition", value=outcome.partition or "")
        text = "\n".join(f"{k}: {v}" for k, v in outcome.metadata.items())
        if outcome.fails_ci:
            failure = ET.SubElement(
                case,
                "failure",
                type="ERROR",
                message=(
                    f"{outcome.asset} {name} failed"
                    + (f": {outcome.description}" if outcome.description else "")
                ),
            )
            failure.text = text
        elif not outcome.passed:
            ET.SubElement(case, "system-out").text = f"WARN (not failing CI)\n{text}"
    for error in report.errors:
        case = ET.SubElement(
            suite, "testcase", classname="idem-assets check", name=error.split(":", 1)[0]
        )
        ET.SubElement(case, "error", message=error)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _instance() -> dg.DagsterInstance:
    return (
        dg.DagsterInstance.get()
        if os.environ.get(DAGSTER_HOME_ENV)
        else dg.DagsterInstance.ephemeral()
    )


def main(argv: list[str] | None = None) -> int:
    """``idem-assets check ...``; exit 1 when an ERROR check failed, 2 on usage errors."""
    parser = argparse.ArgumentParser(prog="idem-assets", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="run asset checks; exit 1 if an ERROR one fails")
    check.add_argument(
        "--select", required=True, help="Dagster asset selection, e.g. 'key:orders or group:lake'"
    )
    when = check.add_mutually_exclusive_group()
    when.add_argument("--partition", help="one partition key")
    when.add_argument(
        "--partition-range",
        metavar="FIRST...LAST",
        help="an inclusive range of partition keys, checked day by day",
    )
    check.add_argument(
        "--materialize",
        action="store_true",
        help="materialize the selection first (a staging lake in CI)",
    )
    check.add_argument("--junit-xml", metavar="FILE", help="write the results as JUnit XML")
    check.add_argument("-m", "--module-name", help="the code location's module")
    check.add_argument("-f", "--python-file", help="the code location's Python file")
    check.add_argument("-a", "--attribute", help="the Definitions attribute in it")
    args = parser.parse_args(argv)
    try:
        definitions = load_definitions(
            args.module_name, args.python_file, args.attribute, Path.cwd()
        )
        report = run_checks(
            definitions,
            args.select,
            partition=args.partition,
            partition_range=args.partition_range,
            materialize=args.materialize,
            instance=_instance(),
        )
    except CheckCommandError as error:
        print(f"idem-assets check: {error}", file=sys.stderr)
        return 2
    print(table(report.outcomes))
    for error in report.errors:
        print(f"error: {error}")
    failed = [o for o in report.outcomes if o.fails_ci]
    warned = [o for o in report.outcomes if not o.passed and not o.fails_ci]
    print(
        f"\n{len(report.outcomes)} check results: {len(failed)} ERROR failed, "
        f"{len(warned)} WARN, {len(report.errors)} errors"
    )
    if args.junit_xml:
        Path(args.junit_xml).write_text(junit_xml(report))
    return 1 if failed or report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
