"""Case 3: MERGE of 1% changed keys into customers at 1M and 10M rows.

The table is laid out as files of 100k customers sorted by id (ids grow with sign-up
time). Changes are either clustered (the newest customers plus new ones: the common
shape) or spread uniformly at random. Contenders:
- ``ours (merge_upsert)``: winners only, literal [min, max] key range in the predicate.
- ``hand-made upsert``: delta-rs MERGE on the key alone, update-all / insert-all.
- ``ours rerun``: the same batch again — it must commit nothing.
Each sample first restores the table to its base version (untimed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltalake import DeltaTable, write_deltalake

from benchmarks.data import DATA_DIR, customer_changes, customers
from benchmarks.harness import Contender, Stats, compare, table

FILE_ROWS = 100_000


def base_table(n: int) -> str:
    """A customers table of ``n`` rows in files of 100k, built once and cached."""
    uri = DATA_DIR / f"customers-{n}"
    if not (uri / "_delta_log").exists():
        data = customers(n)
        for start in range(0, n, FILE_ROWS):
            write_deltalake(str(uri), data.slice(start, FILE_ROWS), mode="append")
    return str(uri)


def _restore(uri: str) -> None:
    table = DeltaTable(uri)
    base = (
        (Path(uri) / "base_version").read_text() if (Path(uri) / "base_version").exists() else None
    )
    if base is None:
        (Path(uri) / "base_version").write_text(str(table.version()))
        return
    if table.version() != int(base):
        table.restore(int(base))


def prepare(n: int, clustered: bool, warm: bool) -> dict[str, Any]:
    """Restore the base table and build the change batch (untimed)."""
    uri = base_table(n)
    _restore(uri)
    changes = customer_changes(n, 0.01, clustered)
    state = {"uri": uri, "changes": changes}
    if warm:
        run_ours(state)
    state["before"] = DeltaTable(uri).version()
    return state


def run_ours(state: dict[str, Any]) -> dict[str, Any]:
    """Our merge_upsert."""
    from idem_assets.lake import LakeTable, merge_upsert

    result = merge_upsert(
        LakeTable(state["uri"]),
        state["changes"],
        ["customer_id"],
        version_column="updated_at",
        prune_columns=["customer_id"],
    )
    return {"committed": result.committed, "files_scanned": result.details.get("files_scanned")}


def run_plain(state: dict[str, Any]) -> dict[str, Any]:
    """MERGE on the key only, everything updated and inserted."""
    metrics = (
        DeltaTable(state["uri"])
        .merge(
            state["changes"],
            predicate="t.customer_id = s.customer_id",
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return {"committed": True, "files_scanned": metrics.get("num_target_files_scanned")}


def verify(state: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
    """New versions and files rewritten by the timed merge (read after the timer)."""
    table = DeltaTable(state["uri"])
    new_versions = table.version() - state["before"]
    removed = (
        int(table.history(1)[0].get("operationMetrics", {}).get("num_target_files_removed", 0))
        if new_versions
        else 0
    )
    return {"new_versions": new_versions, "rewritten": removed}


def run(sizes: tuple[int, ...], repetitions: int) -> tuple[str, dict[str, Any]]:
    """Case 3 for each size and change shape."""
    rows: list[list[Any]] = []
    numbers: dict[str, Any] = {}
    for shape in ("clustered", "random"):
        for n in sizes:
            clustered = shape == "clustered"
            stats = compare(
                [
                    Contender(
                        "ours (merge_upsert)", prepare, run_ours, (n, clustered, False), verify
                    ),
                    Contender(
                        "hand-made upsert", prepare, run_plain, (n, clustered, False), verify
                    ),
                    Contender(
                        "ours rerun (same batch)", prepare, run_ours, (n, clustered, True), verify
                    ),
                ],
                repetitions,
            )
            for s in stats:
                rows.append(_row(shape, n, s))
                numbers[f"{shape}/{n}/{s.name}"] = s.median
    md = [
        "### 3. MERGE of 1% changed keys into customers (files of 100k ids)",
        "",
        table(
            [
                "changes",
                "table rows",
                "contender",
                "median s",
                "min–max s",
                "peak RSS MiB",
                "files scanned",
                "files rewritten",
                "new versions",
            ],
            rows,
        ),
        "",
    ]
    for shape in ("clustered", "random"):
        if len(sizes) >= 2:
            small, large = sizes[0], sizes[-1]
            ratio = (
                numbers[f"{shape}/{large}/ours (merge_upsert)"]
                / numbers[f"{shape}/{small}/ours (merge_upsert)"]
            )
            md.append(
                f"- {shape}: ours at {large:,} rows costs {ratio:.2f}× its cost at {small:,} rows."
            )
    md.append("")
    return "\n".join(md), numbers


def _row(shape: str, n: int, s: Stats) -> list[Any]:
    low, high = s.spread
    return [
        shape,
        n,
        s.name,
        s.median,
        f"{low:.3f}–{high:.3f}",
        s.rss,
        s.last("files_scanned", "—"),
        s.last("rewritten", "—"),
        s.last("new_versions"),
    ]
