"""Case 1b: a day bigger than the memory one wants to spend, as a table or as a stream.

TPC-H lineitem (6M rows at SF1, 16 columns) is one day's output, written through our IO
manager with the overwrite strategy. ``table`` reads the day into memory first (what an
asset returning a pyarrow Table does); ``stream`` hands the IO manager a
``RecordBatchReader`` over the Parquet file, so batches flow to delta-rs and into the
fingerprint one at a time. The ``3×`` contender streams the file three times over (18M
rows) to show that peak memory does not grow with the day.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.data import DAY, tpch
from benchmarks.harness import TIMING_HEADERS, Contender, compare, table, timing_rows

PARTITIONS = dg.DailyPartitionsDefinition(start_date="2024-01-01", timezone="UTC")
_BATCH_ROWS = 131_072


def _with_day(batch: pa.RecordBatch) -> pa.RecordBatch:
    days = pa.array([DAY] * batch.num_rows, pa.date32())
    return pa.RecordBatch.from_arrays(
        [*batch.columns, days], names=[*batch.schema.names, "ship_day"]
    )


def _batches(path: Path, times: int) -> Iterator[pa.RecordBatch]:
    for _ in range(times):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=_BATCH_ROWS):
            yield _with_day(batch)


def prepare(scale: float, workdir: str, mode: str, times: int = 1) -> dict[str, Any]:
    """The IO manager and an output context; ``table`` mode loads the day (untimed)."""
    from idem_assets.io_manager import IdempotentDeltaIOManager, WriteSpec
    from idem_assets.resources import CheckpointResource, LakeResource

    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    path = tpch("lineitem", scale)
    lake = LakeResource(landing_dir=str(root / "landing"), lake_dir=str(root / "lake"))
    manager = IdempotentDeltaIOManager(
        lake=lake, checkpoint=CheckpointResource(url=f"sqlite:///{root / 'state.db'}")
    )
    spec = WriteSpec(
        strategy="overwrite",
        partition_column="ship_day",
        natural_key=("l_orderkey", "l_linenumber"),
        dedupe=False,
    )

    def context() -> dg.OutputContext:
        return dg.build_output_context(
            asset_key=dg.AssetKey("lineitem"),
            partition_key=DAY.isoformat(),
            asset_partitions_def=PARTITIONS,
            definition_metadata=spec.to_metadata(),
            run_id=str(uuid.uuid4()),
        )

    schema = _with_day(next(pq.ParquetFile(path).iter_batches(batch_size=1))).schema
    state: dict[str, Any] = {
        "manager": manager,
        "context": context(),
        "path": path,
        "schema": schema,
        "times": times,
        "mode": mode,
    }
    if mode == "table":
        state["data"] = pa.Table.from_batches(list(_batches(path, times)), schema)
    return state


def run(state: dict[str, Any]) -> dict[str, Any]:
    """One handle_output: the loaded table, or a reader over the file."""
    if state["mode"] == "table":
        obj: Any = state["data"]
    else:
        obj = pa.RecordBatchReader.from_batches(
            state["schema"], _batches(state["path"], state["times"])
        )
    state["manager"].handle_output(state["context"], obj)
    return {}


def run_case(scale: float, repetitions: int) -> tuple[str, dict[str, Any]]:
    """Case 1b."""
    rows = int(pq.read_metadata(tpch("lineitem", scale)).num_rows)
    work = tempfile.mkdtemp(prefix="bench-stream-")
    stats = compare(
        [
            Contender(
                f"table of {rows:,} rows (day in memory)",
                prepare,
                run,
                (scale, f"{work}/a", "table"),
            ),
            Contender(f"stream of {rows:,} rows", prepare, run, (scale, f"{work}/b", "stream")),
            Contender(
                f"stream of {3 * rows:,} rows (3×)", prepare, run, (scale, f"{work}/c", "stream", 3)
            ),
        ],
        repetitions,
    )
    shutil.rmtree(work, ignore_errors=True)
    loaded, streamed, tripled = stats
    md = [
        f"### 1b. A day written as a table or as a record-batch stream (TPC-H lineitem "
        f"SF{scale:g}, through the IO manager)",
        "",
        table(TIMING_HEADERS, timing_rows(stats, loaded.name)),
        "",
        f"Peak memory: the loaded table {loaded.rss:,.0f} MiB, the stream "
        f"{streamed.rss:,.0f} MiB, three times the rows streamed {tripled.rss:,.0f} MiB. "
        "The loaded table's time excludes reading the file (done before the timer); the "
        "streams read it inside the timed call.",
        "",
    ]
    return "\n".join(md), {
        "seconds": {s.name: s.median for s in stats},
        "rss": {"table": loaded.rss, "stream": streamed.rss, "stream_3x": tripled.rss},
    }
