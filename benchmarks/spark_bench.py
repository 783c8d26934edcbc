"""Local engine (Arrow/Polars) vs Spark local: dedupe + one-commit partition overwrite.

Run: `.venv/bin/python -m benchmarks.spark_bench [--quick] [--scales 0.1 1 3]`.
TPC-H orders and lineitem come from `tpchgen-cli`; each row gets a day (7 partitions,
by order key) and a version, and ~5% of the orders are re-delivered with a newer version
plus ~1% delivered twice unchanged, so the dedupe has work. Each engine runs in its own
process on the same input: read, keep the newest row per key, overwrite the 7 days in one
Delta commit, then the same run again (a no-op rerun). The parent samples the RSS of the
engine's Python driver and, for Spark, of its JVM (driver and executors in local mode).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DATA_DIR = Path(__file__).resolve().parent / ".data" / "spark"
ROOT = Path(__file__).resolve().parents[1]
START, DAYS = dt.date(2024, 3, 1), 7
KEYS = {"orders": ("o_orderkey",), "lineitem": ("l_orderkey", "l_linenumber")}
STATUS = {"orders": "o_orderstatus", "lineitem": "l_linestatus"}
FULL_SCALES = (0.1, 1.0, 3.0)
SPARK_CONF = {"spark.sql.shuffle.partitions": "16"}
SPARK_DRIVER_MEMORY = "3g"
MEMORY_BUDGET_GB = 12.0


@dataclass
class Run:
    """One engine on one table at one scale factor."""

    table: str
    scale: float
    engine: str
    input_rows: int
    written_rows: int
    duplicates_dropped: int
    startup_s: float
    write_s: float
    rerun_s: float
    rerun_committed: bool
    driver_peak_mb: float
    jvm_peak_mb: float
    fingerprint: str


def tpch(scale: float) -> Path:
    """TPC-H orders and lineitem Parquet at ``scale``, generated once and cached."""
    folder = DATA_DIR / f"tpch-sf{scale:g}"
    if not (folder / "lineitem.parquet").exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                str(Path(sys.executable).parent / "tpchgen-cli"),
                "parquet",
                "-s",
                f"{scale:g}",
                "--tables",
                "orders,lineitem",
                "--output-dir",
                str(folder),
            ],
            check=True,
        )
    return folder


def prepare_input(table: str, scale: float) -> Path:
    """Landing-like input: TPC-H rows with a day, a version, re-deliveries and duplicates."""
    import polars as pl

    target = DATA_DIR / f"input-{table}-sf{scale:g}.parquet"
    if target.exists():
        return target
    order_key = pl.col(KEYS[table][0])
    base = pl.scan_parquet(tpch(scale) / f"{table}.parquet").with_columns(
        pl.col(pl.String).cast(pl.String),
        (pl.lit(START) + pl.duration(days=order_key % DAYS)).alias("day"),
        (
            pl.lit(dt.datetime(2024, 3, 1, tzinfo=dt.UTC)).dt.cast_time_unit("us")
            + pl.duration(seconds=order_key % 86_400)
        ).alias("updated_at"),
    )
    redelivered = base.filter(order_key % 20 == 3).with_columns(
        pl.col("updated_at") + pl.duration(hours=1), pl.lit("R").alias(STATUS[table])
    )
    duplicated = base.filter(order_key % 100 == 7)
    staging = target.with_suffix(".tmp")
    pl.concat([base, redelivered, duplicated]).sink_parquet(staging, row_group_size=262_144)
    staging.rename(target)
    return target


def run_local(table: str, source: Path, lake: Path) -> dict[str, object]:
    """The local engine as the IO manager runs it: Arrow in, Polars dedupe, delta-rs write."""
    import pyarrow.parquet as pq

    from idem_assets.lake import LakeTable, dedupe_newest, overwrite_partitions

    target = LakeTable(str(lake / table))
    out: dict[str, object] = {"startup_s": 0.0}
    for phase in ("write", "rerun"):
        began = time.perf_counter()
        rows = pq.read_table(source)
        schema = rows.schema
        deduped = dedupe_newest(rows, KEYS[table], "updated_at", sort_by=["day"])
        result = overwrite_partitions(
            target, deduped.rows, "day", START, START + dt.timedelta(days=DAYS), schema=schema
        )
        out[f"{phase}_s"] = time.perf_counter() - began
        out[f"{phase}_committed"] = result.committed
        out.update(input_rows=rows.num_rows, duplicates_dropped=deduped.duplicates_dropped)
        del rows, deduped
    return out


def run_spark(table: str, source: Path, lake: Path) -> dict[str, object]:
    """The Spark engine: executors read, dedupe and write; delta-rs commits."""
    import pyarrow.parquet as pq

    from idem_assets.lake import LakeTable
    from idem_assets.spark.resource import local_spark_session
    from idem_assets.spark.transforms import dedupe_newest_spark
    from idem_assets.spark.writer import overwrite_partitions_spark

    began = time.perf_counter()
    spark = local_spark_session(conf=SPARK_CONF, driver_memory=SPARK_DRIVER_MEMORY)
    out: dict[str, object] = {"startup_s": time.perf_counter() - began}
    schema = pq.read_schema(source)  # footer only
    target = LakeTable(str(lake / table))
    for phase in ("write", "rerun"):
        began = time.perf_counter()
        rows = spark.read.parquet(f"file://{source}")
        deduped = dedupe_newest_spark(rows, KEYS[table], "updated_at")
        result = overwrite_partitions_spark(
            target,
            deduped.rows,
            "day",
            START,
            START + dt.timedelta(days=DAYS),
            schema=schema,
            cluster_by=KEYS[table],
        )
        out[f"{phase}_s"] = time.perf_counter() - began
        out[f"{phase}_committed"] = result.committed
        out["duplicates_dropped"] = deduped.duplicates_dropped
    out["input_rows"] = pq.ParquetFile(source).metadata.num_rows
    spark.stop()
    return out


def engine_main(engine: str, table: str, source: Path, lake: Path) -> None:
    """Child process entry: run one engine, verify the table, print one JSON line."""
    from idem_assets.lake import LakeTable
    from idem_assets.lake.stored import table_fingerprint

    out = (run_local if engine == "local" else run_spark)(table, source, lake)
    print_fp = table_fingerprint(LakeTable(str(lake / table)))
    assert print_fp is not None
    out.update(written_rows=print_fp.rows, fingerprint=str(print_fp))
    print("RESULT " + json.dumps(out), flush=True)


class PeakSampler(threading.Thread):
    """Samples a process's RSS and its java descendants' RSS every 50 ms.

    A run whose driver goes over ``budget`` bytes is killed (it is our own child), so one
    engine running out of memory cannot take the machine down with it.
    """

    def __init__(self, pid: int, budget: int) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.budget = budget
        self.driver_peak = 0
        self.jvm_peak = 0
        self.over_budget = False
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.driver_peak = max(self.driver_peak, self.process.memory_info().rss)
                jvm = sum(
                    c.memory_info().rss
                    for c in self.process.children(recursive=True)
                    if c.name() == "java"
                )
                self.jvm_peak = max(self.jvm_peak, jvm)
                if self.driver_peak > self.budget and not self.over_budget:
                    self.over_budget = True
                    self.process.kill()
            except psutil.Error:
                pass
            time.sleep(0.05)


def measure(engine: str, table: str, scale: float, budget_gb: float) -> Run:
    """Run one engine in a fresh process on a fresh lake and collect its numbers."""
    source = prepare_input(table, scale)
    lake = DATA_DIR / f"lake-{engine}-{table}-sf{scale:g}"
    shutil.rmtree(lake, ignore_errors=True)
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.spark_bench",
            "--engine",
            engine,
            "--table",
            table,
            "--source",
            str(source),
            "--lake",
            str(lake),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    sampler = PeakSampler(child.pid, int(budget_gb * 2**30))
    sampler.start()
    output, _ = child.communicate()
    sampler.done.set()
    sampler.join()
    if sampler.over_budget:
        return Run(
            table,
            scale,
            engine,
            0,
            0,
            0,
            0.0,
            float("nan"),
            float("nan"),
            False,
            sampler.driver_peak / 2**20,
            sampler.jvm_peak / 2**20,
            "over budget",
        )
    if child.returncode != 0:
        raise RuntimeError(f"{engine} on {table} sf{scale:g} failed ({child.returncode})")
    line = next(x for x in output.splitlines() if x.startswith("RESULT "))
    data = json.loads(line[len("RESULT ") :])
    shutil.rmtree(lake, ignore_errors=True)
    return Run(
        table,
        scale,
        engine,
        data["input_rows"],
        data["written_rows"],
        data["duplicates_dropped"],
        data["startup_s"],
        data["write_s"],
        data["rerun_s"],
        data["rerun_committed"],
        sampler.driver_peak / 2**20,
        sampler.jvm_peak / 2**20,
        data["fingerprint"],
    )


def markdown(runs: list[Run]) -> str:
    """The results table plus the facts needed to read it."""
    lines = [
        "# Spark engine benchmark: local (Arrow/Polars) vs Spark local[2]",
        "",
        "| table | SF | input rows | rows / day partition | engine | write s | no-op rerun s "
        "| JVM start s | driver peak RSS MB | JVM peak RSS MB | same table |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for run in runs:
        peer = next(
            r
            for r in runs
            if (r.table, r.scale) == (run.table, run.scale) and r.engine != run.engine
        )
        same = (
            "yes"
            if peer.fingerprint == run.fingerprint
            else ("n/a" if "over budget" in (run.fingerprint, peer.fingerprint) else "NO")
        )
        if run.fingerprint == "over budget":
            lines.append(
                f"| {run.table} | {run.scale:g} | - | - | {run.engine} | killed: driver "
                f"over the memory budget at {run.driver_peak_mb:,.0f} MB | | | | | n/a |"
            )
            continue
        jvm = f"{run.jvm_peak_mb:,.0f}" if run.engine == "spark" else "-"
        start = f"{run.startup_s:.1f}" if run.engine == "spark" else "-"
        lines.append(
            f"| {run.table} | {run.scale:g} | {run.input_rows:,} | {run.written_rows // DAYS:,} "
            f"| {run.engine} | {run.write_s:.1f} | {run.rerun_s:.1f} | {start} "
            f"| {run.driver_peak_mb:,.0f} | {jvm} | {same} |"
        )
    lines += [
        "",
        f"- {platform.machine()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM, Python "
        f"{platform.python_version()}; other work may share the machine.",
        f"- Spark: local[2], driver (= executor) heap {SPARK_DRIVER_MEMORY}, {SPARK_CONF}. "
        "Write = read input + dedupe (count job) + stage files + fingerprint staged files and "
        "stored slice + one delta-rs commit; JVM start time is not included.",
        "- Local: pyarrow read, `dedupe_newest` (Polars), `overwrite_partitions` (delta-rs).",
        "- Driver peak RSS: the engine's Python process. JVM peak RSS: Spark's driver JVM, "
        "which in local mode also runs the executors (so it holds the shuffle and sort "
        "buffers, bounded by the heap, spilling to disk beyond it).",
        "- same table: both engines' tables have the same content fingerprint.",
        "- A no-op rerun does the whole computation again (read, dedupe, stage, fingerprint) "
        "and then commits nothing; the Spark rerun deletes its staged files.",
        *summary(runs),
    ]
    return "\n".join(lines) + "\n"


def summary(runs: list[Run]) -> list[str]:
    """What the numbers show about driver memory, measured, not assumed."""
    done = [r for r in runs if r.fingerprint != "over budget"]
    spark = [r for r in done if r.engine == "spark"]
    local = [r for r in done if r.engine == "local"]
    lines = []
    if spark and local:
        lines.append(
            f"- Driver peak RSS: Spark {min(r.driver_peak_mb for r in spark):,.0f}-"
            f"{max(r.driver_peak_mb for r in spark):,.0f} MB for "
            f"{min(r.input_rows for r in spark):,}-{max(r.input_rows for r in spark):,} input "
            f"rows; local {min(r.driver_peak_mb for r in local):,.0f}-"
            f"{max(r.driver_peak_mb for r in local):,.0f} MB for "
            f"{min(r.input_rows for r in local):,}-{max(r.input_rows for r in local):,} rows."
        )
    for run in runs:
        if run.fingerprint == "over budget":
            lines.append(
                f"- {run.engine} {run.table} SF {run.scale:g} was stopped when its "
                f"driver passed {run.driver_peak_mb:,.0f} MB; the other engine "
                "finished it."
            )
    return lines


def plot(runs: list[Run], path: Path) -> None:
    """Wall time and driver memory against input rows, per engine and table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for engine, marker in (("local", "o"), ("spark", "s")):
        for table, style in (("orders", "-"), ("lineitem", "--")):
            mine = sorted(
                (
                    r
                    for r in runs
                    if (r.engine, r.table) == (engine, table) and r.fingerprint != "over budget"
                ),
                key=lambda r: r.input_rows,
            )
            if not mine:
                continue
            rows = [r.input_rows for r in mine]
            label = f"{engine} {table}"
            left.plot(rows, [r.write_s for r in mine], style, marker=marker, label=label)
            right.plot(
                rows,
                [r.driver_peak_mb for r in mine],
                style,
                marker=marker,
                label=f"{label} (driver)",
            )
            if engine == "spark":
                right.plot(
                    rows, [r.jvm_peak_mb for r in mine], ":", marker=marker, label=f"{label} (JVM)"
                )
    for axis, title, unit in (
        (left, "dedupe + overwrite wall time", "seconds"),
        (right, "peak RSS", "MiB"),
    ):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("input rows")
        axis.set_ylabel(unit)
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    """Run both engines on every table and scale; print and save the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="SF 0.1 only")
    parser.add_argument("--scales", type=float, nargs="+", default=list(FULL_SCALES))
    parser.add_argument("--tables", nargs="+", default=list(KEYS), choices=list(KEYS))
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument(
        "--memory-budget-gb",
        type=float,
        default=MEMORY_BUDGET_GB,
        help="kill a run whose driver RSS goes over this",
    )
    parser.add_argument("--engine", choices=("local", "spark"), help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    parser.add_argument("--source", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--lake", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.engine:
        engine_main(args.engine, args.table, args.source, args.lake)
        return
    scales = [0.1] if args.quick else args.scales
    runs = []
    for scale in scales:
        for table in args.tables:
            for engine in ("local", "spark"):
                run = measure(engine, table, scale, args.memory_budget_gb)
                print(json.dumps(asdict(run)), flush=True)
                runs.append(run)
    text = markdown(runs)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spark.md").write_text(text, encoding="utf-8")
    plot(runs, args.out / "spark.png")


if __name__ == "__main__":
    main()
