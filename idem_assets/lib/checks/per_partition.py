"""Checks of a lake asset, reported per partition from the asset's own step.

A lake asset's checks are check specs on the asset itself, partitioned like it. The step
writes its output first (Dagster stores an output before the asset's generator resumes),
then evaluates the selected checks for every partition of the run — one partition, or every
day of a backfill range — and yields one ``AssetCheckEvaluation`` per (check, partition).
So the Checks tab and the partition view show each day's result, a backfill range leaves no
check execution PLANNED, and no check costs a step process of its own. A run that selects
only checks (the UI's "Execute checks", ``idem-assets check``) evaluates them against the
stored table without writing.

A check costs per range, not per day: the standard checks read a range of days in one
pass and split their results by day (``spans``), and a partition whose result is proven
unchanged from metadata is reported again without reading any data (``proofs``).
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

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.io_manager import Window
from idem_assets.lake.erasure import Erased
from idem_assets.lib.checks.proofs import Reads, Stamps, carried, memo_key, memo_scope, to_memo
from idem_assets.lib.landing_io import shared_landing_reads
from idem_assets.partitions import window_dates
from idem_assets.resources import CheckpointResource, LakeResource

if TYPE_CHECKING:
    from idem_assets.lib.asset_def import LakeAssetDef

# Evaluates the selected checks of one LakeCheck over one partition's window.
Evaluate = Callable[
    ["LakeAssetDef", LakeResource, Window, frozenset[str]], Iterable[dg.AssetCheckResult]
]
# Evaluates them over several windows at once, yielding (window index, result): a check
# that reads a range of days in one pass (grouped by day) or one table version for all.
EvaluateWindows = Callable[
    ["LakeAssetDef", LakeResource, Sequence[Window], frozenset[str]],
    Iterable[tuple[int, dg.AssetCheckResult]],
]


@dataclass(frozen=True)
class CheckName:
    """A check a LakeCheck reports: its name, what it asserts (shown in the UI) and the most
    severe outcome it can have (WARN for a check that only ever warns)."""

    name: str
    description: str
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR

    def blocks(self, blocking: bool) -> bool:
        """Whether the check blocks downstream on an asset whose checks are ``blocking``.

        Dagster blocks only on a failed ERROR evaluation: a check that can only warn never
        blocks, so its spec and its evaluations say so (the UI would call it blocking).
        """
        return blocking and self.severity == dg.AssetCheckSeverity.ERROR


@dataclass(frozen=True)
class LakeCheck:
    """One or more checks computed together (e.g. from one read of the landing files).

    ``evaluate`` yields an ``AssetCheckResult`` with ``check_name`` set for each selected
    name, for one partition's window; a check that can read several days at once gives
    ``evaluate_windows`` instead, called once per step with the windows to evaluate and
    yielding (window index, result). ``depends_on`` names assets the checks read besides the
    asset itself (lineage). ``reads`` says what the results depend on besides the check's
    definition: with it, a partition's result is carried forward while those are unchanged
    (see ``proofs``); without it (None), the check is evaluated every time. A check whose
    ``reads`` holds ``Reads.ERASURES`` is also called with ``erased=``: the keys the erasure
    ledger holds for the asset's erasable columns, read once per step.
    """

    names: tuple[CheckName, ...]
    evaluate: Evaluate | None = None
    depends_on: tuple[dg.AssetKey, ...] = ()
    evaluate_windows: EvaluateWindows | None = None
    reads: frozenset[Reads] | None = None

    def __post_init__(self) -> None:
        if (self.evaluate is None) == (self.evaluate_windows is None):
            raise ValueError("a LakeCheck takes exactly one of evaluate and evaluate_windows")

    def results(
        self,
        definition: LakeAssetDef,
        lake: LakeResource,
        windows: Sequence[Window],
        wanted: frozenset[str],
        erased: Erased,
    ) -> Iterator[tuple[int, dg.AssetCheckResult]]:
        """(window index, result) for each selected check and window; ``erased`` is passed
        on to a check that reads ``Reads.ERASURES``."""
        if not windows:
            return
        extra = {"erased": erased} if Reads.ERASURES in (self.reads or ()) else {}
        if self.evaluate_windows is not None:
            yield from self.evaluate_windows(definition, lake, windows, wanted, **extra)
            return
        assert self.evaluate is not None
        for index, window in enumerate(windows):
            for result in self.evaluate(definition, lake, window, wanted, **extra):
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
            blocking=item.blocks(blocking),
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


def spans(windows: Sequence[Window]) -> list[tuple[Window, list[int]]]:
    """Adjacent windows joined into one span each, with the indexes they came from.

    A check reads a span in one pass and splits its result per window: a whole range of
    days costs one read, a few scattered days a read each.
    """
    order = sorted(range(len(windows)), key=lambda i: (windows[i].start is None, windows[i].start))
    out: list[tuple[Window, list[int]]] = []
    for index in order:
        window = windows[index]
        if out and window.partitioned and out[-1][0].end == window.start:
            span, members = out[-1]
            out[-1] = (Window(span.start, window.end), [*members, index])
        else:
            out.append((window, [index]))
    return out


def evaluate_checks(
    context: dg.AssetExecutionContext,
    definition: LakeAssetDef,
    lake: LakeResource,
    checkpoint: CheckpointResource,
    checks: Sequence[LakeCheck],
    blocking: bool,
) -> Iterator[dg.AssetCheckEvaluation]:
    """One evaluation per selected check and partition of the run: carried forward where
    proven unchanged, evaluated over the rest in as few passes as each check allows."""
    keys = [key for key in context.selected_asset_check_keys if key.asset_key == definition.key]
    selected = frozenset(key.name for key in keys)
    if not selected:
        return
    windows = partition_windows(definition, context)
    partitions = [partition for partition, _ in windows]
    targets = target_materializations(context, definition.key, partitions)
    with checkpoint.open() as store, shared_landing_reads():
        # The erasure ledger, read once for every check of the step.
        keys = definition.spec.erasable_keys
        erased = ErasureLedger(store).erased().of(keys) if keys else Erased()
        stamps = Stamps(definition, lake, store, [window for _, window in windows], erased)
        for check in checks:
            items = [item for item in check.names if item.name in selected]
            if not items:
                continue
            wanted = [item.name for item in items]
            done = _evaluate(
                context.run.run_id, definition, lake, store, stamps, partitions, check, wanted
            )
            for index, partition in enumerate(partitions):
                for item in items:
                    result = done.get((index, item.name))
                    if result is not None:
                        yield evaluation(
                            definition.key,
                            result,
                            partition,
                            item.blocks(blocking),
                            targets.get(partition),
                        )


def _evaluate(
    run_id: str,
    definition: LakeAssetDef,
    lake: LakeResource,
    store: CheckpointStore,
    stamps: Stamps,
    partitions: Sequence[str | None],
    check: LakeCheck,
    wanted: list[str],
) -> dict[tuple[int, str], dg.AssetCheckResult]:
    """One check's result per (window index, name): carried forward, or evaluated and kept."""
    scope = memo_scope(definition)
    windows = stamps.windows
    # Stamps first: whatever is read afterwards is at least as new as they are.
    described = [(name.name, name.description) for name in check.names]
    stamped = [stamps.stamp(check.reads, described, index) for index in range(len(windows))]
    known = (
        store.memos(scope, [memo_key(p, n) for p in partitions for n in wanted])
        if check.reads is not None
        else {}
    )
    done: dict[tuple[int, str], dg.AssetCheckResult] = {}
    for index, partition in enumerate(partitions):
        for name in wanted:
            found = carried(known.get(memo_key(partition, name)), stamped[index])
            if found is not None:
                done[(index, name)] = found
    todo = [i for i in range(len(windows)) if any((i, n) not in done for n in wanted)]
    keep = []
    for position, result in check.results(
        definition, lake, [windows[i] for i in todo], frozenset(wanted), stamps.erased
    ):
        assert result.check_name in wanted, f"unexpected check {result.check_name}"
        index, stamp = todo[position], stamped[todo[position]]
        if stamp is not None:
            key = memo_key(partitions[index], result.check_name)
            memo = to_memo(key, stamp, result, check.reads or frozenset(), run_id)
            if memo is not None:
                keep.append(memo)
        done[(index, result.check_name)] = dg.AssetCheckResult(
            check_name=result.check_name,
            passed=result.passed,
            severity=result.severity,
            description=result.description,
            metadata={**result.metadata, "carried_forward": False},
        )
    store.remember(scope, keep)
    return done


def target_materializations(
    context: dg.AssetExecutionContext, asset_key: dg.AssetKey, partitions: Sequence[str | None]
) -> dict[str | None, TargetMaterialization]:
    """The newest materialization of each partition: what its check evaluations are about.

    Without it the UI's partition status of a check cannot tell which materialization an
    evaluation checked, and shows every day Missing. The step's own output is stored before
    the checks run, so a materializing run points at itself; a checks-only run at the last
    one. Two queries, however many partitions the run covers.
    """
    instance = context.instance
    if list(partitions) == [None]:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key), limit=1
        ).records
    else:
        latest = instance.event_log_storage.get_latest_storage_id_by_partition(
            asset_key,
            dg.DagsterEventType.ASSET_MATERIALIZATION,
            {partition for partition in partitions if partition is not None},
        )
        records = (
            instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=asset_key, storage_ids=list(latest.values())),
                limit=len(latest),
            ).records
            if latest
            else []
        )
    return {
        record.partition_key: TargetMaterialization(
            run_id=record.run_id, storage_id=record.storage_id, timestamp=record.timestamp
        )
        for record in records
    }


def check_outputs(
    context: dg.AssetExecutionContext, definition: LakeAssetDef
) -> Iterator[dg.Output[None]]:
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
