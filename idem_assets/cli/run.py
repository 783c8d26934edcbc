"""Run the selected assets' checks (after materializing them, if asked) and collect the
outcomes, one per (asset, partition, check)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from idem_assets.cli.location import CheckCommandError
from idem_assets.lib.landing_io import DAYS_WITHOUT_FILES, EMPTY_DAYS
from idem_assets.partitions import PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG

_RANGE = "..."
_SHOWN_DAYS = 7
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
    # Each materialized asset's days that had no landing file.
    empty_days: dict[str, EmptyDays] = field(default_factory=dict)

    def empty_day_lines(self) -> list[str]:
        """A line per materialized asset with days that had no landing files."""
        found = sorted(self.empty_days.items())
        return [days.line(asset) for asset, days in found if days.count]


@dataclass(frozen=True)
class EmptyDays:
    """An asset's days without landing files in a run: how many, the first of them, of how
    many days run."""

    count: int
    listed: tuple[str, ...]
    of: int

    def line(self, asset: str) -> str:
        """``orders: 3 of 3 day(s) had no landing files (2024-03-01, …); …``."""
        shown = ", ".join(self.listed[:_SHOWN_DAYS])
        more = " …" if self.count > _SHOWN_DAYS else ""
        return (
            f"{asset}: {self.count} of {self.of} day(s) had no landing files "
            f"({shown}{more}); their checks ran on empty days"
        )


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
        with warnings.catch_warnings():
            # Dagster's parser passes its own beta `include_sources` for `*`, group: and tag:.
            warnings.simplefilter("ignore", dg.BetaWarning)
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


def _empty_days(result: dg.ExecuteInProcessResult) -> dict[str, EmptyDays]:
    """Each materialized asset's days without landing files, from its materialization
    metadata (the run's figures, the same on each partition of a range)."""
    counts: dict[str, int] = {}
    listed: dict[str, set[str]] = {}
    partitions: dict[str, set[str]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
        metadata = materialization.metadata
        if DAYS_WITHOUT_FILES not in metadata:
            continue
        asset = materialization.asset_key.to_user_string()
        count = metadata[DAYS_WITHOUT_FILES]
        counts[asset] = max(counts.get(asset, 0), int(getattr(count, "value", count)))
        days = metadata.get(EMPTY_DAYS)
        listed.setdefault(asset, set()).update(getattr(days, "value", days) or ())
        partitions.setdefault(asset, set()).add(materialization.partition or "")
    return {
        asset: EmptyDays(count, tuple(sorted(listed[asset])), len(partitions[asset]))
        for asset, count in counts.items()
    }


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
    empty_days: dict[str, EmptyDays] = {}
    for number, (partitions, keys) in enumerate(_groups(definitions, selection)):
        if partitions is not None and not tags:
            raise CheckCommandError(
                f"{', '.join(k.to_user_string() for k in keys)} are partitioned: pass "
                "--partition KEY or --partition-range FIRST...LAST"
            )
        checks = dg.AssetSelection.checks_for_assets(*keys)
        target = dg.AssetSelection.assets(*keys) | checks if materialize else checks
        # Partitioned like the selected assets (or the assets whose checks are selected).
        job = dg.define_asset_job(f"idem_assets_check_{number}", selection=target)
        resolved = dg.Definitions.merge(definitions, dg.Definitions(jobs=[job]))
        result = resolved.resolve_job_def(job.name).execute_in_process(
            instance=instance, tags=tags if partitions is not None else {}, raise_on_error=False
        )
        outcomes += _outcomes(result)
        errors += _step_errors(result)
        empty_days.update(_empty_days(result))
    return RunReport(outcomes, errors, empty_days)
