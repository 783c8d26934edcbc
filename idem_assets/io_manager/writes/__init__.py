"""Every write the IO manager makes, one module per kind, named after the ``lake`` module
it writes with:

=================  =================================  =====================================
module             asked for by                       writes with
=================  =================================  =====================================
``overwrite``      ``idem/strategy: overwrite``,      ``lake.overwrite`` (replaceWhere)
                   mode ``overwrite``
``merge``          ``idem/strategy: merge``           ``lake.merge`` (newest row per key)
``replace``        ``idem/strategy: replace``,        ``lake.replace`` (atomic swap)
                   mode ``create_or_replace``
``history``        ``idem/strategy: history``         ``lake.history`` (SCD type 2)
``clause_merge``   mode ``merge`` (dagster-delta)     ``lake.clauses`` (MERGE by clauses)
``append``         mode ``append``                    ``lake.append`` (txn, exactly once)
``create``         modes ``error`` and ``ignore``     ``lake.tables.create_table``
=================  =================================  =====================================

Each is a ``WriteStrategy`` bound to its settings, made once per output here
(``strategy_for``, ``strategy_for_mode``) from one registry (``STRATEGIES``). The rerun
comparison of the asset checks asks the same object (``compare``, ``compare_days``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.delta_modes import ModeWrite
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes.append import Append
from idem_assets.io_manager.writes.clause_merge import ClauseMerge
from idem_assets.io_manager.writes.create import Create
from idem_assets.io_manager.writes.history import History
from idem_assets.io_manager.writes.merge import Merge
from idem_assets.io_manager.writes.overwrite import Overwrite
from idem_assets.io_manager.writes.replace import Replace
from idem_assets.io_manager.writes.rerun_equality import RerunComparison
from idem_assets.io_manager.writes.strategy import (
    ModeStrategy,
    SpecStrategy,
    WriteRequest,
    WriteStrategy,
    Written,
    window_slice,
)
from idem_assets.lake import Commit, LakeTable, WriteOptions, WriteResult

# Every kind of write, by name; the only place a write is chosen.
STRATEGIES: Mapping[str, type[WriteStrategy]] = {
    kind.name: kind for kind in (Overwrite, Merge, Replace, History, ClauseMerge, Append, Create)
}
# Which kind each of dagster-delta's modes asks for (an ``idem/strategy`` names its own).
_BY_MODE = {"merge": "clause_merge", "append": "append", "error": "create", "ignore": "create"}


def strategy_for(spec: WriteSpec) -> SpecStrategy:
    """The strategy that writes ``spec``'s table (``append`` is a stream's own write)."""
    kind = STRATEGIES.get(spec.strategy)
    if kind is None or not issubclass(kind, SpecStrategy):
        raise ValueError(
            f"strategy {spec.strategy!r} is written by its own asset, not the IO manager"
        )
    return kind(spec)


def strategy_for_mode(plan: ModeWrite, covered: PartitionSlice) -> ModeStrategy:
    """The strategy that writes an output in one of dagster-delta's modes."""
    name = _BY_MODE.get(plan.mode)
    if name is None:
        raise ValueError(f"mode {plan.mode!r} is not written here")
    kind = STRATEGIES[name]
    assert issubclass(kind, ModeStrategy)
    return kind(plan, covered)


def write(
    spec: WriteSpec,
    target: LakeTable,
    batch: PreparedBatch,
    window: Window,
    commit_metadata: Mapping[str, Any] | None = None,
    *,
    options: WriteOptions | None = None,
) -> WriteResult:
    """Write a prepared batch with the spec's strategy over ``window`` (the spec's days of
    it for an overwrite), untracked; no commit when the table holds the rows."""
    strategy = strategy_for(spec)
    request = WriteRequest(
        spec.table or target.uri,
        target,
        window_slice(spec, window),
        Commit(dict(commit_metadata or {}), strategy.options(options or WriteOptions())),
        None,
    )
    return strategy.write(request, batch)


def compare(
    spec: WriteSpec, target: LakeTable, batch: PreparedBatch, window: Window
) -> RerunComparison:
    """Compare a recomputed batch with what the table holds, without writing."""
    return strategy_for(spec).compare(target, batch, window)


def compare_days(
    spec: WriteSpec, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
) -> list[RerunComparison]:
    """``compare`` for each of ``days`` (adjacent), from one batch recomputed for all."""
    return strategy_for(spec).compare_days(target, batch, days)


__all__ = [
    "STRATEGIES",
    "Append",
    "ClauseMerge",
    "Create",
    "History",
    "Merge",
    "ModeStrategy",
    "Overwrite",
    "Replace",
    "RerunComparison",
    "SpecStrategy",
    "WriteRequest",
    "WriteStrategy",
    "Written",
    "compare",
    "compare_days",
    "strategy_for",
    "strategy_for_mode",
    "window_slice",
]
