"""Spark engines side by side (S5), and single-file CSV days on 1 GiB executors (S6).

- S5. One generated orders day (the sample generator's orders planner and file writer,
  seed 7: a Parquet, a CSV and a JSON Lines file, ~5M rows) read, typed, deduplicated and
  written as one partition overwrite into a fresh Delta table, by three engines:

  * the local engine: ``read_days`` + ``dedupe_newest`` + ``overwrite_partitions``;
  * Spark ``local[2]``: ``read_landing_spark`` (the library's ``FileReader`` on the
    executors, one task per file) + ``dedupe_newest_spark`` + ``overwrite_partitions_spark``
    (clustered by ``order_id``, as the IO manager writes it);
  * the same Spark calls on a standalone cluster on 127.0.0.1: a master and two workers of
    one core each, separate JVMs started with pyspark's ``bin/spark-class`` by
    ``idem_assets_tests.fixtures.spark_cluster``.

  All three tables must have the same content fingerprint (``table_fingerprint``).
- S6. Single-file CSV days (the S5 day's CSV file repeated with distinct order_ids): the
  target's ~2 GB file and smaller ones, through the same Spark calls on the cluster with
  executors of a 1 GiB heap. The reader cuts a file into pieces of whole records
  (``PIECE_BYTES``), so the executor reading a file should need as much memory for any
  size of it.

Every sample runs in a fresh process forked from a fork server (the generating parent's
peak is not inherited). In it, a thread reads ``/proc`` every ``INTERVAL`` s: the driver's
JVM, and each executor's JVM with the Python workers under it (on ``local[2]`` the driver's
JVM is the executor). An executor's peak is the largest sampled sum of its processes' RSS;
a JVM's peak is its own high-water mark (``VmHWM``). The driver's Python peak is its
``ru_maxrss`` at the end of the timed call (so it includes the session start and a warm
read of a 1,000-row day, done before the timer so that first-call imports are not timed).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases.landing_store import METHOD, ROWS_PER_SCALE, WARM_ROWS, first_day
from benchmarks.data import DATA_DIR
from benchmarks.harness import Contender, Stats, compare, table

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "benchmarks" / "results"
INTERVAL = 0.1  # seconds between memory samples
# S6's files: copies of the S5 day's CSV file, each copy's order_ids moved by this much.
ID_STRIDE = 100_000_000
# Samples per engine in S5 of a full run (--quick: 1).
FULL_REPS = 3
# S6's single-file CSV days, bytes: the target's file first, then smaller files (each of
# several pieces) that show whether the executor's memory depends on the file's size.
FULL_CSV = (2 * 10**9, 200 * 10**6, 286 * 10**6)
QUICK_CSV = (200 * 10**6, 130 * 10**6)

LOCAL = "local engine"
LOCAL2 = "Spark local[2]"
CLUSTER = "cluster, 2 workers × 1 core"

# local[2]: one JVM is the driver and both executor slots. The cluster: workers of 1 GiB,
# each running one executor of a 1 GiB heap; the driver JVM has Spark's default 1 GiB.
LOCAL2_DRIVER_MEMORY = "2g"
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "1g"
HEAP_MIB = 1024  # EXECUTOR_MEMORY in MiB
# Spark's unified memory of such a heap, what its memory store may fill: (heap - 300 MiB
# reserved) x spark.memory.fraction (0.6); the executors log it at start (434.4 MiB).
STORAGE_MIB = (HEAP_MIB - 300) * 0.6
S5_SHUFFLE_PARTITIONS = "8"
S6_SHUFFLE_PARTITIONS = "16"
# How much larger the 2 GB file's executor peak may be than the smallest file's for the
# memory to count as the same (a longer run gives the JVM's heap more time to fill).
SAME_MEMORY = 1.25


# --------------------------------------------------------------------------- inputs


def orders_day(rows: int) -> Path:
    """The generated orders day of about ``rows`` rows (landing_store's cache), generated in
    a child process so that this one does not keep the planner's rows."""
    from benchmarks.cases import landing_store

    root = DATA_DIR / f"landing-orders-{rows}"
    if not (root / "_COMPLETE").exists():
        subprocess.run(
            [sys.executable, "-m", __name__, "generate", str(rows)], cwd=ROOT, check=True
        )
    return landing_store.orders_day(rows)  # cached now: returns at once


def day_files(root: Path) -> list[Path]:
    """The landing files of the first day under ``root``."""
    folder = root / "orders" / f"date={first_day().isoformat()}"
    return sorted(p for p in folder.iterdir() if not p.name.startswith(("_", ".")))


def big_csv_day(base_rows: int, target_bytes: int) -> tuple[Path, int]:
    """A landing root with one orders CSV file of about ``target_bytes``, and its rows
    (generated once into benchmarks/.data).

    The file is the CSV file of the ``base_rows`` day copied until the target is reached
    (the last copy cut short), each copy's ``order_id`` moved by ``ID_STRIDE`` so that every
    row is a distinct order; every other field keeps its text, so it is valid orders CSV,
    read and typed like the generator's own files.
    """
    import polars as pl

    root = DATA_DIR / f"landing-orders-csv-{target_bytes // 10**6}MB-of-{base_rows}"
    done = root / "_COMPLETE"
    if done.exists():
        return root, json.loads(done.read_text())["rows"]
    shutil.rmtree(root, ignore_errors=True)
    (base,) = [p for p in day_files(orders_day(base_rows)) if p.suffix == ".csv"]
    text = pl.read_csv(base, infer_schema=False)
    per_row = base.stat().st_size / text.height
    order_id = pl.col("order_id").cast(pl.Int64)
    folder = root / "orders" / f"date={first_day().isoformat()}"
    folder.mkdir(parents=True)
    staging = folder / ".part-000.csv.tmp"
    rows = copy = 0
    with staging.open("wb") as out:
        while (left := target_bytes - out.tell()) > per_row:
            take = min(text.height, int(left / per_row))
            moved = text.head(take).with_columns((order_id + copy * ID_STRIDE).cast(pl.String))
            moved.write_csv(out, include_header=copy == 0)
            rows += take
            copy += 1
    staging.rename(folder / "part-000.csv")
    done.write_text(json.dumps({"rows": rows, "copies": copy}))
    return root, rows


# --------------------------------------------------------------------------- memory


def _rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes; zeros once it is gone."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, hwm


@dataclass
class Peaks:
    """Peaks of a group of processes (a JVM and the Python workers under it), in bytes."""

    total: int = 0  # the largest sampled sum of their RSS
    python: int = 0  # the largest sampled sum of the Python workers' RSS
    jvm: int = 0  # the largest JVM high-water mark
    now: tuple[int, int] = (0, 0)  # (JVM, Python) RSS at the last sample

    def add(self, processes: list[tuple[int, str]]) -> None:
        jvm = python = 0
        for pid, kind in processes:
            rss, hwm = _rss(pid)
            if kind == "jvm":
                jvm += rss
                self.jvm = max(self.jvm, hwm)
            else:
                python += rss
        self.now = (jvm, python)
        self.total = max(self.total, jvm + python)
        self.python = max(self.python, python)


def _descendants(pid: int) -> list[tuple[int, str]]:
    """A process's JVMs and Python processes below it: (pid, "jvm" or "python")."""
    import psutil

    found = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return found
    for child in children:
        try:
            name = child.name()
        except psutil.Error:
            continue
        if name == "java":
            found.append((child.pid, "jvm"))
        elif name.startswith("python"):
            found.append((child.pid, "python"))
    return found


class Sampler(threading.Thread):
    """Every ``INTERVAL`` s: the driver's JVM and each executor's processes.

    ``workers`` are the cluster's worker JVMs: each one's descendants (its executor JVM and
    that executor's Python workers) are one executor. Without workers (local[2]) the one
    executor is the driver's JVM with the Python workers under it. Once a second each
    executor's (JVM, Python) RSS goes into a timeline.
    """

    def __init__(self, workers: tuple[int, ...]) -> None:
        super().__init__(daemon=True)
        self.workers = workers
        self.driver_jvm = 0
        self.executors = [Peaks() for _ in workers or (0,)]
        self.timeline: list[tuple[float, list[tuple[int, int]]]] = []
        self.began = time.monotonic()
        self.stopped = threading.Event()

    def sample(self) -> None:
        trees = [_descendants(w) for w in self.workers]
        theirs = {pid for tree in trees for pid, _ in tree}
        mine = [p for p in _descendants(os.getpid()) if p[0] not in theirs]
        for pid, kind in mine:
            if kind == "jvm":
                self.driver_jvm = max(self.driver_jvm, _rss(pid)[1])
        for peaks, processes in zip(self.executors, trees or [mine], strict=True):
            peaks.add(processes)
        at = time.monotonic() - self.began
        if not self.timeline or at - self.timeline[-1][0] >= 1.0:
            self.timeline.append((round(at, 1), [e.now for e in self.executors]))

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            self.stopped.wait(INTERVAL)

    def stop(self) -> dict[str, Any]:
        """Stop sampling: the peaks in MiB and the busiest executor's timeline (MiB)."""
        self.stopped.set()
        self.join()
        self.sample()
        busiest = max(range(len(self.executors)), key=lambda i: self.executors[i].total)
        mib = 2**20
        return {
            "driver_jvm": self.driver_jvm / mib,
            "executor_jvm": max(e.jvm for e in self.executors) / mib,
            "python_workers": max(e.python for e in self.executors) / mib,
            "executor_total": self.executors[busiest].total / mib,
            "timeline": [
                (at, (executors[busiest][0] // mib, executors[busiest][1] // mib))
                for at, executors in self.timeline
            ],
        }


def _driver_peak() -> float:
    """This process's peak RSS so far, MiB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------- contenders


def _fingerprint(lake: str) -> str:
    from idem_assets.lake import LakeTable
    from idem_assets.lake.stored import table_fingerprint

    found = table_fingerprint(LakeTable(lake))
    return f"{found}/{found.rows}" if found is not None else "missing"


def _window() -> tuple[dt.date, dt.date]:
    day = first_day()
    return day, day + dt.timedelta(days=1)


def prepare_local(root: str, lake: str, warm: str) -> dict[str, Any]:
    """A fresh lake folder; a 1,000-row day read first (the reader's lazy imports)."""
    from idem_assets.landing import read_days
    from idem_assets.sample.sources import ORDERS

    shutil.rmtree(lake, ignore_errors=True)
    read_days(warm, ORDERS, *_window())
    return {"root": root, "lake": lake}


def run_local(state: dict[str, Any]) -> dict[str, Any]:
    """read_days + dedupe_newest + overwrite_partitions of the day."""
    from idem_assets.lake import LakeTable, dedupe_newest, overwrite_partitions
    from idem_assets.landing import read_days
    from idem_assets.sample.sources import ORDERS

    start, end = _window()
    batch = read_days(state["root"], ORDERS, start, end)
    deduped = dedupe_newest(
        batch.rows, ORDERS.natural_key, ORDERS.version_column, sort_by=["order_date"]
    )
    result = overwrite_partitions(
        LakeTable(state["lake"]), deduped.rows, "order_date", start, end, schema=ORDERS.schema
    )
    return {
        "rows_in": batch.raw_rows,
        "written": result.rows_written,
        "dropped": deduped.duplicates_dropped,
        "driver_python": _driver_peak(),
    }


def verify_local(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The table's fingerprint; the lake folder removed."""
    found = _fingerprint(state["lake"])
    shutil.rmtree(state["lake"], ignore_errors=True)
    return {"fingerprint": found}


@dataclass(frozen=True)
class SparkSetup:
    """Where a Spark sample runs: the master, the session's settings, the worker JVMs to
    watch (none for local[2]), the driver's heap, and whether to fingerprint the table."""

    master: str
    conf: dict[str, str]
    workers: tuple[int, ...] = ()
    driver_memory: str | None = None
    fingerprint: bool = True


def _wait_for_executors(spark: Any, count: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    # The block managers Spark knows of: the driver's and one per executor.
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < count + 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} executors registered in {timeout:.0f} s")
        time.sleep(0.2)


def prepare_spark(root: str, lake: str, warm: str, setup: SparkSetup) -> dict[str, Any]:
    """The session (and, on a cluster, its executors) up, a 1,000-row day read once."""
    from idem_assets.sample.sources import ORDERS
    from idem_assets.spark import read_landing_spark
    from idem_assets.spark.resource import local_spark_session

    shutil.rmtree(lake, ignore_errors=True)
    spark = local_spark_session(setup.master, setup.conf, driver_memory=setup.driver_memory)
    try:
        _wait_for_executors(spark, len(setup.workers))
        read_landing_spark(spark, warm, ORDERS, *_window()).unpersist()
    except BaseException:
        spark.stop()
        raise
    sampler = Sampler(setup.workers)
    sampler.start()
    return {"root": root, "lake": lake, "spark": spark, "sampler": sampler, "setup": setup}


def run_spark(state: dict[str, Any]) -> dict[str, Any]:
    """read_landing_spark + dedupe_newest_spark + overwrite_partitions_spark of the day."""
    from idem_assets.lake import LakeTable
    from idem_assets.sample.sources import ORDERS
    from idem_assets.spark import (
        dedupe_newest_spark,
        overwrite_partitions_spark,
        read_landing_spark,
    )

    start, end = _window()
    try:
        batch = read_landing_spark(state["spark"], state["root"], ORDERS, start, end)
        deduped = dedupe_newest_spark(batch.rows, ORDERS.natural_key, ORDERS.version_column)
        result = overwrite_partitions_spark(
            LakeTable(state["lake"]),
            deduped.rows,
            "order_date",
            start,
            end,
            schema=ORDERS.schema,
            cluster_by=ORDERS.natural_key,
        )
        judged = judged_storage(state["spark"])
        batch.unpersist()
    except Exception as exc:  # a failed job is a result: reported with its cause
        return {"error": failure(exc), "driver_python": _driver_peak()}
    valid, quarantined = batch.counts()
    return {
        "rows_in": valid + quarantined,
        "written": result.rows_written,
        "dropped": deduped.duplicates_dropped,
        "driver_python": _driver_peak(),
        "judged": judged,
    }


def judged_storage(spark: Any) -> dict[str, Any] | None:
    """The persisted judged frame as the driver's block manager knows it at the end of the
    write: its storage level and how much of it is in memory and on disk (MiB). The judged
    frame is the only persisted one then."""
    infos = list(spark.sparkContext._jsc.sc().getRDDStorageInfo())
    if not infos:
        return None
    mib = 2**20
    return {
        "level": infos[0].storageLevel().description(),
        "memory": sum(i.memSize() for i in infos) / mib,
        "disk": sum(i.diskSize() for i in infos) / mib,
    }


def storage_spelled(judged: dict[str, Any] | None) -> str:
    """A judged frame's storage in a few words."""
    if not judged:
        return "?"
    return (
        f"{judged['level']}: {judged['memory']:,.0f} MiB in memory, "
        f"{judged['disk']:,.0f} MiB on disk"
    )


def verify_spark(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The memory peaks; the session stopped (its executors with it); the fingerprint."""
    peaks = state["sampler"].stop()
    state["spark"].stop()
    found = _fingerprint(state["lake"]) if state["setup"].fingerprint else None
    shutil.rmtree(state["lake"], ignore_errors=True)
    return {**peaks, "fingerprint": found}


def failure(exc: BaseException) -> str:
    """A failed Spark job in one line: the innermost Java error, and where it was thrown
    when that is a frame ``WHERE`` explains."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [
        line.removeprefix("Caused by: ")
        for line in lines
        if line.startswith(("Caused by:", "java.lang.", "org.apache.spark.Spark"))
    ]
    cause = causes[-1] if causes else (lines[0] if lines else type(exc).__name__)
    where = next((frame for frame in WHERE if frame in str(exc)), None)
    return f"{cause}" + (f" in {where} ({WHERE[where]})" if where else "")


# Frames of a failed task's trace worth naming, and what they do.
SPILLED_BLOCK = "BlockManager.maybeCacheDiskBytesInMemory"
WHERE = {
    SPILLED_BLOCK: "a spilled block of the persisted judged frame read back from disk into "
    "one heap buffer",
}


# --------------------------------------------------------------------------- S5


def _peak(stat: Stats, key: str) -> float:
    """The largest value of ``key`` over the samples (0 when none reported it)."""
    return max((e[key] for e in stat.extra if key in e), default=0.0)


def _error(stat: Stats) -> str | None:
    return next((e["error"] for e in stat.extra if e.get("error")), None)


@dataclass(frozen=True)
class Cluster:
    """What a sample needs of the running cluster: its URL, settings, worker JVMs and the
    folder its processes log under."""

    master_url: str
    conf: dict[str, str]
    workers: tuple[int, ...]
    root: Path

    def setup(self, shuffle: str, fingerprint: bool = True, **conf: str) -> SparkSetup:
        """A sample's setup on this cluster: executors of ``EXECUTOR_MEMORY``."""
        settings = {
            **self.conf,
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.sql.shuffle.partitions": shuffle,
            **conf,
        }
        return SparkSetup(self.master_url, settings, self.workers, fingerprint=fingerprint)


ENGINE_HEADERS = [
    "engine",
    "samples",
    "rows read",
    "rows written",
    "median s",
    "min–max s",
    "rows/s",
    "driver Python peak MiB",
    "driver JVM peak MiB",
    "executor JVM peak MiB",
    "executor Python workers peak MiB",
    "executor peak MiB (JVM + Python workers)",
    "same fingerprint",
]


def _engine_row(stat: Stats, reference: str) -> list[Any]:
    error = _error(stat)
    if error:
        failed = sum(1 for e in stat.extra if e.get("error"))
        outcome = [f"**failed** ({failed} of {len(stat.seconds)}): {error}", "", "", ""]
    else:
        low, high = stat.spread
        rate = f"{stat.last('rows_in') / stat.median:,.0f}"
        outcome = [stat.last("written"), stat.median, f"{low:.1f}–{high:.1f}", rate]
    spark = stat.name != LOCAL

    def spark_only(value: Any) -> Any:
        return value if spark else "—"

    prints = {e.get("fingerprint") for e in stat.extra}
    same = reference != "missing" and prints == {reference}
    return [
        stat.name,
        len(stat.seconds),
        stat.last("rows_in", "—"),
        *outcome,
        _peak(stat, "driver_python"),
        spark_only("= executor JVM" if stat.name == LOCAL2 else _peak(stat, "driver_jvm")),
        spark_only(_peak(stat, "executor_jvm")),
        spark_only(_peak(stat, "python_workers")),
        spark_only(_peak(stat, "executor_total")),
        "yes" if same else "**no**",
    ]


MEMORY_NOTE = (
    "memory columns are peaks over the samples: driver Python `ru_maxrss` at the end of "
    "the timed call; JVMs each process's `VmHWM`; executor Python workers the largest "
    "sampled sum of one executor's Python workers' RSS, executor peak the largest sampled "
    f"sum of one executor's JVM and Python workers (every {INTERVAL * 1000:.0f} ms; on "
    "local[2] that JVM is the driver too)."
)


def run_engines(
    cluster: Cluster, work: Path, rows: int, reps: int
) -> tuple[list[str], dict[str, Any]]:
    """S5: the markdown lines and the numbers."""
    root, warm = str(orders_day(rows)), str(orders_day(WARM_ROWS))
    shuffle = S5_SHUFFLE_PARTITIONS
    local2 = SparkSetup(
        "local[2]", {"spark.sql.shuffle.partitions": shuffle}, driver_memory=LOCAL2_DRIVER_MEMORY
    )
    stats = compare(
        [
            Contender(
                LOCAL,
                prepare_local,
                run_local,
                (root, str(work / "lake-local"), warm),
                verify_local,
            ),
            Contender(
                LOCAL2,
                prepare_spark,
                run_spark,
                (root, str(work / "lake-local2"), warm, local2),
                verify_spark,
            ),
            Contender(
                CLUSTER,
                prepare_spark,
                run_spark,
                (root, str(work / "lake-cluster"), warm, cluster.setup(shuffle)),
                verify_spark,
            ),
        ],
        reps,
        METHOD,
    )
    local = stats[0]
    reference = local.last("fingerprint")
    prints = sorted({e.get("fingerprint", "missing") for s in stats for e in s.extra})
    same = prints == [reference] and reference != "missing"
    done = [s for s in stats if not _error(s)]
    speed = {s.name: s.last("rows_in") / s.median for s in done}
    rows_in = local.last("rows_in")
    sizes = ", ".join(
        f"{p.name} {p.stat().st_size / 2**20:,.0f} MiB" for p in day_files(Path(root))
    )
    md = [
        f"### S5. One {rows_in:,}-row orders day read, typed, deduplicated and written: "
        "the local engine, Spark local[2], a standalone cluster",
        "",
        f"{first_day()} of the sample generator (seed 7, scale {rows / ROWS_PER_SCALE:,.0f}: "
        f"{sizes}; {local.last('dropped', 0):,} re-deliveries and duplicates dropped), "
        "written as one partition overwrite into a fresh Delta table. Local: `read_days` + "
        "`dedupe_newest` + `overwrite_partitions`. Spark: `read_landing_spark` (the "
        "library's `FileReader` on the executors, one task per file) + "
        "`dedupe_newest_spark` + `overwrite_partitions_spark(cluster_by=['order_id'])` "
        f"(what the IO manager calls), `spark.sql.shuffle.partitions={shuffle}`. local[2]: "
        f"one JVM with a {LOCAL2_DRIVER_MEMORY} heap is the driver and both executor slots. "
        f"Cluster: a master and 2 workers of 1 core and {WORKER_MEMORY} on 127.0.0.1 "
        "(separate JVMs), an executor of `spark.executor.memory="
        f"{EXECUTOR_MEMORY}` on each, the driver JVM with Spark's default 1 GiB heap. "
        "Samples alternate, each in a fresh process (a fresh Spark application, as a "
        "Dagster run's is); the session start, the executors' registration and a warm read "
        "of a 1,000-row day are not timed. rows/s = rows read / median wall time.",
        "",
        table(ENGINE_HEADERS, [_engine_row(s, reference) for s in stats]),
        "",
        "- the same table from all three engines in every sample: "
        f"{'**yes**' if same else '**no**'} (`table_fingerprint`: `{', '.join(prints)}`).",
    ]
    if len(done) == len(stats):
        md.append(
            f"- the cluster takes {stats[2].median / local.median:.1f}× the local engine's "
            f"wall time, local[2] {stats[1].median / local.median:.1f}×."
        )
    from idem_assets.spark.landing import IN_MEMORY_FILE_BYTES

    judged = {s.name: s.last("judged") for s in stats[1:] if not _error(s)}
    if judged:
        md.append(
            "- the persisted judged frame at the end of the write (the driver's block "
            "manager; `read_landing_spark` keeps it on disk only when a file of the day is "
            f"over {IN_MEMORY_FILE_BYTES / 2**20:g} MiB): "
            + "; ".join(f"{name} {storage_spelled(j)}" for name, j in judged.items())
            + "."
        )
    md += [f"- {MEMORY_NOTE}", ""]
    numbers = {
        "rows": rows_in,
        "seconds": {s.name: s.median for s in done},
        "samples": {s.name: s.seconds for s in stats},
        "rows_per_s": speed,
        "driver_python": {s.name: _peak(s, "driver_python") for s in stats},
        "executor_total": {s.name: _peak(s, "executor_total") for s in stats[1:]},
        "same": same,
        "errors": {s.name: e for s in stats if (e := _error(s))},
        "judged": judged,
    }
    return md, numbers


# --------------------------------------------------------------------------- S6


def _big_case(cluster: Cluster, work: Path, base_rows: int, target_bytes: int) -> dict[str, Any]:
    """One single-file CSV day through the cluster, one sample: its numbers."""
    root, rows = big_csv_day(base_rows, target_bytes)
    (csv_file,) = day_files(root)
    # A task that runs out of memory would on every attempt: fail on the first.
    setup = cluster.setup(
        S6_SHUFFLE_PARTITIONS, fingerprint=False, **{"spark.task.maxFailures": "1"}
    )
    args = (str(root), str(work / "lake-big"), str(orders_day(WARM_ROWS)), setup)
    (stat,) = compare([Contender(CLUSTER, prepare_spark, run_spark, args, verify_spark)], 1, METHOD)
    return {
        "bytes": csv_file.stat().st_size,
        "rows": rows,
        "seconds": stat.median,
        "error": _error(stat),
        "written": stat.last("written"),
        **{key: _peak(stat, key) for key in PEAKS},
        "block": judged_block(cluster.root, stat.last("judged")),
        "judged": stat.last("judged"),
        "level": stored_as(csv_file),
        "timeline": stat.last("timeline", []),
    }


_STORED = re.compile(r"Block rdd_\d+_0 stored as \w+ in memory \(estimated size ([\d.]+) MiB")
_TOO_LARGE = re.compile(r"Not enough space to cache rdd_\d+_0 in memory! \(computed ([\d.]+) MiB")


def stored_as(path: Path) -> str:
    """The storage level ``read_landing_spark`` persists a day of this one file at."""
    from idem_assets.spark.landing import storage_level

    level = storage_level([(path.name, path.stat().st_size)])
    return "MEMORY_AND_DISK" if level.useMemory else "DISK_ONLY"


def judged_block(cluster_root: Path, judged: dict[str, Any] | None = None) -> str:
    """The file's block of the persisted judged frame: on disk only, its size there (the
    driver's block manager); else as the last application's executors logged it: its size
    when kept in memory, else how far it unrolled before going to disk."""
    if judged and judged["disk"] and not judged["memory"]:
        return f"{judged['disk']:,.0f} MiB on disk"
    apps = sorted({path.name for path in cluster_root.glob("worker-*/app-*")})
    logs = [
        path.read_text(errors="replace")
        for path in cluster_root.glob(f"worker-*/{apps[-1]}/*/stderr" if apps else "-")
    ]
    stored = [float(m) for log in logs for m in _STORED.findall(log)]
    unrolled = [float(m) for log in logs for m in _TOO_LARGE.findall(log)]
    if unrolled:
        return f"over {max(unrolled):,.0f} MiB: to disk"
    return f"{max(stored):,.0f} MiB in memory" if stored else "?"


PEAKS = ("driver_python", "driver_jvm", "executor_jvm", "python_workers", "executor_total")
BIG_HEADERS = [
    "file",
    "rows",
    "s",
    "rows/s",
    "MB/s",
    "driver Python peak MiB",
    "driver JVM peak MiB",
    "executor JVM peak MiB",
    "executor Python workers peak MiB",
    "executor peak MiB (JVM + Python workers)",
    "judged frame persisted",
    "judged block",
]


def _gb(case: dict[str, Any]) -> str:
    return f"{case['bytes'] / 1e9:.2f} GB"


def _big_row(case: dict[str, Any]) -> list[Any]:
    seconds = case["seconds"]
    if case["error"]:
        outcome = [f"**failed** after {seconds:.0f} s: {case['error']}", "", ""]
    else:
        outcome = [seconds, f"{case['rows'] / seconds:,.0f}", case["bytes"] / 1e6 / seconds]
    return [
        f"{_gb(case)} ({case['bytes'] / 2**20:,.0f} MiB)",
        case["rows"],
        *outcome,
        *(case[key] for key in PEAKS),
        f"`{case.get('level', '?')}`",
        case["block"],
    ]


def bounded(cases: list[dict[str, Any]]) -> tuple[bool, str]:
    """Whether the executor's memory is bounded by a piece, not by the file (every file
    passes, the largest file's executor peak within ``SAME_MEMORY``× the smallest's), and
    what was measured."""
    ordered = sorted(cases, key=lambda c: c["bytes"])
    spelled = "; ".join(
        f"{_gb(c)}: " + ("failed" if c["error"] else f"{c['executor_total']:,.0f} MiB")
        for c in ordered
    )
    smallest, largest = ordered[0], ordered[-1]
    ratio = largest["executor_total"] / max(smallest["executor_total"], 1.0)
    held = not any(c["error"] for c in cases) and ratio <= SAME_MEMORY
    return held, (f"executor peak by file: {spelled} ({_gb(largest)} {ratio:.2f}× {_gb(smallest)})")


def big_cause(cases: list[dict[str, Any]]) -> str:
    """Why the executor's memory was not the same for every file, from what was measured."""
    failed = [c for c in cases if c["error"]]
    if failed:
        return "; ".join(f"{_gb(c)} failed: {c['error']}" for c in failed) + " (see S6)"
    ordered = sorted(cases, key=lambda c: c["bytes"])
    return (
        f"the executor peak grows with the file: {ordered[-1]['executor_total']:,.0f} MiB "
        f"for {_gb(ordered[-1])}, {ordered[0]['executor_total']:,.0f} MiB for "
        f"{_gb(ordered[0])}"
    )


def spilled_block(cases: list[dict[str, Any]]) -> str:
    """What a failure in ``SPILLED_BLOCK`` says about the executor's memory."""
    failed = [c for c in cases if c["error"]]
    passed = [c for c in cases if not c["error"]]
    larger = [c for c in passed if c["bytes"] > max(f["bytes"] for f in failed)]
    beyond = f" (the {_gb(max(larger, key=lambda c: c['bytes']))} file's)" if larger else ""
    return (
        "What runs out is not a piece: a file is one partition of the judged frame, "
        f"persisted `{failed[0].get('level', '?')}` (serialized, as PySpark's levels are), "
        "so one block "
        "(column *judged block*). A block that does not unroll in memory, or that the "
        "dedupe's sort evicts, goes to disk and is read back whole into one heap buffer "
        f"whenever it fits the memory store ({STORAGE_MIB:.0f} MiB of a {HEAP_MIB:,} MiB "
        "heap: (heap − 300 MiB) × `spark.memory.fraction` 0.6); a block of a few hundred "
        "MiB fits the store but not the heap beside the running task. A block larger than "
        f"the store{beyond} is streamed from disk instead, a small file's fits both. In "
        "this band of file sizes an executor's memory is bounded by a file's judged block, "
        "not by a piece."
    )


HISTORY = (
    "before commit 4a883c5 the judged frame of every day was persisted `MEMORY_AND_DISK` "
    "and the 0.29 GB file failed: its block, spilled to disk, was read back whole into the "
    "1 GiB heap (`java.lang.OutOfMemoryError: Java heap space` in "
    "`BlockManager.maybeCacheDiskBytesInMemory`)."
)


def run_big_csv(
    cluster: Cluster, work: Path, base_rows: int, sizes: tuple[int, ...]
) -> tuple[list[str], list[dict[str, Any]]]:
    """S6: the markdown lines and one case per file (the target's first)."""
    from idem_assets.landing.pieces import PIECE_BYTES
    from idem_assets.spark.landing import IN_MEMORY_FILE_BYTES

    cases = [_big_case(cluster, work, base_rows, size) for size in sizes]
    target = cases[0]
    held, measured = bounded(cases)
    md = [
        f"### S6. Single-file CSV days up to {_gb(target)} on executors of a "
        f"{HEAP_MIB / 1024:g} GiB heap",
        "",
        "One orders CSV file per day (the S5 day's CSV file copied, each copy's order_ids "
        f"moved by {ID_STRIDE:,}, the last copy cut short; generated once into "
        "benchmarks/.data) read, deduplicated and written by the S5 Spark calls on the same "
        f"cluster: 2 workers of 1 core and {WORKER_MEMORY}, `spark.executor.memory="
        f"{EXECUTOR_MEMORY}`, `spark.sql.shuffle.partitions={S6_SHUFFLE_PARTITIONS}`, "
        "`spark.task.maxFailures=1` (a task that runs out of memory would on every "
        "attempt). A file is one read task: one executor reads it in pieces of "
        f"{PIECE_BYTES / 2**20:.0f} MiB of whole records into one partition of the "
        "persisted judged frame (`read_landing_spark` persists it `DISK_ONLY` when a file "
        f"of the day is over {IN_MEMORY_FILE_BYTES / 2**20:g} MiB, else `MEMORY_AND_DISK`); "
        "the dedupe and the write shuffle it to both executors. One sample per file.",
        "",
        table(BIG_HEADERS, [_big_row(c) for c in sorted(cases, key=lambda c: c["bytes"])]),
        "",
        f"- {measured}: "
        + ("the same for every file." if held else f"not the same: {big_cause(cases)}."),
        *(
            [f"- {spilled_block(cases)}"]
            if any(SPILLED_BLOCK in (c["error"] or "") for c in cases)
            else []
        ),
        "- memory columns as in S5; judged block: the file's partition of the persisted "
        "judged frame, on disk only its size there (the driver's block manager at the end "
        "of the write), else as the executor logged it (its size when kept in memory, else "
        "how far it unrolled before going to disk).",
        f"- {HISTORY}",
        "",
    ]
    return md, cases


# --------------------------------------------------------------------------- the family


def run_family(rows: int, csv_sizes: tuple[int, ...], reps: int) -> tuple[str, dict[str, Any]]:
    """S5 and S6 on one cluster: the markdown (without a ## heading) and the numbers.

    ``csv_sizes``: S6's files in bytes, the target's first.
    """
    import pyspark

    from idem_assets_tests.fixtures.spark_cluster import start_cluster, stop_cluster

    orders_day(rows), orders_day(WARM_ROWS)  # generated once, cached in benchmarks/.data
    for size in csv_sizes:
        big_csv_day(rows, size)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-spark-engines-"))
    (work / "cluster").mkdir()
    running = start_cluster(work / "cluster", workers=2, worker_memory=WORKER_MEMORY)
    try:
        workers = tuple(w.pid for w in running.workers)
        cluster = Cluster(running.master_url, running.spark_conf(), workers, running.root)
        engines_md, engines = run_engines(cluster, work, rows, reps)
        big_md, big = run_big_csv(cluster, work, rows, csv_sizes)
    finally:
        stop_cluster(running)
        shutil.rmtree(work, ignore_errors=True)
    took, load_after = time.perf_counter() - started, os.getloadavg()[0]
    md = [
        f"S5 and S6 (`benchmarks.cases.spark_engines`): pyspark {pyspark.__version__} (its "
        f"own Spark), Java {_java_version()}; one standalone cluster "
        "(`idem_assets_tests.fixtures.spark_cluster.start_cluster`) for both. They took "
        f"{took:.0f} s; load average (1 min) {load_before:.2f} before, {load_after:.2f} "
        f"after, on {os.cpu_count()} cores (local[2] and the cluster's two one-core "
        "executors use both; the driver shares them).",
        "",
        *engines_md,
        *big_md,
    ]
    return "\n".join(md), {"engines": engines, "big": big, "seconds": took}


def _java_version() -> str:
    found = subprocess.run(["java", "-version"], capture_output=True, text=True)
    first = (found.stderr or found.stdout).splitlines()[:1]
    return first[0].split('"')[1] if first and '"' in first[0] else "?"


def save(md: str, numbers: dict[str, Any]) -> None:
    """This run's section and numbers into benchmarks/results, with the timeline plot."""
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "spark_engines.md").write_text(md, encoding="utf-8")
    (RESULTS_DIR / "spark_engines.json").write_text(json.dumps(numbers, indent=1))
    plot_timeline(numbers["big"], RESULTS_DIR / "spark_engines_timeline.png")


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/spark_engines.png: wall seconds of S5 per engine, and S6."""
    engines = numbers["engines"]
    groups = {f"S5: {engines['rows'] / 1e6:.1f}M-row day": dict(engines["seconds"])}
    for case in sorted(numbers["big"], key=lambda c: c["bytes"]):
        failed = " (failed)" if case["error"] else ""
        groups[f"S6: {_gb(case)} CSV day{failed}"] = {CLUSTER: case["seconds"]}
    return groups


def memory_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/spark_engines_memory.png: peaks in MiB."""
    engines = numbers["engines"]
    groups = {
        "S5 driver Python": dict(engines["driver_python"]),
        "S5 executor (JVM + Python)": dict(engines["executor_total"]),
    }
    for case in sorted(numbers["big"], key=lambda c: c["bytes"]):
        failed = " (failed)" if case["error"] else ""
        groups[f"S6 {_gb(case)}: executor{failed}"] = {CLUSTER: case["executor_total"]}
    return groups


def plot_timeline(cases: list[dict[str, Any]], path: Path) -> None:
    """S6: the busiest executor's RSS (JVM + Python workers) over each file's run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    for case in sorted(cases, key=lambda c: c["bytes"]):
        points = case["timeline"]
        failed = " (failed)" if case["error"] else ""
        ax.plot(
            [t for t, _ in points],
            [jvm + python for _, (jvm, python) in points],
            label=f"{_gb(case)}{failed}",
        )
    ax.axhline(HEAP_MIB, color="k", linestyle="--", linewidth=1, label="executor heap")
    ax.set_xlabel("seconds into the run")
    ax.set_ylabel("RSS MiB, JVM + Python workers")
    ax.set_title("S6: the busiest executor's memory, one CSV file a day")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    if sys.argv[1:2] == ["generate"]:
        from benchmarks.cases import landing_store

        landing_store.orders_day(int(sys.argv[2]))
