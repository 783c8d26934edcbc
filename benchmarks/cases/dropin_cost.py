"""Where the drop-in's first write of a partition goes, beside delta-rs's own write.

Real parts only, each timed alone in a fresh process on the same day (TPC-H orders as one
day, a new table partitioned by ``order_date``):

- ``write_deltalake`` alone: the floor both IO managers stand on;
- ``write_deltalake`` with the content fingerprint hashed on a thread meanwhile (what ours
  does: the fingerprint is awaited after the commit);
- the fingerprint alone;
- both IO managers' ``handle_output`` on the full day and on 10 rows of it (the 10-row
  write is each manager's fixed cost: checkpoint records, table opens, metadata).

Ours minus the official then splits into the fingerprint's share (write with the hash
minus write alone) and the fixed cost (ours minus the official on 10 rows).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks.cases import dropin
from benchmarks.data import orders_day_file
from benchmarks.harness import TIMING_HEADERS, Contender, compare, table, timing_rows

FLOOR = "write_deltalake alone"
HASHED = "write_deltalake + fingerprint on a thread"
HASH = "fingerprint alone"


def _prepare(scale: float, workdir: str, rows: int | None) -> dict[str, Any]:
    os.environ.pop("IDEM_STATE_URL", None)  # as in the drop-in cases
    from deltalake import write_deltalake

    data = pq.read_table(orders_day_file(scale))
    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    write_deltalake(str(root / "warmup"), data.slice(0, 10), partition_by=["order_date"])
    return {"data": data if rows is None else data.slice(0, rows), "root": root}


def prepare_delta(scale: float, workdir: str, hashed: bool) -> dict[str, Any]:
    """The day loaded and delta-rs used once; the hashing thread warmed up too."""
    from idem_assets.lake.fingerprint import fingerprint

    state = _prepare(scale, workdir, None)
    fingerprint(state["data"].slice(0, 10))
    state["hashed"] = hashed
    return state


def run_delta(state: dict[str, Any]) -> dict[str, Any]:
    """A new partitioned table, as both managers create it (with the hash meanwhile)."""
    from deltalake import write_deltalake

    from idem_assets.lake.fingerprint import PendingFingerprint

    pending = PendingFingerprint(state["data"]) if state["hashed"] else None
    write_deltalake(
        str(state["root"] / "table"), state["data"], mode="error", partition_by=["order_date"]
    )
    if pending is not None:
        pending.result()
    return {}


def prepare_hash(scale: float, workdir: str) -> dict[str, Any]:
    """The day loaded, the hashing code warmed up."""
    from idem_assets.lake.fingerprint import fingerprint

    state = _prepare(scale, workdir, None)
    fingerprint(state["data"].slice(0, 10))
    return state


def run_hash(state: dict[str, Any]) -> dict[str, Any]:
    """The content fingerprint of the day."""
    from idem_assets.lake.fingerprint import fingerprint

    fingerprint(state["data"])
    return {}


def prepare_manager(contender: str, scale: float, workdir: str, rows: int | None) -> dict[str, Any]:
    """The drop-in case's IO-manager set-up, on the whole day or its first ``rows`` rows."""
    state = dropin.prepare(contender, "partition", "io", False, scale, workdir)
    if rows is not None:
        state["data"] = state["data"].slice(0, rows)
    return state


def run_family(scale: float, repetitions: int) -> tuple[str, dict[str, float]]:
    """The cost split; the markdown section and the medians."""
    work = tempfile.mkdtemp(prefix="bench-dropin-cost-")
    ours_name, official_name = f"{dropin.OURS} handle_output", f"{dropin.OFFICIAL} handle_output"
    stats = compare(
        [
            Contender(FLOOR, prepare_delta, run_delta, (scale, f"{work}/a", False)),
            Contender(HASHED, prepare_delta, run_delta, (scale, f"{work}/b", True)),
            Contender(HASH, prepare_hash, run_hash, (scale, f"{work}/c")),
            Contender(
                official_name,
                prepare_manager,
                dropin.run,
                (dropin.OFFICIAL, scale, f"{work}/d", None),
            ),
            Contender(
                ours_name, prepare_manager, dropin.run, (dropin.OURS, scale, f"{work}/e", None)
            ),
            Contender(
                f"{official_name}, 10 rows",
                prepare_manager,
                dropin.run,
                (dropin.OFFICIAL, scale, f"{work}/f", 10),
            ),
            Contender(
                f"{ours_name}, 10 rows",
                prepare_manager,
                dropin.run,
                (dropin.OURS, scale, f"{work}/g", 10),
            ),
        ],
        repetitions,
    )
    shutil.rmtree(work, ignore_errors=True)
    median = {s.name: s.median for s in stats}
    gap = median[ours_name] - median[official_name]
    hashing = median[HASHED] - median[FLOOR]
    fixed = median[f"{ours_name}, 10 rows"] - median[f"{official_name}, 10 rows"]
    md = [
        "#### Where the drop-in's first write of a partition goes",
        "",
        table(TIMING_HEADERS, timing_rows(stats, FLOOR)),
        "",
        f"Over a raw write_deltalake of the day: ours "
        f"{(median[ours_name] - median[FLOOR]) * 1000:+.0f} ms, dagster-deltalake "
        f"{(median[official_name] - median[FLOOR]) * 1000:+.0f} ms (ours − dagster-deltalake: "
        f"{gap * 1000:+.0f} ms). Hashing the fingerprint beside the write lengthens it by "
        f"{hashing * 1000:+.0f} ms (the hash alone takes {median[HASH] * 1000:.0f} ms; the "
        "writer releases the GIL, but the two share 2 cores and memory bandwidth); the fixed "
        f"cost of a 10-row write is ours {median[f'{ours_name}, 10 rows'] * 1000:.0f} ms, "
        f"dagster-deltalake {median[f'{official_name}, 10 rows'] * 1000:.0f} ms "
        f"({fixed * 1000:+.0f} ms: checkpoint records and table opens).",
        "",
    ]
    return "\n".join(md), {**median, "gap": gap, "hashing": hashing, "fixed": fixed}
