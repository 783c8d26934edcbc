"""Years of history: TPC-H orders as one range, launched from the CLI, against Dagster's floors.

The shipped ``tpch_orders`` declaration (a Parquet file per o_orderdate, overwrite, its checks
a day) over ``python -m idem_assets.sample tpch --scale 0.1 --days N`` (cached under
benchmarks/.data), N days from 1992-01-01, for N in 1, 31 and 2,406. Every contender runs in a
fresh lake, checkpoint store and DAGSTER_HOME (its storage created first, as ``make run``
creates it), through ``dg launch --partition-range FIRST...LAST`` (one day: ``--partition``):

- ours on the project's instance profile (``deploy/sqlite/dagster.yaml``: Dagster's SQLite
  storage with its connections kept, ``idem_assets/instance/sqlite.py``): the first run, the
  same again (unchanged: no new Delta version), then the middle day's file corrected (one
  o_totalprice) and that day launched alone (one version, touching that day only);
- ours on Dagster's default SQLite storage (``storage: sqlite``), first run and rerun: what
  the same code costs on the instance Dagster makes by default;
- (a) Dagster's trivial run of the same range: a daily asset with a single-run backfill
  policy and an IO manager that does nothing, no checks; on both instances;
- (b) the same as a ``multi_asset`` with as many partitioned check specs as ``tpch_orders``
  has, an ``AssetCheckEvaluation`` per day and check yielded from its step as
  ``lib/checks/per_partition.py`` does (what storing that many results costs Dagster), on
  the project's profile;
- (c) one ``python -c`` process reading the range with pyarrow and writing it with
  ``write_deltalake``.

Commands are timed end to end under ``/usr/bin/time`` (CPU is user + system of the command
and its children; its peak RSS); Delta versions, the corrected day's commit and every run's
stored events by type are read after, untimed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest.mock import patch

from benchmarks.cases import fast_runs
from benchmarks.cases.fast_runs import BIN, ROOT, Sample, base_env
from benchmarks.data import DATA_DIR
from benchmarks.harness import table

SCALE, ASSET = 0.1, "tpch_orders"
DAYS, QUICK_DAYS = (1, 31, 2406), (1, 31)
FIRST = dt.date(1992, 1, 1)
TIME = shutil.which("time", path="/usr/bin:/bin")
TIMEOUT = 3 * 3600.0
PROFILE = ROOT / "deploy" / "sqlite" / "dagster.yaml"
# Dagster's own SQLite storage, as an instance without a dagster.yaml gets it.
STOCK = "\n".join(
    [
        "storage:",
        "  sqlite:",
        "    base_dir:",
        "      env: DAGSTER_HOME",
        "telemetry:",
        "  enabled: false",
        "",
    ]
)

OURS, RERUN, DAY = "ours: first run", "ours: unchanged rerun", "ours: one corrected day"
OURS_STOCK = "ours, Dagster's SQLite storage: first run"
RERUN_STOCK = "ours, Dagster's SQLite storage: unchanged rerun"
FLOOR_A = "(a) trivial asset"
FLOOR_A_STOCK = "(a) trivial asset, Dagster's SQLite storage"
FLOOR_B = "(b) trivial asset + the same checks a day"
DELTA_RS = "(c) pyarrow + write_deltalake process"
ORDER = [OURS, RERUN, DAY, OURS_STOCK, RERUN_STOCK, FLOOR_A, FLOOR_A_STOCK, FLOOR_B, DELTA_RS]
EVENT_TYPES = (
    "ASSET_MATERIALIZATION",
    "ASSET_CHECK_EVALUATION",
    "ASSET_MATERIALIZATION_PLANNED",
    "ASSET_CHECK_EVALUATION_PLANNED",
)
HEADERS = "days|contender|instance|wall s|CPU s|peak RSS MiB|Delta version after|events stored"
EVENT_HEADERS = "days|contender|events stored|" + "|".join(EVENT_TYPES) + "|other"
DERIVED = (
    "days|unchanged rerun ÷ (a), CPU|the same, (a) on Dagster's SQLite storage|first run ÷ (a), "
    "CPU|the same, (a) on Dagster's SQLite storage|(ours − (b)) ÷ (c), CPU|ours on Dagster's "
    "storage ÷ ours, first run, CPU|the same, rerun"
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
FLOOR_DEFINITIONS = """\
import os

import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="{first}", timezone="UTC")
SINGLE = dg.BackfillPolicy.single_run()
NAMES = {names!r}

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


def check_names() -> list[str]:
    """The checks ``tpch_orders`` reports each day, as the code location declares them."""
    with patch.dict(os.environ, {"IDEM_NOTIFY_TOKEN": "x"}):
        from idem_assets.definitions import defs

        specs = defs.resolve_assets_def(ASSET).check_specs
    return sorted(spec.name for spec in specs)


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


def home_of(work: Path, profile: str) -> Path:
    """A DAGSTER_HOME holding ``profile`` with its storage created (as ``make run`` does)."""
    home = work / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(profile)
    env = {**base_env(), "DAGSTER_HOME": str(home)}
    code = "import dagster as dg\ni = dg.DagsterInstance.get()\ni.get_runs(limit=1)\ni.dispose()\n"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    return home


def fresh(root: Path, profile: str, code: Path) -> dict[str, str]:
    """An empty root with a prepared DAGSTER_HOME; the environment of a launch from ``code``."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    home = home_of(root, profile)
    idem = {"LANDING_DIR": root / "landing", "LAKE_DIR": root / "lake", "NOTIFY_TOKEN": "x"}
    idem |= {"STATE_URL": f"sqlite:///{root / 'state.db'}", "NOTIFY_URL": "http://127.0.0.1:9"}
    env = {"DAGSTER_HOME": home, "NO_COLOR": 1, "VIRTUAL_ENV": BIN.parent}
    env |= {"PYTHONPATH": code, **{f"IDEM_{k}": v for k, v in idem.items()}}
    return {**base_env(), **{k: str(v) for k, v in env.items()}}


def last_run(home: Path) -> tuple[bool, Counter[str], int]:
    """(succeeded, its stored events by type, check evaluations carried forward) of the newest
    run in ``home``."""
    import dagster as dg

    with patch.dict(os.environ, {"DAGSTER_HOME": str(home)}), dg.DagsterInstance.get() as instance:
        run = instance.get_runs(limit=1)[0]
        kinds: Counter[str] = Counter()
        carried = 0
        for record in instance.get_records_for_run(run.run_id, limit=1_000_000).records:
            event = record.event_log_entry.dagster_event
            if event is None:
                continue
            kinds[event.event_type_value] += 1
            if event.event_type_value == "ASSET_CHECK_EVALUATION":
                value = event.event_specific_data.metadata.get("carried_forward")  # type: ignore[union-attr]
                carried += getattr(value, "value", False) is True
        done = run.status == dg.DagsterRunStatus.SUCCESS
    return done, kinds, carried


def table_state(lake: Path) -> tuple[int, int]:
    """(version, rows) of a Delta table; (-1, 0) when there is none."""
    import deltalake

    if not (lake / "_delta_log").exists():
        return -1, 0
    delta = deltalake.DeltaTable(str(lake))
    return delta.version(), delta.to_pyarrow_dataset().count_rows()


def commit_days(lake: Path, version: int) -> set[str]:
    """The o_orderdate partitions whose files a commit adds or removes."""
    log = lake / "_delta_log" / f"{version:020d}.json"
    days = set()
    for line in log.read_text().splitlines():
        action = json.loads(line)
        for kind in ("add", "remove"):
            if kind in action:
                days.add(str((action[kind].get("partitionValues") or {}).get("o_orderdate")))
    return days


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


def one_size(days: int, work: Path, floor: Path, out: dict[str, Any]) -> None:
    """Every contender once over ``days`` days: samples, events, versions, rows into ``out``."""
    last, middle = FIRST + dt.timedelta(days - 1), FIRST + dt.timedelta(days // 2)
    span = ["--partition-range", f"{FIRST}...{last}"] if days > 1 else ["--partition", str(FIRST)]
    dg_cli, source = str(BIN / "dg"), landing(days) / "tpch" / "orders"
    profile = PROFILE.read_text()

    def launch(name: str, argv: list[str], root: Path, code: Path, lake: Path | None) -> None:
        log = root / f"{ORDER.index(name)}.log"
        done = timed(argv, env, code, log)
        ok = True
        if argv[0] == dg_cli:  # a Dagster run: its status and stored events
            ok, kinds, carried = last_run(root / "home")
            out["events"][name], out["carried"][name] = kinds, carried
        if lake is not None:
            out["versions"][name], out["rows"][name] = table_state(lake)
        if done.code != 0 or not ok:
            tail = log.read_text(errors="replace")[-1500:]
            out["failures"].append(f"{name} exited {done.code}:\n\n```\n…{tail}\n```\n")
        else:
            out["samples"].setdefault(name, []).append(done)

    root = work / "delta-rs"
    env = fresh(root, profile, ROOT)
    code = [sys.executable, "-c", DELTA_RS_CODE, str(source), str(root / "lake")]
    launch(DELTA_RS, [*code, str(FIRST), str(last)], root, ROOT, root / "lake")
    floors = ((FLOOR_A, "floor", profile), (FLOOR_A_STOCK, "floor", STOCK))
    for i, (name, select, instance) in enumerate((*floors, (FLOOR_B, "floor_checks", profile))):
        env = fresh(work / f"floor-{i}", instance, floor)
        argv = [dg_cli, "launch", "--assets", select, *span]
        launch(name, argv, work / f"floor-{i}", floor, None)
    for instance, runs in ((STOCK, (OURS_STOCK, RERUN_STOCK)), (profile, (OURS, RERUN, DAY))):
        root = work / "ours"
        env = fresh(root, instance, ROOT)
        env["IDEM_TPCH_LAST_DAY"] = str(last)  # the example's partitions end where its data ends
        shutil.copytree(source, root / "landing" / "tpch" / "orders")  # private: corrected
        for name in runs:
            scope = span
            if name == DAY:
                correct(root / "landing", middle)
                scope = ["--partition", str(middle)]
            argv = [dg_cli, "launch", "--assets", ASSET, *scope]
            launch(name, argv, root, ROOT, root / "lake" / ASSET)
        if DAY in runs and out["versions"].get(DAY, -1) >= 0:
            out["corrected_days"] = sorted(commit_days(root / "lake" / ASSET, out["versions"][DAY]))
            out["corrected_day"] = str(middle)
    for path in work.iterdir():
        shutil.rmtree(path)


def derive(seconds: dict[str, float]) -> dict[str, float]:
    """The figures the targets judge, from one size's medians (wall or CPU seconds)."""
    get = seconds.get
    out: dict[str, float] = {}
    for key, ours, floor in (
        ("rerun_vs_a", RERUN, FLOOR_A),
        ("rerun_vs_a_stock", RERUN, FLOOR_A_STOCK),
        ("first_vs_a", OURS, FLOOR_A),
        ("first_vs_a_stock", OURS, FLOOR_A_STOCK),
        ("stock_first", OURS_STOCK, OURS),
        ("stock_rerun", RERUN_STOCK, RERUN),
    ):
        if get(ours) is not None and get(floor):
            out[key] = get(ours) / get(floor)  # type: ignore[operator]
    if None not in (get(OURS), get(FLOOR_B)) and get(DELTA_RS):
        out["above_b_per_c"] = (get(OURS) - get(FLOOR_B)) / get(DELTA_RS)  # type: ignore[operator]
    return out


def run_family(repetitions: int, quick: bool) -> tuple[str, dict[str, Any]]:
    """The markdown section (without its ## heading) and the numbers for targets."""
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-history-"))
    results: dict[int, dict[str, Any]] = {}
    names = check_names()
    try:
        floor = fast_runs.trivial_project(work / "setup")  # its definitions replaced by the floors'
        definitions = FLOOR_DEFINITIONS.format(first=FIRST, names=names)
        (floor / fast_runs.TRIVIAL_MODULE / "definitions.py").write_text(definitions)
        runs = work / "runs"
        runs.mkdir()
        for days in (3, *(QUICK_DAYS if quick else DAYS)):  # 3: untimed, bytecode cached
            out = results[days] = {k: {} for k in ("samples", "events", "carried", "versions")}
            out |= {"rows": {}, "failures": []}
            for _ in range(1 if days == 3 else repetitions):
                one_size(days, runs, floor, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    numbers: dict[str, Any] = {"sizes": {}, "load": (load_before, os.getloadavg()[0])}
    numbers["checks"] = names
    for days, out in results.items():
        if days == 3:
            continue
        samples = out.pop("samples")
        numbers["sizes"][days] = size = {
            attr: {k: statistics.median(getattr(s, attr) for s in v) for k, v in samples.items()}
            for attr in ("seconds", "cpu", "peak_mb")
        }
        size.update(out, derived=derive(size["seconds"]), by_cpu=derive(size["cpu"]))
    return markdown(numbers, repetitions), numbers


def _shown(value: float | None, digits: str = ".2f", unit: str = "×") -> str:
    return "—" if value is None else f"{value:{digits}}{unit}"


def markdown(numbers: dict[str, Any], repetitions: int) -> str:
    """The section's text: measurements per N, events per run, derived figures, failures."""
    rows, events, derived, notes = [], [], [], []
    for days, size in sorted(numbers["sizes"].items()):
        for name in ORDER:
            instance = "Dagster's SQLite" if "SQLite" in name else "project profile"
            if name == DELTA_RS:
                instance = "—"
            if name not in size["seconds"]:
                rows.append([f"{days:,}", name, instance, "failed", "", "", "", ""])
                continue
            kinds = size["events"].get(name)
            total = "—" if kinds is None else f"{sum(kinds.values()):,}"
            measured = [size[k][name] for k in ("seconds", "cpu", "peak_mb")]
            version = size["versions"].get(name, "—")
            rows.append([f"{days:,}", name, instance, *measured, version, total])
            if kinds is not None:
                other = sum(v for k, v in kinds.items() if k not in EVENT_TYPES)
                counts = [f"{kinds.get(kind, 0):,}" for kind in EVENT_TYPES]
                events.append([f"{days:,}", name, f"{sum(kinds.values()):,}", *counts, other])
        cpu = size["by_cpu"]
        derived.append(
            [
                f"{days:,}",
                *(
                    _shown(cpu.get(k))
                    for k in (
                        "rerun_vs_a",
                        "rerun_vs_a_stock",
                        "first_vs_a",
                        "first_vs_a_stock",
                        "above_b_per_c",
                        "stock_first",
                        "stock_rerun",
                    )
                ),
            ]
        )
        notes += [f"- {days:,} days, {f.strip()}" for f in size["failures"][:2]]
        if size["rows"].get(OURS) != size["rows"].get(DELTA_RS):
            notes.append(f"- {days:,} days: ours' table and delta-rs' differ in rows")
        if "corrected_days" in size:
            notes.append(
                f"- {days:,} days: the corrected day {size['corrected_day']} committed version "
                f"{size['versions'].get(DAY)}, whose files are all in o_orderdate partitions "
                f"{', '.join(size['corrected_days'])}"
            )
    load = numbers["load"]
    names = numbers["checks"]
    intro = (
        f"Tree measured: {fast_runs.tree_state()}. Load average (1 min) {load[0]:.2f} before, "
        f"{load[1]:.2f} after, on {os.cpu_count()} cores shared with other work. Samples per "
        f"contender: {repetitions}.\n\n"
        f"TPC-H orders at scale {SCALE:g} (~62 a day from {FIRST}, a Parquet file a day), the "
        f"shipped `tpch_orders` declaration ({len(names)} checks a day: {', '.join(names)}), "
        "each contender in a fresh lake, checkpoint store and DAGSTER_HOME whose storage is "
        "created before the run. Ours: `dg launch --assets tpch_orders --partition-range "
        "FIRST...LAST`, again unchanged, then the middle day corrected (one o_totalprice) and "
        "`--partition DAY`; on the project's instance profile (`deploy/sqlite/dagster.yaml`, "
        "connections kept) and on Dagster's default SQLite storage. (a): `dg launch` of the "
        "range for a daily asset with a single-run backfill policy and an IO manager that does "
        "nothing; (b): the same as a `multi_asset` with as many partitioned check specs, an "
        "`AssetCheckEvaluation` per day and check; (c): `python -c` reading the range with "
        "pyarrow and writing it with `write_deltalake` (code: `benchmarks/cases/history.py`). "
        "Seconds end to end (interpreter start included), CPU = user + system of the command "
        "and its children; the command's own peak RSS (`/usr/bin/time`); the Delta version "
        "and the run's stored events read after."
    )
    body = [
        intro,
        table(HEADERS.split("|"), rows),
        "Events each run stored in the instance, by type:",
        table(EVENT_HEADERS.split("|"), events),
        "Ratios by CPU (the targets are judged by CPU: wall time moves with the machine's load):",
        table(DERIVED.split("|"), derived),
        "\n".join(notes),
    ]
    return "\n\n".join(body).rstrip("\n") + "\n"


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/history.png: milliseconds of CPU per day, one group per N."""
    shown = (OURS, RERUN, OURS_STOCK, RERUN_STOCK, FLOOR_A, FLOOR_A_STOCK, FLOOR_B, DELTA_RS)
    return {
        f"{days:,} days": {
            name: 1000 * seconds / days for name, seconds in size["cpu"].items() if name in shown
        }
        for days, size in sorted(numbers["sizes"].items())
    }
