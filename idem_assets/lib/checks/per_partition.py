"""Checks of a lake asset, reported per partition from the asset's own step.

A lake asset's checks are check specs on the asset itself, partitioned like it. The step
writes its output first (Dagster stores an output before the asset's generator resumes),
then evaluates each selected check once per partition of the run — one partition, or every
day of a single-run backfill range — and yields one ``AssetCheckEvaluation`` per
(check, partition). So the Checks tab and the partition view show each day's result, a
backfill range leaves no check execution PLANNED, and no check costs a step process of its
own. A run that selects only checks (the UI's "Execute checks", ``idem-assets check``)
evaluates them against the stored table without writing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

# Not exported by dagster; the evaluation's link to the materialization it checked.
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData as TargetMaterialization,
)

from idem_assets.io_manager import Window
from idem_assets.partitions import window_dates
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    from idem_assets.lib.asset_def import LakeAssetDef

# Evaluates the selected checks of one LakeCheck over one partition's window.
Evaluate = Callable[
    ["LakeAssetDef", LakeResource, Window, frozenset[str]], Iterable[dg.AssetCheckResult]
]
# Evaluates them over every window of a run at once, yielding (window index, result): for a
# check that reads the same thing for each day (a table version's keys), once per step.
EvaluateWindows = Callable[
    ["LakeAssetDef", LakeResource, Sequence[Window], frozenset[str]],
    Iterable[tuple[int, dg.AssetCheckResult]],
]


@dataclass(frozen=True)
class CheckName:
    """A check a LakeCheck reports: its name and what it asserts (shown in the UI)."""

    name: str
    description: str


@dataclass(frozen=True)
class LakeCheck:
    """One or more checks computed together (e.g. from one read of the landing files).

    ``evaluate`` yields an ``AssetCheckResult`` with ``check_name`` set for each selected
    name, for one partition's window; a check that would read the same data for every day
    of a range gives ``evaluate_windows`` instead, called once per step with all the run's
    windows. ``depends_on`` names assets the checks read besides the asset itself (lineage).
    """

    names: tuple[CheckName, ...]
    evaluate: Evaluate | None = None
    depends_on: tuple[dg.AssetKey, ...] = ()
    evaluate_windows: EvaluateWindows | None = None

    def __post_init__(self) -> None:
        if (self.evaluate is None) == (self.evaluate_windows is None):
            raise ValueError("a LakeCheck takes exactly one of evaluate and evaluate_windows")

    def results(
        self,
        definition: LakeAssetDef,
        lake: LakeResource,
        windows: Sequence[Window],
        wanted: frozenset[str],
    ) -> Iterator[tuple[int, dg.AssetCheckResult]]:
        """(window index, result) for each selected check and window."""
        if self.evaluate_windows is not None:
            yield from self.evaluate_windows(definition, lake, windows, wanted)
            return
        assert self.evaluate is not None
        for index, window in enumerate(windows):
            for result in self.evaluate(definition, lake, window, wanted):
                yield index, result


def check_specs(
    definition: LakeAssetDef, checks: Sequence[LakeCheck], blocking: bool
) -> list[dg.AssetCheckSpec]:
    """The asset's check specs, partitioned like the asset."""
    return [
        dg.AssetCheckSpec(
            item.name,
            asset=definition.key,
            description=item.description,
            blocking=blocking,
            partitions_def=definition.partitions_def,
            additional_deps=list(check.depends_on),
        )
        for check in checks
        for item in check.names
    ]


def partition_windows(
    definition: LakeAssetDef, context: dg.AssetExecutionContext
) -> list[tuple[str | None, Window]]:
    """(partition key, window) for each partition of the run; (None, whole table) if none."""
    partitions_def = definition.partitions_def
    if partitions_def is None:
        return [(None, Window())]
    assert isinstance(partitions_def, dg.TimeWindowPartitionsDefinition)
    return [
        (key, Window(*window_dates(partitions_def.time_window_for_partition_key(key))))
        for key in context.partition_keys
    ]


def evaluate_checks(
    context: dg.AssetExecutionContext,
    definition: LakeAssetDef,
    lake: LakeResource,
    checks: Sequence[LakeCheck],
    blocking: bool,
) -> Iterator[dg.AssetCheckEvaluation]:
    """One evaluation per selected check and partition of the run."""
    keys = [key for key in context.selected_asset_check_keys if key.asset_key == definition.key]
    selected = frozenset(key.name for key in keys)
    windows = partition_windows(definition, context) if selected else []
    targets = target_materializations(
        context, definition.key, [partition for partition, _ in windows]
    )
    for check in checks:
        wanted = selected & {item.name for item in check.names}
        if not wanted:
            continue
        for index, result in check.results(
            definition, lake, [window for _, window in windows], wanted
        ):
            assert result.check_name in wanted, f"unexpected check {result.check_name}"
            partition = windows[index][0]
            yield evaluation(definition.key, result, partition, blocking, targets.get(partition))


def target_materializations(
    context: dg.AssetExecutionContext, asset_key: dg.AssetKey, partitions: Sequence[str | None]
) -> dict[str | None, TargetMaterialization]:
    """The newest materialization of each partition: what its check evaluations are about.

    Without it the UI's partition status of a check cannot tell which materialization an
    evaluation checked, and shows every day Missing. The step's own output is stored before
    the checks run, so a materializing run points at itself; a checks-only run at the last one.
    """
    found: dict[str | None, TargetMaterialization] = {}
    for partition in partitions:
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=asset_key, asset_partitions=None if partition is None else [partition]
            ),
            limit=1,
        ).records
        if records:
            record = records[0]
            found[partition] = TargetMaterialization(
                run_id=record.run_id, storage_id=record.storage_id, timestamp=record.timestamp
            )
    return found


def check_outputs(
    context: dg.AssetExecutionContext, definition: LakeAssetDef
) -> Iterator[dg.Output]:
    """The (empty) outputs of the evaluated checks, so Dagster counts them as yielded."""
    for key in context.selected_asset_check_keys:
        if key.asset_key == definition.key:
            name = context.assets_def.get_output_name_for_asset_check_key(key)
            yield dg.Output(None, output_name=name)


def evaluation(
    asset_key: dg.AssetKey,
    result: dg.AssetCheckResult,
    partition: str | None,
    blocking: bool,
    target: TargetMaterialization | None = None,
) -> dg.AssetCheckEvaluation:
    """A check result as the evaluation of one partition."""
    assert result.check_name is not None
    return dg.AssetCheckEvaluation(
        asset_key=asset_key,
        check_name=result.check_name,
        passed=result.passed,
        metadata=result.metadata,
        severity=result.severity,
        description=result.description,
        blocking=blocking,
        partition=partition,
        target_materialization_data=target,
    )
