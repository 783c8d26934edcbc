"""Whole history: TPC-H orders, years of days as one range, launched from the CLI.

The shipped ``tpch_orders`` declaration (a Parquet file per o_orderdate, overwrite, 10 checks
a day) over ``python -m idem_assets.sample tpch --scale 0.1 --days N`` (cached under
benchmarks/.data), N days from 1992-01-01, each contender in a fresh lake, checkpoint store
and DAGSTER_HOME (dagster.yaml, storage created, as ``fast_runs`` prepares it): ours, ``dg
launch --assets tpch_orders --partition-range FIRST...LAST``, the same again (unchanged: no
new Delta version), then one day's file corrected and ``--partition DAY`` (one version); a
``python -c`` reading the range with pyarrow and writing it with ``write_deltalake``; and
Dagster's floors through the same CLI in a generated project: (b) a daily asset with
``BackfillPolicy.single_run()`` and an IO manager that does nothing, (c) the same as a
``multi_asset`` with 10 partitioned check specs yielding an ``AssetCheckEvaluation`` per
day and check as ``lib/checks/per_partition.py`` does (what storing them costs Dagster).
Commands are timed end to end under ``/usr/bin/time`` (its peak RSS is the command's own);
Delta versions and the runs' check evaluations (``carried_forward``) are read untimed.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest.mock import patch

from benchmarks.cases import fast_runs
from benchmarks.cases.fast_runs import BIN, ROOT, Sample, base_env
from benchmarks.data import DATA_DIR
from benchmarks.harness import table

SCALE, CHECKS, ASSET = 0.1, 10, "tpch_orders"
DAYS, QUICK_DAYS = (30, 365, 2406), (30, 365)
FIRST = dt.date(1992, 1, 1)
TIME = shutil.which("time", path="/usr/bin:/bin")
TIMEOUT = 3 * 3600.0

OURS, RERUN, DAY = "ours: first backfill", "ours: unchanged rerun", "ours: one corrected day"
DELTA_RS = "pyarrow + write_deltalake process"
FLOOR_B = "floor (b): trivial asset"
FLOOR_C = f"floor (c): trivial asset + {CHECKS} checks per day"
FLOOR_C_DAY = "floor (c), one day"
ORDER = [OURS, RERUN, DAY, DELTA_RS, FLOOR_B, FLOOR_C, FLOOR_C_DAY]
HEADERS = (
    "days|contender|median s|min–max s|CPU s|peak RSS MiB|Delta version after|check evaluations"
)
DERIVED = (
    "days|ours − floor (b) s|ours − floor (c) s|(ours − b) ÷ delta-rs|(ours − c) ÷ delta-rs"
    "|rerun above (c) ÷ first above (c)|ms per day above (c)|by CPU: (ours − c) ÷ delta-rs"
    "|by CPU: rerun share|by CPU: ms per day above (c)"
)

DELTA_RS_CODE = """\
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from deltalake import write_deltalake
root, lake, first, last = sys.argv[1:]
files = sorted(p for p in Path(root).glob("date=*/*.parquet") if first <= p.parent.name[5:] <= last)
table = pa.concat_tables(pq.read_table(p) for p in files)
write_deltalake(lake, table, partition_by=["o_orderdate"], mode="overwrite")
"""
FLOOR_DEFINITIONS = f"""\
import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="{FIRST}", timezone="UTC")
SINGLE = dg.BackfillPolicy.single_run()
NAMES = [f"check_{{i}}" for i in range({CHECKS})]

class Nothing(dg.IOManager):
    def handle_output(self, context, obj): pass
    def load_input(self, context): return None

@dg.asset(partitions_def=DAILY, backfill_policy=SINGLE)
def floor() -> None:
    return None

@dg.multi_asset(
    outs={{"floor_checks": dg.AssetOut(is_required=False)}}, partitions_def=DAILY,
    check_specs=[dg.AssetCheckSpec(n, asset="floor_checks", partitions_def=DAILY) for n in NAMES],
    backfill_policy=SINGLE, can_subset=True,
)
def floor_checks(context: dg.AssetExecutionContext):
    key = dg.AssetKey("floor_checks")
    if key in context.selected_asset_keys:
        yield dg.Output(None, output_name="floor_checks")
    for partition in context.partition_keys:
        for name in NAMES:
            yield dg.AssetCheckEvaluation(
                asset_key=key, check_name=name, passed=True, partition=partition,
                metadata={{"carried_forward": False, "rows": 62, "partition_range": partition}},
            )
    for check in context.selected_asset_check_keys:
        name = context.assets_def.get_output_name_for_asset_check_key(check)
        yield dg.Output(None, output_name=name)

defs = dg.Definitions(assets=[floor, floor_checks], resources={{"io_manager": Nothing()}},
                      executor=dg.in_process_executor)
"""


def landing(days: int) -> Path:
    """The landing zone of ``days`` days at SCALE, laid out once by the sample CLI."""
    path = DATA_DIR / f"history-landing-sf{SCALE:g}-{days}d"
    if not path.exists():
        scratch = path.with_name(path.name + ".tmp")
        shutil.rmtree(scratch, ignore_errors=True)
        argv = ["tpch", "--out", str(scratch), "--scale", f"{SCALE:g}", "--days", str(days)]
        command = [sys.executable, "-m", "idem_assets.sample", *argv]
        subprocess.run(command, check=True, capture_output=True, env=base_env(), cwd=ROOT)
        scratch.rename(path)
    return path


def timed(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> Sample:
    """A command to completion under /usr/bin/time: wall, CPU, its own peak RSS, exit code."""
    stats = log.with_suffix(".time")
    wrapped = [TIME, "-f", "%U %S %M", "-o", str(stats), *argv] if TIME else argv
    with log.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(
            wrapped, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
        seconds = time.perf_counter() - started
    if not TIME or not stats.exists():
        return Sample(seconds, float("nan"), float("nan"), code)
    user, system, peak = stats.read_text().splitlines()[-1].split()
    return Sample(seconds, float(user) + float(system), int(peak) / 1024, code)


def fresh(root: Path, template: Path, code: Path) -> dict[str, str]:
    """An empty root with a prepared DAGSTER_HOME; the environment of a launch from ``code``."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copytree(template, root / "home")
    idem = {"LANDING_DIR": root / "landing", "LAKE_DIR": root / "lake", "NOTIFY_TOKEN": "x"}
    idem |= {"STATE_URL": f"sqlite:///{root / 'state.db'}", "NOTIFY_URL": "http://127.0.0.1:9"}
    env = {"DAGSTER_HOME": root / "home", "NO_COLOR": 1, "VIRTUAL_ENV": BIN.parent}
    env |= {"PYTHONPATH": code, **{f"IDEM_{k}": v for k, v in idem.items()}}
    return {**base_env(), **{k: str(v) for k, v in env.items()}}


def last_run(home: Path) -> tuple[bool, int, int]:
    """(succeeded, check evaluations, of which carried forward) of the newest run in ``home``."""
    import dagster as dg

    with patch.dict(os.environ, {"DAGSTER_HOME": str(home)}), dg.DagsterInstance.get() as instance:
        run = instance.get_runs(limit=1)[0]
        kind = dg.DagsterEventType.ASSET_CHECK_EVALUATION
        carried = [
            record.get_dagster_event().event_specific_data.metadata.get("carried_forward")
            for record in instance.all_logs(run.run_id, of_type=kind)
        ]
        done = run.status == dg.DagsterRunStatus.SUCCESS
    return done, len(carried), sum(1 for c in carried if getattr(c, "value", False) is True)


def table_state(lake: Path) -> tuple[int, int]:
    """(version, rows) of a Delta table; (-1, 0) when there is none."""
    import deltalake

    if not (lake / "_delta_log").exists():
        return -1, 0
    delta = deltalake.DeltaTable(str(lake))
    return delta.version(), delta.to_pyarrow_dataset().count_rows()


def correct(landing_dir: Path, day: dt.date) -> None:
    """One o_totalprice of ``day`` a cent higher, the file's schema kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = next((landing_dir / "tpch" / "orders" / f"date={day}").glob("*.parquet"))
    data = pq.read_table(path)
    index = data.schema.get_field_index("o_totalprice")
    prices = data.column(index).to_pylist()
    prices[0] += Decimal("0.01")
    field = data.schema.field(index)
    pq.write_table(data.set_column(index, field, pa.array(prices, field.type)), path)


def one_size(days: int, work: Path, template: Path, floor: Path, out: dict[str, Any]) -> None:
    """Every contender once over ``days`` days: samples, checks, versions, rows into ``out``."""
    last, middle = FIRST + dt.timedelta(days - 1), FIRST + dt.timedelta(days // 2)
    span, one = ["--partition-range", f"{FIRST}...{last}"], ["--partition", str(middle)]
    dg_cli, source = str(BIN / "dg"), landing(days) / "tpch" / "orders"

    def launch(name: str, argv: list[str], root: Path, code: Path, lake: Path | None) -> None:
        log = root / f"{ORDER.index(name)}.log"
        done = timed(argv, env, code, log)
        ok = True
        if argv[0] == dg_cli:  # a Dagster run: its status and check evaluations
            ok, evaluations, carried = last_run(root / "home")
            out["checks"][name] = (evaluations, carried)
        if lake is not None:
            out["versions"][name], out["rows"][name] = table_state(lake)
        if done.code != 0 or not ok:
            tail = log.read_text(errors="replace")[-1500:]
            out["failures"].append(f"{name} exited {done.code}:\n\n```\n…{tail}\n```\n")
        else:
            out["samples"].setdefault(name, []).append(done)

    root = work / "delta-rs"
    env = fresh(root, template, ROOT)
    code = [sys.executable, "-c", DELTA_RS_CODE, str(source), str(root / "lake")]
    launch(DELTA_RS, [*code, str(FIRST), str(last)], root, ROOT, root / "lake")
    floors = ((FLOOR_B, "floor", span), (FLOOR_C, "floor_checks", span))
    for i, (name, select, scope) in enumerate((*floors, (FLOOR_C_DAY, "floor_checks", one))):
        env = fresh(work / f"floor-{i}", template, floor)
        argv = [dg_cli, "launch", "--assets", select, *scope]
        launch(name, argv, work / f"floor-{i}", floor, None)
    root = work / "ours"
    env = fresh(root, template, ROOT)
    shutil.copytree(source, root / "landing" / "tpch" / "orders")  # private: it gets corrected
    for name, scope in ((OURS, span), (RERUN, span), (DAY, one)):
        if name == DAY:
            correct(root / "landing", middle)
        argv = [dg_cli, "launch", "--assets", ASSET, *scope]
        launch(name, argv, root, ROOT, root / "lake" / ASSET)
    for path in work.iterdir():
        shutil.rmtree(path)


def derive(days: int, seconds: dict[str, float]) -> dict[str, float]:
    """The figures the targets judge, from one size's median seconds."""
    ours, rerun, drs = seconds.get(OURS), seconds.get(RERUN), seconds.get(DELTA_RS)
    b, c = seconds.get(FLOOR_B), seconds.get(FLOOR_C)
    out: dict[str, float] = {}
    if ours is not None and b is not None and drs:
        out["above_b"], out["above_b_per_delta_rs"] = ours - b, (ours - b) / drs
    if ours is not None and c is not None and drs:
        out["above_c"], out["above_c_per_delta_rs"] = ours - c, (ours - c) / drs
        out["above_c_per_day_ms"] = 1000 * (ours - c) / days
        if rerun is not None and ours != c:
            out["rerun_share"] = (rerun - c) / (ours - c)
    return out


def run_family(repetitions: int, quick: bool) -> tuple[str, dict[str, Any]]:
    """The markdown section (without its ## heading) and the numbers for targets."""
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-history-"))
    results: dict[int, dict[str, Any]] = {}
    try:
        template = fast_runs.home_template(work / "setup")
        floor = fast_runs.trivial_project(work / "setup")  # its definitions replaced by the floors'
        (floor / fast_runs.TRIVIAL_MODULE / "definitions.py").write_text(FLOOR_DEFINITIONS)
        runs = work / "runs"
        runs.mkdir()
        for days in (3, *(QUICK_DAYS if quick else DAYS)):  # 3: untimed, bytecode cached
            out = results[days] = {k: {} for k in ("samples", "checks", "versions", "rows")}
            out["failures"] = []
            for _ in range(1 if days == 3 else repetitions):
                one_size(days, runs, template, floor, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    numbers: dict[str, Any] = {"sizes": {}, "load": (load_before, os.getloadavg()[0])}
    for days, out in results.items():
        if days == 3:
            continue
        samples = out.pop("samples")
        numbers["sizes"][days] = size = {
            attr: {k: statistics.median(getattr(s, attr) for s in v) for k, v in samples.items()}
            for attr in ("seconds", "cpu", "peak_mb")
        }
        size["spread"] = {
            k: (min(s.seconds for s in v), max(s.seconds for s in v)) for k, v in samples.items()
        }
        size.update(out, derived=derive(days, size["seconds"]), by_cpu=derive(days, size["cpu"]))
    return markdown(numbers, repetitions), numbers


def per_day_ratio(numbers: dict[str, Any], by: str = "derived") -> tuple[int, int, float] | None:
    """(largest N, the next, per-day cost above floor (c) at the largest ÷ at the next).

    ``by`` "by_cpu": of CPU seconds instead of wall seconds.
    """
    sizes = sorted(numbers["sizes"])[-2:]
    costs = [numbers["sizes"][n][by].get("above_c_per_day_ms") for n in sizes]
    if len(sizes) < 2 or costs[0] is None or costs[1] is None or not costs[0]:
        return None
    return sizes[1], sizes[0], costs[1] / costs[0]


def _shown(value: float | None, digits: str = ".2f") -> str:
    return "—" if value is None else f"{value:{digits}}"


def markdown(numbers: dict[str, Any], repetitions: int) -> str:
    """The section's text: measurements per N, derived figures, failures."""
    rows, derived, notes = [], [], []
    for days, size in sorted(numbers["sizes"].items()):
        for name in ORDER:
            if name not in size["seconds"]:
                rows.append([f"{days:,}", name, "failed", "", "", "", "", ""])
                continue
            checks, spread = size["checks"].get(name), size["spread"][name]
            counted = "—" if checks is None else f"{checks[0]:,} ({checks[1]:,} carried forward)"
            measured = [size[k][name] for k in ("seconds", "cpu", "peak_mb")]
            measured.insert(1, f"{spread[0]:.2f}–{spread[1]:.2f}")
            rows.append([f"{days:,}", name, *measured, size["versions"].get(name, "—"), counted])
        d = size["derived"]
        derived.append(
            [f"{days:,}", *(_shown(d.get(k)) for k in ("above_b", "above_c"))]
            + [_shown(d.get(k)) + "×" for k in ("above_b_per_delta_rs", "above_c_per_delta_rs")]
            + [_shown(d.get("rerun_share"), ".1%"), _shown(d.get("above_c_per_day_ms"), ".1f")]
            + [_shown(size["by_cpu"].get("above_c_per_delta_rs")) + "×"]
            + [_shown(size["by_cpu"].get("rerun_share"), ".1%")]
            + [_shown(size["by_cpu"].get("above_c_per_day_ms"), ".1f")]
        )
        notes += [f"- {days:,} days, {f.strip()}" for f in size["failures"][:2]]
        if size["rows"].get(OURS) != size["rows"].get(DELTA_RS):
            notes.append(f"- {days:,} days: ours' table and delta-rs' differ in rows")
    trend, cpu = per_day_ratio(numbers), per_day_ratio(numbers, "by_cpu")
    if trend and cpu:
        notes.insert(
            0,
            f"- cost per day above floor (c) at {trend[0]:,} days: {trend[2]:.2f}× its cost at "
            f"{trend[1]:,} days ({cpu[2]:.2f}× by CPU). Wall time moves with the machine's "
            "load (other work shares its cores); CPU (user + system) moves less.",
        )
    load = numbers["load"]
    intro = (
        f"Tree measured: {fast_runs.tree_state()}. Load average (1 min) {load[0]:.2f} before, "
        f"{load[1]:.2f} after, on {os.cpu_count()} cores shared with other work. Samples per "
        f"contender: {repetitions}.\n\n"
        f"TPC-H orders at scale {SCALE:g} (~62 a day from {FIRST}, a Parquet file a day), the "
        f"shipped `tpch_orders` declaration ({CHECKS} checks a day), each contender in a fresh "
        "lake, checkpoint store and DAGSTER_HOME. Ours: `dg launch --assets tpch_orders "
        "--partition-range FIRST...LAST`, again unchanged, then the middle day corrected (one "
        "o_totalprice) and `--partition DAY`. Peers: `python -c` reading the range with pyarrow "
        "and writing it with `write_deltalake` (partitioned by o_orderdate); floor (b), `dg "
        "launch` of the range for a daily asset (single-run backfill policy, an IO manager that "
        f"does nothing); floor (c), the same as a `multi_asset` with {CHECKS} partitioned check "
        "specs, an `AssetCheckEvaluation` per day and check (code: `benchmarks/cases/"
        "history.py`). Seconds end to end (interpreter start included); the command's own peak "
        "RSS (`/usr/bin/time`); Delta version after the run and check evaluations read after."
    )
    tables = [table(HEADERS.split("|"), rows), table(DERIVED.split("|"), derived)]
    return "\n\n".join([intro, *tables, "\n".join(notes)]).rstrip("\n") + "\n"


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/history.png: milliseconds per day, one group per N."""
    return {
        f"{days:,} days": {
            name: 1000 * seconds / days
            for name, seconds in size["seconds"].items()
            if name in (OURS, RERUN, DELTA_RS, FLOOR_B, FLOOR_C)
        }
        for days, size in sorted(numbers["sizes"].items())
    }
