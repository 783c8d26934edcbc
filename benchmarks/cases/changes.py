"""Family C: a change set with deletes into customers, merged and kept as SCD2 history.

One change set, clustered as in case 3 (the newest 0.5% of the customers changed plus as
many new ones: 1% of the table's keys), of which 0.1% of the table's keys are deletes
(``op`` = "D": a tenth of the change rows; the others ``op`` = "U"; ``updated_at`` is the
version), goes into synthetic customers in files of 100k ids (the table family DD caches).
Each sample starts from a fresh copy of the base table (data files hard-linked, log copied:
the same version and files for every contender) and first does its own job once on the same
case at 1,000 rows (imports, delta-rs's first MERGE, Dagster's first run), both untimed.

- ``ours merge_with_deletes``: upserts and deletes in one MERGE ordered by the version, the
  deletes kept in ``<table>__tombstones`` first (inside the timer);
- ``ours rerun``: the same change set again right after it was merged: it must commit nothing;
- ``delta-rs MERGE``: by hand on the key, delete where ``s.op = 'D'``, else update all, insert
  all but deletes; no version ordering;
- ``dagster-delta merge (WhenNotMatchedBySourceDelete)``: its IO manager in merge mode
  (``merge_type`` custom: update all where the source is newer, insert all, delete the target
  rows the source lacks) through ``dg.materialize``. It has no delete marker: a row is deleted
  by being absent from the source within the clause's predicate, so the source must hold
  every surviving row of that scope. *key range*: the change set's [min, max] ids, passed per
  run as the output's ``merge_operations_config`` metadata; its source is the change set
  without its deletes, which holds every surviving row of that range only because this
  clustered change set covers every id in it (one with gaps would delete the unchanged ids in
  the gaps). *whole table*: no predicate; the source is the whole table after the changes,
  built before the timer;
- ``ours merge_history``: SCD2 (valid_from / valid_to / is_current from the version) into the
  customers in history form, the deletes kept in ``<table>__history_deletes`` first (inside
  the timer); ``idem_assets.lake.history`` is imported lazily and the contender reported as
  not available where it is missing.

After the timer each result table is checked against the change set by streaming counts (so a
fast wrong answer cannot win): rows = before + inserts − deletes, every changed row's content
stored, no deleted id left (history: among the current rows, and every old version kept); the
new Delta versions and their rows and files come from the table's log.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from benchmarks.cases.dropin_delta import (
    FILE_ROWS,
    KEY,
    METHOD,
    _first_error_line,
    _link_copy,
    _materialize,
    base_table,
    customers_file,
)
from benchmarks.data import CHANGE_OP, CUSTOMERS_SCHEMA, DATA_DIR, DELETE, customer_change_events
from benchmarks.harness import Contender, Stats, compare, table

OURS = "ours merge_with_deletes"
RERUN = "ours rerun (same change set)"
PLAIN = "delta-rs MERGE"
DD_RANGE = "dagster-delta merge (WhenNotMatchedBySourceDelete), key range"
DD_TABLE = "dagster-delta merge (WhenNotMatchedBySourceDelete), whole table"
HISTORY = "ours merge_history"
CONTENDERS = (OURS, RERUN, PLAIN, DD_RANGE, DD_TABLE, HISTORY)
SHARE, DELETE_SHARE = 0.01, 0.001
WARM_ROWS = 1_000
WARMUP = ["warmup", "customers"]
ID, VERSION = "customer_id", "updated_at"
CHANGED_EMAIL = "@example.org"  # customer_changes' emails; the base table's end in .com
NEWER = "s.updated_at > t.updated_at"
UNAVAILABLE = "not available: idem_assets.lake.history is not in this tree"
# The table each contender keeps its deletes in beside the result (none: absent, version -1).
SIDE = {HISTORY: ("__history_deletes", "deletes log")}
TOMBSTONES = ("__tombstones", "tombstones")


def change_set(n: int) -> pa.Table:
    """The case's change set for ``n`` customers, with its ``op`` marker."""
    return customer_change_events(n, SHARE, DELETE_SHARE, clustered=True)


def expected(n: int, changes: pa.Table) -> dict[str, Any]:
    """What a correct merge of ``changes`` into ``n`` customers does, from the change set."""
    ids = changes.column(ID).to_numpy()
    deleting = changes.column(CHANGE_OP).to_numpy(zero_copy_only=False) == DELETE
    return {
        "rows": n,
        "inserts": int(((ids >= n) & ~deleting).sum()),
        "updates": int(((ids < n) & ~deleting).sum()),
        "deletes": int(deleting.sum()),
        "deleted_ids": ids[deleting].tolist(),
    }


def upserts(changes: pa.Table) -> pa.Table:
    """The change set without its deletes and marker column."""
    return changes.filter(pc.not_equal(changes.column(CHANGE_OP), DELETE)).drop([CHANGE_OP])


def surviving(n: int, changes: pa.Table) -> pa.Table:
    """The whole customers table after ``changes``: what a snapshot source must hold."""
    base = pq.read_table(customers_file(n))
    kept = base.filter(pc.invert(pc.is_in(base.column(ID), changes.column(ID))))
    return pa.concat_tables([kept, upserts(changes).cast(CUSTOMERS_SCHEMA)])


def history_table(n: int) -> Path:
    """The customers in history form (each row current since its version), built once."""
    path = DATA_DIR / f"changes-history-customers-{n}"
    if not (path / "_delta_log").exists():
        data = pq.read_table(customers_file(n))
        data = (
            data.append_column("valid_from", data.column(VERSION))
            .append_column("valid_to", pa.nulls(n, data.schema.field(VERSION).type))
            .append_column("is_current", pa.array(np.ones(n, dtype=bool)))
        )
        for start in range(0, n, FILE_ROWS):
            write_deltalake(str(path), data.slice(start, FILE_ROWS), mode="append")
    return path


def merge_history_function() -> Callable[..., Any] | None:
    """``idem_assets.lake.history.merge_history``, or None while it is not in this tree."""
    try:
        from idem_assets.lake.history import merge_history
    except ImportError:
        return None
    return merge_history


def dd_manager(root: Path) -> Any:
    """dagster-delta's IO manager in merge mode: update newer, insert, delete what is absent."""
    import dagster_delta as dd

    return dd.DeltaLakePyarrowIOManager(
        root_uri=str(root),
        storage_options=dd.LocalConfig(),
        mode=dd.WriteMode.merge,
        merge_config=dd.MergeConfig(
            merge_type=dd.MergeType.custom,
            predicate="s.customer_id = t.customer_id",
            source_alias="s",
            target_alias="t",
            merge_operations_config=dd.MergeOperationsConfig.model_validate(_operations(None)),
        ),
    )


def _operations(scope: str | None) -> dict[str, Any]:
    """dagster-delta's merge operations; deletes limited to ``scope`` (None: everywhere)."""
    return {
        "when_matched_update_all": [{"predicate": NEWER}],
        "when_not_matched_insert_all": [{}],
        "when_not_matched_by_source_delete": [{"predicate": scope}],
    }


def _asset(key: list[str], data: pa.Table, metadata: dict[str, Any]) -> dg.AssetsDefinition:
    @dg.asset(key=key)
    def customers_asset():  # noqa: ANN202  (a string annotation would not resolve here)
        return dg.Output(data, metadata=metadata)

    return customers_asset


def _job(state: dict[str, Any], n: int, key: list[str]) -> dict[str, Any]:
    """The case at ``n`` rows for the state's contender, on a fresh base table under its root."""
    contender, path = state["contender"], state["root"] / "/".join(key)
    _link_copy(history_table(n) if contender == HISTORY else base_table(n), path)
    changes = change_set(n)
    job = {**state, "uri": str(path), "changes": changes, "expected": expected(n, changes)}
    if contender == DD_RANGE:
        from idem_assets.lake.merge import pruning_ranges

        scope = pruning_ranges(changes, [ID])[0].sql("t")
        metadata = {"merge_operations_config": _operations(scope)}
        job["asset"] = _asset(key, upserts(changes), metadata)
    elif contender == DD_TABLE:
        job["asset"] = _asset(key, surviving(n, changes), {})
    return job


def run_ours(job: dict[str, Any]) -> dict[str, Any]:
    """Our merge_with_deletes."""
    from idem_assets.lake.merge import merge_with_deletes
    from idem_assets.lake.tables import LakeTable

    result = merge_with_deletes(
        LakeTable(job["uri"]),
        job["changes"],
        [ID],
        version_column=VERSION,
        delete_column=(CHANGE_OP, DELETE),
        prune_columns=[ID],  # as the shipped customers declare it
    )
    return {"proof": str(result.proof)}


def run_plain(job: dict[str, Any]) -> dict[str, Any]:
    """A hand-written delta-rs MERGE: the marker deletes, everything else updated or inserted."""
    (
        DeltaTable(job["uri"])
        .merge(
            job["changes"],
            predicate="t.customer_id = s.customer_id",
            source_alias="s",
            target_alias="t",
        )
        .when_matched_delete(predicate="s.op = 'D'")
        .when_matched_update_all(except_cols=[CHANGE_OP])
        .when_not_matched_insert_all(predicate="s.op <> 'D'", except_cols=[CHANGE_OP])
        .execute()
    )
    return {}


def run_dd(job: dict[str, Any]) -> dict[str, Any]:
    """One dg.materialize of the customers asset through dagster-delta's IO manager."""
    result = _materialize(job, job["asset"])
    return {} if result.success else {"failed": _first_error_line(result)}


def run_history(job: dict[str, Any]) -> dict[str, Any]:
    """Our merge_history (SCD2)."""
    merge_history = merge_history_function()
    if merge_history is None:
        raise RuntimeError(UNAVAILABLE)
    from idem_assets.lake.tables import LakeTable

    result = merge_history(
        LakeTable(job["uri"]),
        job["changes"],
        [ID],
        version_column=VERSION,
        delete_column=(CHANGE_OP, DELETE),
        prune_columns=[ID],  # as merge_with_deletes is given
    )
    return {
        "inserted": result.rows_inserted,
        "updated": result.rows_updated,
        "deleted": result.rows_deleted,
    }


RUNS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    OURS: run_ours,
    RERUN: run_ours,
    PLAIN: run_plain,
    DD_RANGE: run_dd,
    DD_TABLE: run_dd,
    HISTORY: run_history,
}


def _version(uri: str) -> int:
    return DeltaTable(uri).version() if (Path(uri) / "_delta_log").exists() else -1


def _side(contender: str) -> tuple[str, str]:
    """The suffix and name of the table beside the result that keeps the contender's deletes."""
    return SIDE.get(contender, TOMBSTONES)


def prepare(contender: str, n: int, workdir: str) -> dict[str, Any]:
    """A fresh root with the base table, the contender warmed up on 1,000 rows (untimed)."""
    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    state: dict[str, Any] = {"contender": contender, "root": root}
    if contender in (DD_RANGE, DD_TABLE):
        state.update(manager=dd_manager(root), instance=dg.DagsterInstance.ephemeral())
    warm = RUNS[contender](_job(state, WARM_ROWS, WARMUP))
    if warm.get("failed"):
        raise RuntimeError(f"warm-up failed: {warm['failed']}")
    job = _job(state, n, KEY)
    if contender == RERUN:
        run_ours(job)
    job["version_before"] = _version(job["uri"])
    job["tombstones_before"] = _version(job["uri"] + _side(contender)[0])
    return job


def run(job: dict[str, Any]) -> dict[str, Any]:
    """The timed call: the contender's write of the change set."""
    return RUNS[job["contender"]](job)


def verify(job: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The new versions, their rows and files, and the result table checked (after the timer)."""
    before, after = job["version_before"], _version(job["uri"])
    commits = after - before
    history = DeltaTable(job["uri"]).history(commits) if commits > 0 else []
    metrics = [entry.get("operationMetrics") or {} for entry in history]

    def total(*names: str) -> int:
        return sum(int(m.get(name, 0)) for m in metrics for name in names)

    rows = {
        kind: total(f"num_target_rows_{kind}") or int(extra.get(kind) or 0)
        for kind in ("inserted", "updated", "deleted")
    }
    return {
        **rows,
        "version_before": before,
        "version_after": after,
        "new_versions": commits,
        "tombstones_before": job["tombstones_before"],
        "tombstones_after": _version(job["uri"] + _side(job["contender"])[0]),
        "rewritten": total("num_target_files_removed", "num_removed_files"),
        "merge_seconds": total("execution_time_ms") / 1000,
        "check": check(job["uri"], job["expected"], history=job["contender"] == HISTORY),
    }


def check(uri: str, expect: dict[str, Any], history: bool) -> str:
    """ "ok", or how the table differs from a correct merge of the change set."""
    data = ds.dataset(DeltaTable(uri).file_uris(), format="parquet")
    current = ds.field("is_current") if history else None

    def count(condition: Any = None) -> int:
        if current is not None:
            condition = current if condition is None else current & condition
        return data.count_rows(filter=condition)

    found = {
        "rows": count(),
        "changed rows": count(pc.ends_with(ds.field("email").cast(pa.string()), CHANGED_EMAIL)),
        "deleted ids left": count(ds.field(ID).isin(expect["deleted_ids"])),
    }
    wanted = {
        "rows": expect["rows"] + expect["inserts"] - expect["deletes"],
        "changed rows": expect["inserts"] + expect["updates"],
        "deleted ids left": 0,
    }
    if history:
        found["versions kept"] = data.count_rows()
        wanted["versions kept"] = expect["rows"] + expect["inserts"] + expect["updates"]
    wrong = [f"{k} {found[k]:,} (expected {v:,})" for k, v in wanted.items() if found[k] != v]
    return "wrong: " + "; ".join(wrong) if wrong else "ok"


def merge_seconds(stat: Stats) -> float | None:
    """Median time of the contender's MERGE commits, from their metrics (None if none)."""
    values = [e["merge_seconds"] for e in stat.extra if e.get("merge_seconds") is not None]
    return statistics.median(values) if values else None


def _moved(stat: Stats) -> str:
    before, after = stat.last("version_before"), stat.last("version_after")
    text = f"yes: {before} → {after}" if stat.last("new_versions") else f"no: {after}"
    stones = stat.last("tombstones_before"), stat.last("tombstones_after")
    if stones[0] != stones[1]:
        name = _side(stat.name)[1]
        text += f"; {name} {stones[0] if stones[0] >= 0 else 'none'} → {stones[1]}"
    return text


def _line(stat: Stats, base: float | None) -> list[Any]:
    low, high = stat.spread
    failed = stat.last("failed")
    return [
        stat.name,
        stat.median,
        f"{low:.3f}–{high:.3f}",
        f"{stat.median / base:.2f}×" if base and not failed else "—",
        merge_seconds(stat),
        stat.rss,
        stat.last("inserted"),
        stat.last("updated"),
        stat.last("deleted"),
        stat.last("rewritten"),
        _moved(stat),
        f"fails: {failed[:160]}" if failed else stat.last("check"),
    ]


HEADERS = [
    "contender",
    "median s",
    "min–max s",
    "× delta-rs MERGE",
    "of which MERGE s",
    "peak RSS MiB",
    "rows inserted",
    "updated",
    "deleted",
    "files rewritten",
    "version moved",
    "result table",
]


def run_family(n: int, repetitions: int) -> tuple[str, dict[str, Any]]:
    """Every contender alternately on the change set; the report section and its numbers."""
    available = merge_history_function() is not None
    names = [c for c in CONTENDERS if c != HISTORY or available]
    for size in (WARM_ROWS, n):  # inputs built here, not inside a timed sample
        base_table(size)
        if available:
            history_table(size)
    changes = change_set(n)
    counts = {k: v for k, v in expected(n, changes).items() if k != "deleted_ids"}
    # Beside the cached tables: hard links need the same file system.
    work = tempfile.mkdtemp(prefix="bench-changes-", dir=DATA_DIR)
    load = [os.getloadavg()[0]]
    contenders = [
        Contender(name, prepare, run, (name, n, f"{work}/{i}"), verify)
        for i, name in enumerate(names)
    ]
    try:
        stats = compare(contenders, repetitions, method=METHOD)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load.append(os.getloadavg()[0])
    by_name = {stat.name: stat for stat in stats}
    base = by_name[PLAIN].median if not by_name[PLAIN].last("failed") else None
    lines = [_line(stat, base) for stat in stats]
    if not available:
        lines.append([HISTORY, *["—"] * (len(HEADERS) - 2), UNAVAILABLE])
    numbers: dict[str, Any] = {
        "rows": n,
        "change_rows": changes.num_rows,
        **counts,
        "load": load,
        "contenders": {stat.name: _measured(stat) for stat in stats},
    }
    md = [
        f"### C. A change set with deletes into {n:,} customers (files of {FILE_ROWS:,} ids): "
        f"{changes.num_rows:,} rows, clustered: {counts['updates']:,} updates, "
        f"{counts['inserts']:,} new customers, {counts['deletes']:,} deletes (op = 'D')",
        "",
        table(HEADERS, lines),
        "",
        f"Load average (1 min) on {os.cpu_count()} cores when the contenders started and "
        f"ended: {load[0]:.1f}, {load[1]:.1f}.",
        "",
        *summary(numbers),
    ]
    return "\n".join(md), numbers


def _measured(stat: Stats) -> dict[str, Any]:
    return {
        "seconds": stat.median,
        "failed": stat.last("failed") or "",
        "check": stat.last("check"),
        "new_versions": stat.last("new_versions"),
        "tombstones_moved": stat.last("tombstones_before") != stat.last("tombstones_after"),
        "rewritten": stat.last("rewritten"),
        "updated": stat.last("updated"),
        "merge_seconds": merge_seconds(stat),
    }


def history_ratio(numbers: dict[str, Any]) -> float | None:
    """merge_history's median over merge_with_deletes' (None when history did not run)."""
    values = numbers["contenders"]
    if HISTORY not in values or values[HISTORY]["failed"] or values[OURS]["failed"]:
        return None
    return values[HISTORY]["seconds"] / values[OURS]["seconds"]


def summary(numbers: dict[str, Any]) -> list[str]:
    """What the table says: history against merge, the rerun, what dagster-delta needs."""
    values = numbers["contenders"]
    ratio = history_ratio(numbers)
    out = [
        f"- merge_history / merge_with_deletes: {ratio:.2f}× (target ≤ 2×)."
        if ratio is not None
        else f"- merge_history / merge_with_deletes: {UNAVAILABLE} (target ≤ 2×)."
    ]
    if HISTORY in values:
        out.append(
            f"- merge_history's row counts are of history rows: it inserts a row per upsert (the "
            f"{numbers['updates']:,} new versions of changed customers and the "
            f"{numbers['inserts']:,} new customers), updates the current row each of the "
            f"{numbers['updates']:,} updates and {numbers['deletes']:,} deletes closes "
            "(valid_to, is_current) and deletes none; the deletes are first stored in "
            "`<table>__history_deletes`."
        )
    rerun = values[RERUN]
    out.append(
        f"- The rerun of the same change set: {rerun['new_versions']} new versions, tombstones "
        f"{'moved' if rerun['tombstones_moved'] else 'unchanged'}; its table {rerun['check']}."
    )
    whole = values[DD_TABLE]
    out.append(
        "- dagster-delta has no delete marker: `WhenNotMatchedBySourceDelete` deletes the target "
        "rows absent from the source within its predicate, so its source must be every surviving "
        "row of the scope, not a change set. Scoped to the change set's id range (per run, in "
        "the output's metadata) the change set without its deletes is that only because this "
        "clustered change set holds every id of its range; one with gaps would delete the "
        "unchanged ids in them. With the whole table as source "
        f"({numbers['rows'] - numbers['deletes'] + numbers['inserts']:,} rows, built before the "
        f"timer) its MERGE joins every stored row ({whole['merge_seconds']:.3f} s of its "
        f"{whole['seconds']:.3f} s); the `{NEWER}` guard keeps the update to the "
        f"{whole['updated']:,} changed rows, so it rewrites {whole['rewritten']} file(s)."
    )
    out.append(
        "- Neither the delta-rs MERGE nor dagster-delta keeps tombstones: an older upsert of a "
        "deleted key arriving in a later load is inserted again; the delta-rs MERGE also lets "
        "an older update overwrite a newer stored row."
    )
    out.append(
        "- Ours run with `prune_columns=[customer_id]`, as the shipped customers declare it: "
        "the plan reads, and the MERGE touches, only the files within the change set's id "
        "range (ids grow with sign-up time, so changes cluster), where the delta-rs MERGE and "
        "dagster-delta scan every file of the table."
    )
    return out + [""]


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/changes.png: every contender's median (a failed run left out)."""
    label = f"1% changes, 0.1% deletes\ninto {numbers['rows']:,} customers"
    return {
        label: {
            name: value["seconds"]
            for name, value in numbers["contenders"].items()
            if not value["failed"]
        }
    }


if __name__ == "__main__":
    # A smaller run than the family's (python -m benchmarks.cases.changes ROWS [REPS]):
    # prints the section, RESULTS.md untouched.
    import sys

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(run_family(rows, int(sys.argv[2]) if len(sys.argv) > 2 else 1)[0])
