"""Fast runs: importing the code location and runs launched from the CLI, against their floors.

Each case is compared with what any Dagster code location pays anyway, measured side by side
in the same run, because the floor itself (Dagster's import, the CLI's start) varies with
the machine and its load:

- F1. ``python -c "import idem_assets.definitions"`` in a fresh process (wall time), next
  to ``python -c "import dagster"`` alone (the floor) and the same import of the tree before
  the lazy imports (``OLD_REF``, extracted with ``git archive``); separately, ``-X
  importtime`` cumulative of ``idem_assets.definitions`` and of ``dagster``. The target is
  the code location's own share: its import at most 0.4 s above ``import dagster`` (wall
  medians), and by importtime its cumulative at most 0.4 s above dagster's cumulative in the
  same import. A diagnostic row imports with the garbage collector off, to show what
  collection costs the import.
- F2. One partition of ``orders`` with its checks, as a user launches it:
  ``dg launch --assets orders --partition DAY`` from the repository's root (its
  ``pyproject.toml`` ``[tool.dg]`` names the code location) with the default executor
  (in-process: the asset and its checks in one step, in the launching process) and the old
  way, ``--config-json`` asking for the multiprocess executor (every step its own process).
  The floor is a trivial in-process run through the same CLI: a project generated into the
  work directory (``trivial_project``: a ``pyproject.toml`` with ``[tool.dg]`` and a
  ``definitions.py`` holding one daily-partitioned asset that returns a constant through
  Dagster's default IO manager, in-process executor), launched as
  ``dg launch --assets trivial --partition DAY`` from that project's root with the same
  DAGSTER_HOME template and environment; the target is orders' run at most 1.4× it. Beside
  them ``dagster asset materialize -m idem_assets.definitions`` (the same run without dg),
  and the same run through the Python API with the code location already imported (what is
  left of the CLI's time once the imports and the CLI's start are taken out).
- F3. Three days of orders, customers, events and daily_sales with every check:
  ``dg launch --assets orders,customers,events,daily_sales --partition-range A...B``,
  in-process and multiprocess.

Every sample of F2 and F3 starts from a fresh landing zone (the sample generator, 3 days,
seed 7), no lake, no checkpoint store, and a DAGSTER_HOME holding the project's
``dagster.yaml`` with its storage already created (as ``make dagster-home`` and a first
``dagster`` command leave it: creating the SQLite schemas is a one-off ~1.5 s not billed to
any run); the first run is timed, then the same command again over the unchanged landing
(the rerun). The trivial run gets the same fresh directory and home (it reads no landing and
pickles its value under DAGSTER_HOME/storage). One untimed multiprocess run of the range and
one untimed trivial run come first, so that what runs import beyond the code location has
its bytecode cached too. Contenders alternate (A B C A B C …) so drift on the shared machine
hits all alike; times are medians with the min–max spread. CPU is user + system of the
command and every process it waited for; peak RSS is its largest process.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.data import DATA_DIR
from benchmarks.harness import Contender, sample, table

# The targets (benchmarks/targets.py reads them):
# F1: the code location's import may cost this much above `import dagster` (seconds).
ABOVE_DAGSTER = 0.4
# F2: one partition of orders with its checks at most this many times the trivial run.
TRIVIAL_RATIO = 1.4

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
START = dt.date(2024, 3, 1)
DAYS = 3
KEYS = [(START + dt.timedelta(days=i)).isoformat() for i in range(DAYS)]
RANGE_ASSETS = ("orders", "customers", "events", "daily_sales")
# The tree just before the code location imported polars and psycopg lazily (the parent of
# 1a6120b; it differs from 8f821e2 only in lib/checks/factory.py).
OLD_REF = "e760947"
MULTIPROCESS = json.dumps({"execution": {"config": {"multiprocess": {}}}})
# Bytecode of every child, both trees and site-packages alike, cached here: an installed
# project has its __pycache__, and an environment with PYTHONDONTWRITEBYTECODE would
# otherwise compile the project's sources in every sample (the trees stay unwritten).
PYCACHE = DATA_DIR / "pycache"
TIMEOUT = 900.0

FLOOR = "import dagster (the floor)"
NOW = "import idem_assets.definitions, now"
OLD = f"import idem_assets.definitions, before lazy imports, {OLD_REF}"
IN_PROCESS = "dg launch, default executor (in-process)"
MULTI = "dg launch, multiprocess executor (the old way)"
NO_DG = "dagster asset materialize -m idem_assets.definitions (in-process, no dg)"
NO_GC = "import idem_assets.definitions, now, garbage collector off"
API = "the same run through the Python API (code location imported, CLI start left out)"
TRIVIAL = "dg launch of a trivial asset (its own project, a constant, in-process): the floor"

# The floor of F2: a code location of its own with one daily-partitioned asset that returns a
# constant through Dagster's default IO manager (it pickles into DAGSTER_HOME/storage), run
# by the in-process executor as orders' is; a dg project like the repository's root.
TRIVIAL_MODULE = "trivial_location"
TRIVIAL_ASSET = "trivial"
TRIVIAL_PYPROJECT = f"""\
[project]
name = "{TRIVIAL_MODULE}"
version = "0.0.0"
requires-python = ">=3.11"
dependencies = ["dagster"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "{TRIVIAL_MODULE}"
code_location_target_module = "{TRIVIAL_MODULE}.definitions"
code_location_name = "{TRIVIAL_MODULE}"
"""
TRIVIAL_DEFINITIONS = f"""\
import dagster as dg


@dg.asset(partitions_def=dg.DailyPartitionsDefinition(start_date="{START}", timezone="UTC"))
def {TRIVIAL_ASSET}() -> int:
    return 1


defs = dg.Definitions(assets=[{TRIVIAL_ASSET}], executor=dg.in_process_executor)
"""


# --------------------------------------------------------------------------- processes


@dataclass
class Sample:
    """One command: wall seconds, CPU seconds of it and its children, peak RSS, exit code."""

    seconds: float
    cpu: float
    peak_mb: float
    code: int


def timed(argv: Sequence[str], env: dict[str, str], cwd: Path, log: Path) -> Sample:
    """Run a command to completion, output into ``log``; its own resource usage via wait4."""
    with log.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        killer = threading.Timer(TIMEOUT, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is KiB on Linux: the largest of the process and its waited-for descendants.
    return Sample(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode)


def base_env() -> dict[str, str]:
    """This environment without anything that would point a child elsewhere."""
    drop = ("PYTHONPATH", "DAGSTER_HOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("IDEM_")}
    return {**env, "PYTHONPYCACHEPREFIX": str(PYCACHE)}


def compile_tree(tree: Path) -> None:
    """Bytecode of a tree's package into PYCACHE."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "idem_assets"],
        cwd=tree,
        env=base_env(),
        check=True,
        capture_output=True,
    )


def old_tree(ref: str = OLD_REF) -> Path:
    """The project at ``ref``, extracted read-only from git once, bytecode compiled."""
    path = DATA_DIR / f"tree-{ref}"
    if not (path / "idem_assets" / "definitions.py").exists():
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return path


def tree_state() -> str:
    """HEAD and whether the working tree differs from it outside benchmarks/ (read-only git)."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, env=env, check=False
        )
        return done.stdout.rstrip("\n")

    head = git("rev-parse", "--short", "HEAD").strip()
    changed = [
        line[3:]
        for line in git("status", "--porcelain").splitlines()
        if not line[3:].startswith("benchmarks/")
    ]
    if not changed:
        return f"`{head}`, no changes outside benchmarks/"
    shown = ", ".join(f"`{p}`" for p in changed[:6]) + (" …" if len(changed) > 6 else "")
    return f"`{head}` plus uncommitted changes in {shown}"


# --------------------------------------------------------------------------- F1. import

_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")


def importtime(stderr: str) -> dict[str, tuple[int, int]]:
    """module -> (self µs, cumulative µs) from ``-X importtime`` output."""
    out: dict[str, tuple[int, int]] = {}
    for line in stderr.splitlines():
        match = _IMPORTTIME.match(line)
        if match:
            out.setdefault(match.group(4), (int(match.group(1)), int(match.group(2))))
    return out


def by_package(modules: dict[str, tuple[int, int]]) -> dict[str, float]:
    """Self import time summed per top-level package, in ms."""
    totals: dict[str, float] = {}
    for name, (own, _) in modules.items():
        root = name.split(".")[0]
        totals[root] = totals.get(root, 0.0) + own / 1000
    return totals


@dataclass
class ImportStats:
    """Samples of one import contender: ``python -c "{setup}import {module}"`` in ``tree``."""

    name: str
    module: str
    tree: Path
    setup: str = ""
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)
    cumulative_ms: list[float] = field(default_factory=list)
    dagster_ms: list[float] = field(default_factory=list)
    packages: list[dict[str, float]] = field(default_factory=list)

    @property
    def code(self) -> str:
        """The ``-c`` program."""
        return f"{self.setup}import {self.module}"


def run_imports(repetitions: int, work: Path) -> list[ImportStats]:
    """F1: fresh-process imports, wall samples and ``-X importtime`` samples alternately."""
    definitions = "idem_assets.definitions"
    contenders = [
        ImportStats(FLOOR, "dagster", ROOT),
        ImportStats(NOW, definitions, ROOT),
        ImportStats(OLD, definitions, old_tree()),
        ImportStats(NO_GC, definitions, ROOT, setup="import gc; gc.disable(); "),
    ]
    log = work / "import.log"
    for tree in {c.tree for c in contenders}:
        compile_tree(tree)

    def once(c: ImportStats) -> Sample:
        env = {**base_env(), "PYTHONPATH": str(c.tree)}
        done = timed([sys.executable, "-c", c.code], env, c.tree, log)
        if done.code != 0:
            raise RuntimeError(f"{c.name} failed: {log.read_text()[-2000:]}")
        return done

    for c in contenders:  # warm-up: site-packages' bytecode cached, files in the page cache
        once(c)
    for _ in range(repetitions):
        for c in contenders:
            done = once(c)
            c.wall.append(done.seconds)
            c.cpu.append(done.cpu)
            c.peak_mb.append(done.peak_mb)
        for c in contenders:
            env = {**base_env(), "PYTHONPATH": str(c.tree)}
            traced = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", c.code],
                env=env,
                cwd=c.tree,
                capture_output=True,
                text=True,
                check=True,
            )
            modules = importtime(traced.stderr)
            c.cumulative_ms.append(modules[c.module][1] / 1000)
            c.dagster_ms.append(modules["dagster"][1] / 1000)
            c.packages.append(by_package(modules))
    return contenders


def import_section(stats: list[ImportStats], repetitions: int) -> tuple[str, dict[str, Any]]:
    """F1's markdown and numbers."""
    med = statistics.median
    rows = []
    for s in stats:
        note = "" if s.name == FLOOR else f" ({s.name.split(', ', 1)[1]})"
        rows.append(
            [
                f'`python -c "{s.code}"`{note}',
                med(s.wall),
                f"{min(s.wall):.3f}–{max(s.wall):.3f}",
                med(s.cpu),
                med(s.cumulative_ms) / 1000,
                med(s.dagster_ms) / 1000,
                med(s.peak_mb),
            ]
        )
    by_name = {s.name: s for s in stats}
    floor, now, old, no_gc = by_name[FLOOR], by_name[NOW], by_name[OLD], by_name[NO_GC]
    packages = sorted(
        {p for s in stats for sample_ in s.packages for p in sample_},
        key=lambda p: -med([d.get(p, 0.0) for d in now.packages]),
    )

    def share(s: ImportStats, package: str) -> float:
        return med([d.get(package, 0.0) for d in s.packages])

    top = [p for p in packages if max(share(now, p), share(old, p)) >= 15][:10]
    md = [
        "### F1. Importing the code location in a fresh process",
        "",
        f"Samples per contender: {repetitions} of wall time and {repetitions} of "
        "`-X importtime`, alternating; each tree's bytecode compiled and one untimed import "
        "before the first sample. The last row is a diagnostic, not a contender: the same "
        "import with the garbage collector off. CPU (user + system) moves less than wall "
        "when other work takes the cores.",
        "",
        table(
            [
                "command",
                "median wall s",
                "min–max s",
                "CPU s",
                "-X importtime cumulative s",
                "of which dagster s",
                "peak RSS MiB",
            ],
            rows,
        ),
        "",
        f"- above `import dagster` (the target: ≤ {ABOVE_DAGSTER:g} s, wall medians of this "
        "run; by importtime the code location's cumulative minus dagster's cumulative in the "
        f"same import): now {med(now.wall) - med(floor.wall):.2f} s wall "
        f"({(med(now.cumulative_ms) - med(now.dagster_ms)) / 1000:.2f} s by importtime), "
        f"before lazy imports {med(old.wall) - med(floor.wall):.2f} s "
        f"({(med(old.cumulative_ms) - med(old.dagster_ms)) / 1000:.2f} s).",
        f"- garbage collection during the import: {med(now.wall) - med(no_gc.wall):.2f} s of "
        "the wall time (now minus the same import with gc off).",
        "- `-X importtime` times the imports alone (no interpreter start-up or exit) and adds "
        "its own overhead: compare it across rows, not with the wall column.",
        "",
        "Self import time by top-level package (ms, median; packages ≥ 15 ms in either tree). "
        "A collection that runs during an import is billed to whichever module is importing "
        "then, so the split is approximate:",
        "",
        table(
            ["package", "now ms", f"{OLD_REF} ms"],
            [[p, round(share(now, p)), round(share(old, p))] for p in top],
        ),
        "",
    ]
    numbers: dict[str, Any] = {
        s.name: {
            "wall": med(s.wall),
            "importtime": med(s.cumulative_ms) / 1000,
            "dagster_importtime": med(s.dagster_ms) / 1000,
        }
        for s in stats
    }
    numbers[NOW]["packages"] = {p: share(now, p) for p in top}
    return "\n".join(md), numbers


# --------------------------------------------------------------------------- F2/F3. runs


@dataclass(frozen=True)
class Launch:
    """A CLI command of a case, run from ``cwd``: the root of the dg project it launches."""

    name: str
    argv: tuple[str, ...]
    cwd: Path = ROOT


def trivial_project(work: Path) -> Path:
    """The trivial run's dg project, generated under ``work``: pyproject.toml and its module."""
    project = work / "trivial-project"
    package = project / TRIVIAL_MODULE
    package.mkdir(parents=True)
    (project / "pyproject.toml").write_text(TRIVIAL_PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "definitions.py").write_text(TRIVIAL_DEFINITIONS)
    return project


@dataclass
class RunStats:
    """Samples of one launch contender: first runs and reruns."""

    name: str
    first: list[Sample] = field(default_factory=list)
    rerun: list[Sample] = field(default_factory=list)
    commits: list[tuple[int, int]] = field(default_factory=list)
    checks: list[tuple[int, int]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def home_template(work: Path) -> Path:
    """A DAGSTER_HOME with the project's dagster.yaml and its SQLite storage created."""
    home = work / "home-template"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "sqlite" / "dagster.yaml", home / "dagster.yaml")
    env = {**base_env(), "DAGSTER_HOME": str(home)}
    code = (
        "import dagster as dg\ni = dg.DagsterInstance.get()\ni.get_runs(limit=1)\n"
        "i.event_log_storage\ni.schedule_storage\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    return home


def fresh_project(root: Path, template: Path, code: Path = ROOT) -> dict[str, str]:
    """Landing data, an empty lake and state, a prepared home; the run's environment.

    ``code`` is the root of the dg project launched (on PYTHONPATH, as the repository's root
    is for orders' runs).
    """
    from idem_assets.sample.generator import generate

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    generate(root / "landing", START, DAYS, seed=7)
    shutil.copytree(template, root / "home")
    return {
        **base_env(),
        "DAGSTER_HOME": str(root / "home"),
        "NO_COLOR": "1",
        "IDEM_LANDING_DIR": str(root / "landing"),
        "IDEM_LAKE_DIR": str(root / "lake"),
        "IDEM_STATE_URL": f"sqlite:///{root / 'state.db'}",
        "VIRTUAL_ENV": str(BIN.parent),
        "PYTHONPATH": str(code),
    }


def delta_commits(lake: Path) -> int:
    """Delta commits in every table of the lake."""
    return sum(1 for _ in lake.glob("*/_delta_log/*.json"))


def check_counts(log: Path) -> tuple[int, int]:
    """(checks evaluated, of which failed) in a run's console output."""
    lines = [
        line
        for line in log.read_text(errors="replace").splitlines()
        if "ASSET_CHECK_EVALUATION" in line
    ]
    return len(lines), sum(1 for line in lines if "' failed" in line)


def run_launches(
    launches: Sequence[Launch], repetitions: int, work: Path, template: Path
) -> list[RunStats]:
    """Each launch from a fresh project, then again unchanged; contenders alternate."""
    stats = [RunStats(launch.name) for launch in launches]
    for _ in range(repetitions):
        for launch, stat in zip(launches, stats, strict=True):
            root = work / "project"
            env = fresh_project(root, template, launch.cwd)
            first = timed(launch.argv, env, launch.cwd, root / "first.log")
            after_first = delta_commits(root / "lake")
            rerun = timed(launch.argv, env, launch.cwd, root / "rerun.log")
            for done, log in ((first, "first.log"), (rerun, "rerun.log")):
                if done.code != 0:
                    tail = (root / log).read_text(errors="replace")[-1500:]
                    stat.failures.append(f"{log.split('.')[0]} exited {done.code}: …{tail}")
            if first.code == 0:
                stat.first.append(first)
            if rerun.code == 0:
                stat.rerun.append(rerun)
            stat.commits.append((after_first, delta_commits(root / "lake") - after_first))
            stat.checks.append(check_counts(root / "first.log"))
            shutil.rmtree(root, ignore_errors=True)
    return stats


def api_prepare(root: str, template: str) -> dict[str, Any]:
    """A child that has imported the code location; the project fresh."""
    sys.pycache_prefix, sys.dont_write_bytecode = str(PYCACHE), False
    env = fresh_project(Path(root), Path(template))
    os.environ.update({k: v for k, v in env.items() if k.startswith(("IDEM_", "DAGSTER_"))})
    import dagster as dg

    from idem_assets.definitions import defs

    job = defs.resolve_implicit_global_asset_job_def()
    return {
        "job": job,
        "instance": dg.DagsterInstance.from_config(env["DAGSTER_HOME"]),
        "root": root,
    }


def api_run(state: dict[str, Any]) -> dict[str, Any]:
    """One partition of orders and its checks, then the unchanged rerun, timed apart."""
    import dagster as dg

    out: dict[str, Any] = {}
    for label in ("first", "rerun"):
        started = time.perf_counter()
        result = state["job"].execute_in_process(
            partition_key=KEYS[0],
            instance=state["instance"],
            asset_selection=[dg.AssetKey("orders")],
            raise_on_error=False,
        )
        out[label] = time.perf_counter() - started
        out[f"{label}_ok"] = result.success
        if label == "first":
            out["checks"] = len(result.get_asset_check_evaluations())
    shutil.rmtree(state["root"], ignore_errors=True)
    return out


def run_api(repetitions: int, work: Path, template: Path) -> RunStats:
    """F2 through the Python API, each sample in a fresh spawned process."""
    stat = RunStats(API)
    contender = Contender(API, api_prepare, api_run, (str(work / "api"), str(template)))
    for _ in range(repetitions):
        seconds, peak, extra = sample(contender, timeout=TIMEOUT)
        for label in ("first", "rerun"):
            if extra.get(f"{label}_ok"):
                getattr(stat, label).append(Sample(extra[label], float("nan"), peak, 0))
            else:
                stat.failures.append(f"{label} did not succeed")
        stat.checks.append((extra.get("checks", 0), 0))
    return stat


def _median(samples: list[Sample], attr: str) -> float | None:
    values = [getattr(s, attr) for s in samples]
    return statistics.median(values) if values else None


def run_rows(stats: Sequence[RunStats], baseline: str) -> list[list[Any]]:
    """Table rows: contender × (first run, rerun)."""
    base = {
        label: _median(getattr(s, label), "seconds")
        for s in stats
        if s.name == baseline
        for label in ("first", "rerun")
    }
    rows = []
    for s in stats:
        commits = sorted({c for c, _ in s.commits}), sorted({r for _, r in s.commits})
        checks = sorted({c for c, _ in s.checks}), sorted({f for _, f in s.checks})
        for label, title in (("first", "first run"), ("rerun", "unchanged rerun")):
            samples = getattr(s, label)
            median = _median(samples, "seconds")
            if median is None:
                rows.append([s.name, title, "failed", "", "", "", "", "", ""])
                continue
            cpu = _median(samples, "cpu")
            ratio = f"{median / base[label]:.2f}×" if base.get(label) else "—"
            made = (
                "—"
                if s.name in (API, TRIVIAL)
                else ",".join(map(str, commits[0]))
                if label == "first"
                else "+" + ",".join(map(str, commits[1]))
            )
            evaluated = (
                (",".join(map(str, checks[0])) + " (" + ",".join(map(str, checks[1])) + " failed)")
                if label == "first"
                else ""
            )
            rows.append(
                [
                    s.name,
                    title,
                    median,
                    f"{min(x.seconds for x in samples):.3f}–{max(x.seconds for x in samples):.3f}",
                    ratio,
                    "—" if cpu != cpu else cpu,
                    _median(samples, "peak_mb"),
                    made,
                    evaluated,
                ]
            )
    return rows


RUN_HEADERS = [
    "command",
    "run",
    "median s",
    "min–max s",
    "× in-process",
    "CPU s",
    "peak RSS MiB",
    "Delta commits",
    "checks evaluated",
]


def _failures(stats: Sequence[RunStats]) -> list[str]:
    lines = []
    for s in stats:
        for failure in s.failures[:2]:
            lines += [
                f"- **{s.name}**: {len(s.failures)} failed command(s); the first:",
                "",
                "```",
                failure.strip(),
                "```",
                "",
            ]
            break
    return lines


def medians(stats: Sequence[RunStats], attr: str = "seconds") -> dict[str, dict[str, float]]:
    """run -> contender -> median wall seconds (``attr`` "cpu": CPU seconds)."""
    out: dict[str, dict[str, float]] = {"first": {}, "rerun": {}}
    for s in stats:
        for label in out:
            value = _median(getattr(s, label), attr)
            if value is not None:
                out[label][s.name] = value
    return out


# --------------------------------------------------------------------------- the family


def run_family(repetitions: int, short_repetitions: int) -> tuple[str, dict[str, Any]]:
    """F1–F3: the markdown section (without its ## heading) and the numbers for targets."""
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-fast-runs-"))
    try:
        import_stats = run_imports(short_repetitions, work)
        template = home_template(work)
        dg_cli, dagster_cli = str(BIN / "dg"), str(BIN / "dagster")
        one = ("--assets", "orders", "--partition", KEYS[0])
        span = ("--assets", ",".join(RANGE_ASSETS), "--partition-range", f"{KEYS[0]}...{KEYS[-1]}")
        trivial = Launch(
            TRIVIAL,
            (dg_cli, "launch", "--assets", TRIVIAL_ASSET, "--partition", KEYS[0]),
            trivial_project(work),
        )
        # Untimed: what the runs import beyond the code location gets its bytecode cached.
        run_launches(
            [
                Launch("warm-up", (dg_cli, "launch", *span, "--config-json", MULTIPROCESS)),
                Launch(f"warm-up, {TRIVIAL}", trivial.argv, trivial.cwd),
            ],
            1,
            work,
            template,
        )
        one_stats = run_launches(
            [
                Launch(IN_PROCESS, (dg_cli, "launch", *one)),
                trivial,
                Launch(MULTI, (dg_cli, "launch", *one, "--config-json", MULTIPROCESS)),
                Launch(
                    NO_DG,
                    (
                        dagster_cli,
                        "asset",
                        "materialize",
                        "--select",
                        "orders",
                        "--partition",
                        KEYS[0],
                        "-m",
                        "idem_assets.definitions",
                    ),
                ),
            ],
            repetitions,
            work,
            template,
        )
        one_stats.append(run_api(repetitions, work, template))
        range_stats = run_launches(
            [
                Launch(IN_PROCESS, (dg_cli, "launch", *span)),
                Launch(MULTI, (dg_cli, "launch", *span, "--config-json", MULTIPROCESS)),
            ],
            repetitions,
            work,
            template,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    import_md, import_numbers = import_section(import_stats, short_repetitions)
    one_numbers, range_numbers = medians(one_stats), medians(range_stats)
    now_import = import_numbers[NOW]["wall"]
    cli, api = one_numbers["first"].get(IN_PROCESS), one_numbers["first"].get(API)
    split = ""
    if cli and api:
        split = (
            f"- where the in-process first run's {cli:.2f} s go (differences of medians, "
            f"as noisy as they are): importing the code "
            f"location {now_import:.2f} s (F1), the run itself {api:.2f} s (Python API), "
            f"the rest {cli - now_import - api:.2f} s is the CLI's own start (dg's and "
            "Dagster's imports, the instance, loading the workspace) and process exit."
        )
    floor_lines = []
    one_cpu = medians(one_stats, "cpu")
    for label, title in (("first", "first run"), ("rerun", "unchanged rerun")):
        ours, base = one_numbers[label].get(IN_PROCESS), one_numbers[label].get(TRIVIAL)
        cpu_ours, cpu_base = one_cpu[label].get(IN_PROCESS), one_cpu[label].get(TRIVIAL)
        if ours and base and cpu_ours and cpu_base:
            floor_lines.append(
                f"{title} {ours / base:.2f}× ({ours:.2f} s vs {base:.2f} s; by CPU "
                f"{cpu_ours / cpu_base:.2f}×)"
            )
    against = ""
    if floor_lines:
        above = now_import - import_numbers[FLOOR]["wall"]
        against = (
            "- orders in-process against the trivial run through the same CLI (target: "
            f"≤ {TRIVIAL_RATIO:g}× by wall medians): {', '.join(floor_lines)}. Both pay dg's "
            "start, Dagster's import, the instance from DAGSTER_HOME, a run's bookkeeping and "
            "process exit; what orders adds is its code location's import beyond dagster "
            f"({above:.2f} s wall, F1) and its asset with its checks. CPU (user + system) is "
            "less moved by other work on the cores than wall time."
        )
    md = [
        f"Tree measured: {tree_state()}. Load average (1 min) {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after, on 2 cores shared with other work: expect ±10–20% "
        "between runs of this family; the medians are what to compare. Every child caches "
        "its bytecode under benchmarks/.data/pycache (`PYTHONPYCACHEPREFIX`), compiled "
        "before the first sample for both trees, as an installed project has it.",
        "",
        import_md,
        f"### F2. One partition of orders ({KEYS[0]}) with its checks, from the CLI",
        "",
        f"`dg launch --assets orders --partition {KEYS[0]}` from the repository's root (its "
        "`pyproject.toml` `[tool.dg]` names the code location `idem_assets.definitions`, "
        "whose default executor is in-process); the old way adds "
        f"`--config-json '{MULTIPROCESS}'`. The target compares it with what any code "
        "location pays for a run through the same CLI on the same machine in the same run: a "
        "trivial project generated into the benchmark's work directory (a `pyproject.toml` "
        f"with `[tool.dg]` naming `{TRIVIAL_MODULE}.definitions`, below), launched as "
        f"`dg launch --assets {TRIVIAL_ASSET} --partition {KEYS[0]}` from that project's root "
        "with the same DAGSTER_HOME template and environment, first run and rerun, "
        "alternating with the other contenders. Its asset returns a constant through "
        "Dagster's default IO manager (a pickle under DAGSTER_HOME/storage), in process:",
        "",
        "```python",
        TRIVIAL_DEFINITIONS.rstrip("\n"),
        "```",
        "",
        f"Samples per contender: {repetitions}.",
        "",
        table(RUN_HEADERS, run_rows(one_stats, IN_PROCESS)),
        "",
        *([against, ""] if against else []),
        *([split, ""] if split else []),
        f"### F3. Three days ({KEYS[0]}…{KEYS[-1]}) of {', '.join(RANGE_ASSETS)} with every "
        "check, from the CLI",
        "",
        f"`dg launch --assets {','.join(RANGE_ASSETS)} --partition-range "
        f"{KEYS[0]}...{KEYS[-1]}` (one run for the range); the old way adds the same "
        f"`--config-json`. Samples per contender: {repetitions}.",
        "",
        table(RUN_HEADERS, run_rows(range_stats, IN_PROCESS)),
        "",
        *_failures([*one_stats, *range_stats]),
    ]
    numbers = {
        "import": import_numbers,
        "one": one_numbers,
        "one_cpu": one_cpu,
        "range": range_numbers,
    }
    return "\n".join(md), numbers


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/fast_runs.png: now, the old way, the floor (F1, F2)."""
    imports = numbers["import"]
    groups = {
        "import (F1)": {
            "now": imports[NOW]["wall"],
            "old way": imports[OLD]["wall"],
            "floor: import dagster": imports[FLOOR]["wall"],
        }
    }
    for case, title in (("one", "1 partition (F2)"), ("range", "3-day range (F3)")):
        for label, run in (("first", "first run"), ("rerun", "rerun")):
            values = numbers[case][label]
            groups[f"{title}, {run}"] = {
                name: values[key]
                for name, key in (
                    ("now", IN_PROCESS),
                    ("old way", MULTI),
                    ("floor: trivial dg launch", TRIVIAL),
                )
                if key in values
            }
    return groups
