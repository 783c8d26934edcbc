"""Case 4: fingerprint throughput, and the rerun check against the write it verifies.

- ``ours``: ``idem_assets.lake.fingerprint`` (two 64-bit row-hash sums, canonical columns).
- ``pandas hash_pandas_object + xor``: the usual order-independent pandas recipe.
Both see the same Arrow day (TPC-H lineitem as rows; pandas gets its frame untimed).
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from benchmarks.data import DAY, orders_day_file, tpch
from benchmarks.harness import TIMING_HEADERS, Contender, compare, table, timing_rows


def prepare_table(path: str) -> dict[str, Any]:
    """The Arrow table (loaded before the timer)."""
    return {"data": pq.read_table(path)}


def run_ours(state: dict[str, Any]) -> dict[str, Any]:
    """Our fingerprint."""
    from idem_assets.lake import fingerprint

    result = fingerprint(state["data"])
    return {"rows": result.rows}


def prepare_pandas(path: str) -> dict[str, Any]:
    """The same rows as a pandas frame (conversion not timed)."""
    return {"frame": pq.read_table(path).to_pandas()}


def run_pandas(state: dict[str, Any]) -> dict[str, Any]:
    """hash_pandas_object per row, xor-reduced."""
    import pandas as pd

    hashes = pd.util.hash_pandas_object(state["frame"], index=False).to_numpy()
    return {"digest": int(np.bitwise_xor.reduce(hashes))}


def prepare_check(path: str, workdir: str) -> dict[str, Any]:
    """A day written once; the timed call is the rerun-equality comparison."""
    from idem_assets.io_manager import Window, WriteSpec, prepare, write
    from idem_assets.lake import LakeTable

    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    spec = WriteSpec(
        strategy="overwrite",
        natural_key=("order_id",),
        version_column="updated_at",
        partition_column="order_date",
    )
    window = Window(DAY, DAY + dt.timedelta(days=1))
    target = LakeTable(str(root / "orders"))
    data = pq.read_table(path)
    write(spec, target, prepare(spec, data), window)
    return {"spec": spec, "window": window, "target": target, "data": data}


def run_check(state: dict[str, Any]) -> dict[str, Any]:
    """What the rerun_equality check does: recompute (dedupe), read the slice, compare."""
    from idem_assets.io_manager import compare as compare_batch
    from idem_assets.io_manager import prepare

    batch = prepare(state["spec"], state["data"])
    result = compare_batch(state["spec"], state["target"], batch, state["window"])
    return {"passed": result.passed}


def prepare_write(path: str, workdir: str) -> dict[str, Any]:
    """The day and an empty lake: the timed call is the first write the check verifies."""
    from idem_assets.io_manager import Window, WriteSpec
    from idem_assets.lake import LakeTable

    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "spec": WriteSpec(
            strategy="overwrite",
            natural_key=("order_id",),
            version_column="updated_at",
            partition_column="order_date",
        ),
        "window": Window(DAY, DAY + dt.timedelta(days=1)),
        "target": LakeTable(str(root / "orders")),
        "data": pq.read_table(path),
    }


def run_write(state: dict[str, Any]) -> dict[str, Any]:
    """Dedupe + overwrite of the day (what the IO manager does, minus tracking)."""
    from idem_assets.io_manager import prepare, write

    result = write(
        state["spec"], state["target"], prepare(state["spec"], state["data"]), state["window"]
    )
    return {"committed": result.committed}


def run(scale: float, repetitions: int) -> tuple[str, dict[str, Any]]:
    """Case 4 on lineitem (hash throughput) and orders (check vs write)."""
    lineitem = str(tpch("lineitem", scale))
    rows = pq.read_metadata(lineitem).num_rows
    hashing = compare(
        [
            Contender("pandas hash_pandas_object + xor", prepare_pandas, run_pandas, (lineitem,)),
            Contender("ours (fingerprint)", prepare_table, run_ours, (lineitem,)),
        ],
        repetitions,
    )
    orders = str(orders_day_file(scale))
    work = tempfile.mkdtemp(prefix="bench-fp-")
    check = compare(
        [
            Contender("first write of the day", prepare_write, run_write, (orders, f"{work}/w")),
            Contender("rerun_equality check", prepare_check, run_check, (orders, f"{work}/c")),
        ],
        repetitions,
    )
    shutil.rmtree(work, ignore_errors=True)
    pandas_s, ours_s = hashing[0].median, hashing[1].median
    md = [
        f"### 4. Fingerprint of {rows:,} rows (TPC-H lineitem SF{scale:g}, 16 columns)",
        "",
        table(TIMING_HEADERS, timing_rows(hashing, "pandas hash_pandas_object + xor")),
        "",
        f"Throughput: ours {rows / ours_s / 1e6:,.1f} M rows/s vs pandas "
        f"{rows / pandas_s / 1e6:,.1f} M rows/s (**{pandas_s / ours_s:.1f}×**).",
        "",
        "The rerun_equality check against the write it verifies (orders day):",
        "",
        table(TIMING_HEADERS, timing_rows(check, "first write of the day")),
        "",
    ]
    return "\n".join(md), {
        "hash": {s.name: s.median for s in hashing},
        "check": {s.name: s.median for s in check},
    }
