"""The README's quick figures, each measured as a reader runs it, with the load beside it.

``python -m benchmarks.cases.readme_figures [--only NAME ...] [--family NAME ...] [--busy N]
[--reps N]``

Every measurement runs in a fresh copy of the project (its Makefile, README, pyproject.toml,
workspace.yaml, deploy/ and requirements/ copied; the package and this virtualenv linked),
from the copy's root, in a new terminal's environment (no ``IDEM_*``, ``DAGSTER_*`` or
virtualenv inherited). ``make`` never reinstalls there (``-o .venv/.installed``).

- ``demo``: ``make demo`` in the fresh copy, as a reader's first one after installing: it
  lays out the sample and TPC-H landing data, then runs every asset twice.
- ``launch_one``: ``dg launch --assets orders --partition LAST`` (the README's "From the
  command line"), after ``make sample-data dagster-home`` (untimed, as ``make run``
  prepares it); the first run, then the same command again (the unchanged rerun).
- ``launch_range``: ``dg launch --assets orders,customers,events,daily_sales
  --partition-range A...C``, the last three sample days, prepared the same way; first run
  and rerun.
- ``history_year``: the README's "Years of history" block, run as written in one shell;
  its ``python -m idem_assets.sample`` and ``dg launch`` lines are timed one by one.
- ``history``: the same block with the whole 6.5 years (the ``HISTORY_DAYS=…
  HISTORY_LAST=…`` the block's comment names); minutes, so run only when asked for.

Printed: a table of wall seconds, CPU seconds (user + system of the command and the
processes it waited for), the exit code, and ``os.getloadavg()`` (1, 5, 15 min) when each
command started and ended. ``--busy N`` keeps N processes spinning on the cores for the
whole measurement: the busy end of the range, reproducibly. Exit 1 if a command failed.

``--family NAME`` runs a benchmark family the docs quote (``instance``, ``dropin``,
``landing``, ``checkpoint``) with the sizes ``python -m benchmarks.run --only NAME`` uses,
and prints its section with the load at start and end, without touching
benchmarks/RESULTS.md: with ``--busy``, the busy end of the figures RESULTS.md holds.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases.fast_runs import ROOT, timed

README = ROOT / "README.md"
HISTORY_HEADING = "### Years of history"
# The block's default size, and the whole history its comment names.
_HISTORY_SIZE = re.compile(r"HISTORY_DAYS=\d+ HISTORY_LAST=\d{4}-\d\d-\d\d")
# The block's lines that are timed; the others set the shell up.
_TIMED = ("python -m idem_assets.sample", "dg launch")
COPIED = ("Makefile", "README.md", "pyproject.toml", "workspace.yaml")
MAKE = ("make", "--no-print-directory", "-o", ".venv/.installed")
RANGE_ASSETS = "orders,customers,events,daily_sales"
RANGE_DAYS = 3
TIME = shutil.which("time", path="/usr/bin:/bin") or "/usr/bin/time"
QUICK = ("demo", "launch_one", "launch_range", "history_year")
# With --busy, seconds before the first measurement: the 1-minute load average then shows
# about two thirds of the spinning processes.
SETTLE = 60.0


Load = tuple[float, float, float]


@dataclass(frozen=True)
class Measurement:
    """One command as a reader runs it: wall and CPU seconds, exit code, load around it."""

    figure: str
    command: str
    run: str
    seconds: float
    cpu: float
    code: int
    load_start: Load
    load_end: Load


# --------------------------------------------------------------------------- the copy


def project_copy(root: Path) -> Path:
    """The project's files beside links to this checkout's package and virtualenv."""
    project = root / "project"
    project.mkdir(parents=True)
    for name in COPIED:
        shutil.copy2(ROOT / name, project / name)
    for folder in ("deploy", "requirements"):
        shutil.copytree(ROOT / folder, project / folder)
    for name in ("idem_assets", ".venv"):
        (project / name).symlink_to(ROOT / name)
    return project


def terminal_env(project: Path, activated: bool) -> dict[str, str]:
    """A new terminal's environment; ``activated``: after ``source .venv/bin/activate`` and
    ``export DAGSTER_HOME=$PWD/.dagster_home``, as the README's blocks begin."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("IDEM_", "DAGSTER_", "VIRTUAL_ENV", "PYTHON"))
    }
    venv_bin = str(project / ".venv" / "bin")
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != str(ROOT / ".venv/bin")]
    env["PATH"] = os.pathsep.join([venv_bin, *path] if activated else path)
    if activated:
        env["VIRTUAL_ENV"] = str(project / ".venv")
        env["DAGSTER_HOME"] = str(project / ".dagster_home")
    return env


def prepare(project: Path) -> list[str]:
    """``make sample-data dagster-home`` (untimed) as ``make run`` prepares; the sample days."""
    env = terminal_env(project, activated=False)
    subprocess.run(
        [*MAKE, "sample-data", "dagster-home"],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
    )
    listed = subprocess.run(
        [str(project / ".venv" / "bin" / "idem-landing"), "days"],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    first, last = (dt.date.fromisoformat(day) for day in listed.split("..."))
    return [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def measure(
    figure: str,
    run: str,
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    log: Path,
    shown: str,
) -> Measurement:
    """``argv`` to completion from ``cwd``, output into ``log``, the load read around it;
    ``shown``: the command as the reader types it."""
    load_start = os.getloadavg()
    done = timed(argv, env, cwd, log)
    return Measurement(
        figure,
        shown,
        run,
        done.seconds,
        done.cpu,
        done.code,
        load_start,
        os.getloadavg(),
    )


# --------------------------------------------------------------------------- the figures


def demo(work: Path) -> list[Measurement]:
    """``make demo`` in a fresh copy: sample data laid out, every asset twice."""
    project = project_copy(work)
    env = terminal_env(project, activated=False)
    log = work / "demo.log"
    return [measure("demo", "fresh copy", [*MAKE, "demo"], project, env, log, "make demo")]


def _launches(figure: str, work: Path, args: Callable[[list[str]], list[str]]) -> list[Measurement]:
    """``dg launch`` with ``args(sample days)`` in a prepared copy: first run, then rerun."""
    project = project_copy(work)
    launch = ["launch", *args(prepare(project))]
    argv = [str(project / ".venv" / "bin" / "dg"), *launch]
    env = terminal_env(project, activated=True)
    shown = shlex.join(["dg", *launch])
    return [
        measure(figure, run, argv, project, env, work / f"{figure}-{index}.log", shown)
        for index, run in enumerate(("first run", "unchanged rerun"))
    ]


def launch_one(work: Path) -> list[Measurement]:
    """One partition of orders with its checks, the last sample day, twice."""
    return _launches(
        "launch_one", work, lambda days: ["--assets", "orders", "--partition", days[-1]]
    )


def launch_range(work: Path) -> list[Measurement]:
    """The last three sample days of the four daily assets as one run, twice."""
    return _launches(
        "launch_range",
        work,
        lambda days: [
            "--assets",
            RANGE_ASSETS,
            "--partition-range",
            f"{days[-RANGE_DAYS]}...{days[-1]}",
        ],
    )


def readme_block(heading: str, readme: Path = README) -> list[str]:
    """The lines of the first bash block under ``heading`` in the README."""
    section = readme.read_text().split(f"\n{heading}\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0].splitlines()


def history_block(readme: Path, whole: bool) -> list[str]:
    """The README's "Years of history" block; ``whole``: with the size its comment names."""
    text = "\n".join(readme_block(HISTORY_HEADING, readme))
    if whole:
        default, named = _HISTORY_SIZE.findall(text)[:2]
        text = text.replace(default, named, 1)
    return text.splitlines()


def history_script(lines: Sequence[str], times: Path, log: Path) -> str:
    """The block as one bash script: ``make`` never reinstalls; each timed line appends
    its index, start, end, exit code, load before and after, and CPU to ``times``."""
    out = [
        "set -eo pipefail",
        f"exec >>{shlex.quote(str(log))} 2>&1",
        "__measure() {",
        "  local index=$1 load0 start code=0; shift; load0=$(cut -d' ' -f1-3 /proc/loadavg)",
        f"  start=$EPOCHREALTIME; {TIME} -o {shlex.quote(str(times))}.cpu -f '%U %S' \"$@\" "
        "|| code=$?",
        "  echo \"$index $start $EPOCHREALTIME $code $load0 $(cut -d' ' -f1-3 /proc/loadavg)"
        f' $(tail -1 {shlex.quote(str(times))}.cpu)" >> {shlex.quote(str(times))}',
        "  return $code",
        "}",
    ]
    for index, line in enumerate(lines):
        if line.startswith("make "):
            line = "make -o .venv/.installed " + line.removeprefix("make ")
        out.append(f"__measure {index} {line}" if line.startswith(_TIMED) else line)
    return "\n".join(out) + "\n"


def _history(figure: str, work: Path, whole: bool) -> list[Measurement]:
    project = project_copy(work)
    lines = history_block(project / "README.md", whole)
    times, log = work / f"{figure}.times", work / f"{figure}.log"
    script = history_script(lines, times, log)
    env = terminal_env(project, activated=False)
    subprocess.run(["bash", "-c", script], cwd=project, env=env, check=False)
    found = []
    for row in times.read_text().splitlines() if times.exists() else []:
        index, start, end, code, *rest = row.split()
        loads, cpu = [float(v) for v in rest[:6]], sum(float(v) for v in rest[6:8])
        command, _, comment = lines[int(index)].partition("#")
        found.append(
            Measurement(
                figure,
                command.strip(),
                comment.strip(),
                float(end) - float(start),
                cpu,
                int(code),
                (loads[0], loads[1], loads[2]),
                (loads[3], loads[4], loads[5]),
            )
        )
    if len(found) < sum(1 for line in lines if line.startswith(_TIMED)):
        stopped = (0.0, 0.0, 0.0)
        found.append(Measurement(figure, f"(stopped: {log})", "", 0.0, 0.0, 1, stopped, stopped))
    return found


def history_year(work: Path) -> list[Measurement]:
    """The README's "Years of history" block as written (its default: one year)."""
    return _history("history_year", work, whole=False)


def history(work: Path) -> list[Measurement]:
    """The same block over the whole 6.5 years its comment names."""
    return _history("history", work, whole=True)


def _instance() -> str:
    from benchmarks.cases import instance_cost

    return instance_cost.run_family(quick=False)[0]


def _dropin() -> str:
    from benchmarks.cases import dropin

    return dropin.run_family(1.0, 7)[0]


def _landing() -> str:
    from benchmarks.cases import landing_store

    return landing_store.run_family(100, 1_000_000, 3, 2)[0]


def _checkpoint() -> str:
    from benchmarks import checkpoint_bench

    with tempfile.TemporaryDirectory(prefix="readme-figures-checkpoint-") as out:
        with contextlib.redirect_stdout(io.StringIO()):  # its progress and the same table
            checkpoint_bench.main(["--quick", "--out", out])
        return (Path(out) / "checkpoint.md").read_text()


# Benchmark families the docs quote, as `python -m benchmarks.run --only NAME` measures them
# (the same sizes and samples; checkpoint: --quick), printed here instead of merged into
# benchmarks/RESULTS.md: their busy end with --busy.
FAMILIES: dict[str, Callable[[], str]] = {
    "instance": _instance,
    "dropin": _dropin,
    "landing": _landing,
    "checkpoint": _checkpoint,
}

FIGURES: dict[str, Callable[[Path], list[Measurement]]] = {
    "demo": demo,
    "launch_one": launch_one,
    "launch_range": launch_range,
    "history_year": history_year,
    "history": history,
}


# --------------------------------------------------------------------------- the table


@contextlib.contextmanager
def busy(processes: int, settle: float = SETTLE) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``processes`` children spinning on the cores meanwhile, stopped after; with any, the
    first measurement waits ``settle`` seconds for the 1-minute load average to show them."""
    spinning = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        if spinning:
            time.sleep(settle)
        yield spinning
    finally:
        for child in spinning:
            child.kill()
            child.wait()


def _load(load: Load) -> str:
    return " / ".join(f"{value:.2f}" for value in load)


def render(measurements: Sequence[Measurement], busy_processes: int) -> str:
    """The markdown table, with what the machine was doing."""
    lines = [
        f"{os.cpu_count()} cores; {busy_processes} spinning processes beside the commands "
        "(`--busy`); load average (1 / 5 / 15 min) from os.getloadavg().",
        "",
        "| figure | command | run | wall s | CPU s | exit | load at start | load at end |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for m in measurements:
        lines.append(
            f"| {m.figure} | `{m.command}` | {m.run} | {m.seconds:.1f} | {m.cpu:.1f} | {m.code} "
            f"| {_load(m.load_start)} | {_load(m.load_end)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the figures asked for (the quick ones by default) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(FIGURES),
        help=f"a figure to measure (repeatable; default: {', '.join(QUICK)})",
    )
    parser.add_argument(
        "--family",
        action="append",
        choices=sorted(FAMILIES),
        help="a benchmark family to run and print (repeatable), not merged into RESULTS.md",
    )
    parser.add_argument("--busy", type=int, default=0, help="processes spinning meanwhile")
    parser.add_argument("--reps", type=int, default=1, help="samples of each figure")
    args = parser.parse_args(argv)
    measurements: list[Measurement] = []
    with busy(args.busy):
        for family in args.family or ():
            load_start = os.getloadavg()
            section = FAMILIES[family]()
            print(
                f"## {family}: {args.busy} spinning processes beside it; load average at start "
                f"{_load(load_start)}, at end {_load(os.getloadavg())}\n\n{section}",
                flush=True,
            )
        for _ in range(args.reps):
            for name in args.only or ([] if args.family else QUICK):
                with tempfile.TemporaryDirectory(prefix=f"readme-figures-{name}-") as work:
                    measurements += FIGURES[name](Path(work))
    if measurements:
        print(render(measurements, args.busy))
    return 0 if all(m.code == 0 for m in measurements) else 1


if __name__ == "__main__":
    sys.exit(main())
