"""``make bench``: every benchmark family side by side, into benchmarks/RESULTS.md + plots.

``python -m benchmarks.run [--quick] [--reps N] [--only FAMILY ...]``. Families: partition
overwrite and no-op rerun (TPC-H orders as one day), the drop-in for dagster-deltalake (the
same assets through its IO manager and ours), the drop-in for dagster-delta (its merge mode
through its IO manager and ours: a 1% upsert into 10M customers, its unchanged rerun, a first
write), MERGE (synthetic customers, 1M and 10M rows), changes with deletes (a 1% change set
of which a tenth deletes into 10M customers: ours, a hand-written delta-rs MERGE, dagster-delta's
WhenNotMatchedBySourceDelete, and SCD2 history), fingerprint (TPC-H lineitem), backfill
through Dagster, fast runs (the code location's import and ``dg launch`` runs, in-process and
multiprocess), the whole history (TPC-H orders, 1, 31 and 2,406 days as one ``dg launch``
range, its unchanged rerun and one corrected day, beside a plain delta-rs process and Dagster's
floors on two instances, with the events each run stored; one sample per size unless
``--reps``), the landing zone in object storage (sensor
ticks over a bucket of 10,000 objects, a 1M-row day read from a bucket and from a folder, on a
local moto server), and the checkpoint and Spark benchmarks (their own modules, collected here;
the Spark family adds ``benchmarks.cases.spark_engines``: one orders day on the local engine,
Spark local[2] and a standalone cluster, and a 2 GB CSV day on 1 GiB executors).

``--only`` runs some families and merges them into the existing RESULTS.md: their sections
and Targets rows are replaced, every other family's are kept as they were.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
PLOTS = HERE / "results"
# Each family's section of RESULTS.md starts with its heading, in report order.
HEADINGS = {
    "overwrite": "## Partition overwrite, no-op rerun, naive baseline",
    "dropin": "## Drop-in for dagster-deltalake",
    "dropin_delta": "## Drop-in for dagster-delta",
    "merge": "## MERGE",
    "changes": "## Changes with deletes, and history",
    "fingerprint": "## Fingerprint",
    "backfill": "## Backfill through Dagster",
    "fast_runs": "## Fast runs: importing the code location, runs from the CLI",
    "history": "## Whole history: years of days as one range",
    "ui_launch": "## The TPC-H example's 31 days launched from the UI",
    "instance": "## What Dagster stores: the cost of an event, by instance",
    "landing": "## Landing zone in object storage",
    "checkpoint": "## Checkpoint (from `benchmarks.checkpoint_bench`)",
    "spark": "## Spark (from `benchmarks.spark_bench`)",
}
TARGETS = "## Targets"


def machine() -> str:
    """One line about where the numbers come from."""
    import deltalake
    import polars

    cpus = os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{platform.machine()}, {cpus} cores, {mem:.0f} GiB RAM, Python "
        f"{platform.python_version()}, deltalake {deltalake.__version__}, polars "
        f"{polars.__version__}; {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
    )


def bars(path: Path, title: str, groups: dict[str, dict[str, float]], unit: str = "s") -> None:
    """A grouped bar chart: one group per scenario, one bar per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({name for values in groups.values() for name in values})
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(groups)), 4))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs = [g + i * width for g in range(len(groups))]
        ys = [values.get(name, 0.0) for values in groups.values()]
        ax.bar(xs, ys, width, label=name)
    ax.set_xticks([g + width * (len(names) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels(list(groups), fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _external(module: str, quick: bool) -> str:
    args = [sys.executable, "-m", module] + (["--quick"] if quick else [])
    proc = subprocess.run(args, cwd=HERE.parent, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"_{module} failed:_\n\n```\n{proc.stderr[-2000:]}\n```\n"
    return ""


def split_report(text: str) -> tuple[str, dict[str, str]]:
    """RESULTS.md as (what precedes the first section, heading -> that section's text).

    Sections start at a family's heading line or the Targets heading and run to the next;
    anything else (a family's own ``#`` or ``##`` lines) stays inside its section.
    """
    known = {*HEADINGS.values(), TARGETS}
    head: list[str] = []
    sections: dict[str, list[str]] = {}
    current = head
    for line in text.splitlines():
        if line.rstrip() in known:
            current = sections.setdefault(line.rstrip(), [])
        current.append(line)
    return "\n".join(head), {k: "\n".join(v).rstrip("\n") + "\n" for k, v in sections.items()}


def merge_report(
    old: str, blocks: dict[str, list[str]], numbers: dict[str, Any], ran: set[str]
) -> str:
    """The existing report with the families in ``ran`` replaced (sections and Targets rows)."""
    from benchmarks.targets import merged_summary

    head, sections = split_report(old)
    targets = merged_summary(sections.get(TARGETS, ""), numbers, ran)
    parts = [head.rstrip("\n") + "\n"] + ([targets] if targets else [])
    for family, heading in HEADINGS.items():
        if family in ran:
            parts.append("\n".join(blocks[family]).rstrip("\n") + "\n")
        elif heading in sections:
            parts.append(sections[heading])
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Run the families and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument(
        "--only",
        nargs="*",
        default=None,
        help=f"families: {' '.join(HEADINGS)}; the others' sections of RESULTS.md are kept",
    )
    parser.add_argument(
        "--reuse",
        nargs="*",
        default=[],
        help="collect these external families' last results instead of re-running them "
        "(checkpoint; spark: benchmarks.spark_bench's, S5 and S6 run)",
    )
    args = parser.parse_args(argv)
    reps = args.reps or (1 if args.quick else 3)
    wanted = set(args.only or HEADINGS)
    unknown = wanted - set(HEADINGS)
    if unknown:
        parser.error(f"unknown families: {' '.join(sorted(unknown))}")
    # Sub-second samples in fresh processes vary by ±10%: more of them for these ratios.
    short_reps = reps if args.quick else max(reps, 7)
    PLOTS.mkdir(exist_ok=True)
    sections: list[str] = [
        "# Benchmark results",
        "",
        f"Generated by `make bench`{' (--quick)' if args.quick else ''} on {machine()}. "
        f"Each contender ran {reps}× alternately ({max(reps, 7) if not args.quick else reps}× "
        "for the sub-second cases 1, 2, 2b and D and the imports of F1), each sample in a fresh "
        "process; times are "
        "medians with the min–max spread, memory is the sample process's peak RSS.",
        "",
    ]
    numbers: dict[str, Any] = {}
    # family -> its section's lines, the heading first
    blocks: dict[str, list[str]] = {f: [HEADINGS[f], ""] for f in HEADINGS if f in wanted}
    if "overwrite" in wanted:
        from benchmarks.cases import overwrite

        md, numbers["overwrite"] = overwrite.run(0.2 if args.quick else 1.0, short_reps)
        blocks["overwrite"] += [md]
        bars(
            PLOTS / "overwrite.png",
            "Partition overwrite of one day",
            {
                "first write": numbers["overwrite"]["first"],
                "rerun, same content": numbers["overwrite"]["rerun"],
            },
        )
        blocks["overwrite"].append("![overwrite](results/overwrite.png)\n")
        from benchmarks.cases import asset_rerun, stream_write

        md, numbers["stream_write"] = stream_write.run_case(0.2 if args.quick else 1.0, reps)
        blocks["overwrite"] += [md]

        md, numbers["asset_rerun"] = asset_rerun.run_case(0.2 if args.quick else 1.0, short_reps)
        blocks["overwrite"] += [md]
    if "dropin" in wanted:
        from benchmarks.cases import dropin

        md, numbers["dropin"] = dropin.run_family(0.2 if args.quick else 1.0, short_reps)
        blocks["dropin"] += [md]
        from benchmarks.cases import dropin_cost

        md, numbers["dropin"]["cost"] = dropin_cost.run_family(
            0.2 if args.quick else 1.0, short_reps
        )
        blocks["dropin"] += [md]
        bars(
            PLOTS / "dropin.png",
            "dagster-deltalake's IO manager and ours, constructed alike",
            dropin.plot_groups(numbers["dropin"]),
        )
        blocks["dropin"].append("![dropin](results/dropin.png)\n")
    if "dropin_delta" in wanted:
        from benchmarks.cases import dropin_delta

        md, numbers["dropin_delta"] = dropin_delta.run_family(
            1_000_000 if args.quick else 10_000_000, reps
        )
        blocks["dropin_delta"] += [md]
        bars(
            PLOTS / "dropin_delta.png",
            "dagster-delta's IO manager and ours in merge mode",
            dropin_delta.plot_groups(numbers["dropin_delta"]),
        )
        blocks["dropin_delta"].append("![dropin_delta](results/dropin_delta.png)\n")
    if "merge" in wanted:
        from benchmarks.cases import merge

        sizes = (100_000, 1_000_000) if args.quick else (1_000_000, 10_000_000)
        md, numbers["merge"] = merge.run(sizes, reps)
        blocks["merge"] += [md]
        groups: dict[str, dict[str, float]] = {}
        for key, value in numbers["merge"].items():
            shape, n, name = key.split("/", 2)
            groups.setdefault(f"{shape} {int(n):,}", {})[name] = value
        bars(PLOTS / "merge.png", "MERGE of 1% changed customers", groups)
        blocks["merge"].append("![merge](results/merge.png)\n")
    if "changes" in wanted:
        from benchmarks.cases import changes

        md, numbers["changes"] = changes.run_family(1_000_000 if args.quick else 10_000_000, reps)
        blocks["changes"] += [md]
        bars(
            PLOTS / "changes.png",
            "A change set with deletes: MERGE contenders and SCD2 history",
            changes.plot_groups(numbers["changes"]),
        )
        blocks["changes"].append("![changes](results/changes.png)\n")
    if "fingerprint" in wanted:
        from benchmarks.cases import fingerprint

        md, numbers["fingerprint"] = fingerprint.run(0.2 if args.quick else 1.0, reps)
        blocks["fingerprint"] += [md]
        bars(
            PLOTS / "fingerprint.png",
            "Fingerprint and rerun check",
            {
                "hash a table": numbers["fingerprint"]["hash"],
                "check vs write": numbers["fingerprint"]["check"],
            },
        )
        blocks["fingerprint"].append("![fingerprint](results/fingerprint.png)\n")
    if "backfill" in wanted:
        from benchmarks.cases import backfill

        md, numbers["backfill"] = backfill.run(30, 1.0 if args.quick else 10.0, reps)
        blocks["backfill"] += [md]
        bars(PLOTS / "backfill.png", "30-day backfill", {"30 days": numbers["backfill"]})
        blocks["backfill"].append("![backfill](results/backfill.png)\n")
    if "fast_runs" in wanted:
        from benchmarks.cases import fast_runs

        md, numbers["fast_runs"] = fast_runs.run_family(reps, short_reps)
        blocks["fast_runs"] += [md]
        bars(
            PLOTS / "fast_runs.png",
            "Import of the code location and dg launch runs",
            fast_runs.plot_groups(numbers["fast_runs"]),
        )
        blocks["fast_runs"].append("![fast_runs](results/fast_runs.png)\n")
    if "history" in wanted:
        from benchmarks.cases import history

        md, numbers["history"] = history.run_family(args.reps or 1, args.quick)
        blocks["history"] += [md]
        bars(
            PLOTS / "history.png",
            "Whole history as one dg launch range: CPU per day",
            history.plot_groups(numbers["history"]),
            unit="ms of CPU per day, end to end",
        )
        blocks["history"].append("![history](results/history.png)\n")
    if "ui_launch" in wanted:
        from benchmarks.cases import ui_launch

        md, numbers["ui_launch"] = ui_launch.run_family(args.reps or (1 if args.quick else 3))
        blocks["ui_launch"] += [md]
    if "instance" in wanted:
        from benchmarks.cases import instance_cost

        md, numbers["instance"] = instance_cost.run_family(args.quick)
        blocks["instance"] += [md]
    if "landing" in wanted:
        from benchmarks.cases import landing_store

        md, numbers["landing"] = landing_store.run_family(
            20 if args.quick else 100,
            100_000 if args.quick else 1_000_000,
            reps,
            1 if args.quick else 2,
        )
        blocks["landing"] += [md]
        bars(
            PLOTS / "landing.png",
            "Landing-sensor ticks over a bucket, and the naive hashing tick",
            landing_store.plot_groups(numbers["landing"]),
        )
        bars(
            PLOTS / "landing_read.png",
            "One orders day read from a folder and from a bucket",
            landing_store.read_groups(numbers["landing"]),
        )
        blocks["landing"] += [
            "![landing](results/landing.png)\n",
            "![landing_read](results/landing_read.png)\n",
        ]
    for family, module, result in (
        ("checkpoint", "benchmarks.checkpoint_bench", "checkpoint"),
        ("spark", "benchmarks.spark_bench", "spark"),
    ):
        if family not in wanted:
            continue
        failure = "" if family in args.reuse else _external(module, args.quick)
        body = failure or (PLOTS / f"{result}.md").read_text()
        blocks[family] += [body, "", f"![{result}](results/{result}.png)\n"]
    if "spark" in wanted:
        from benchmarks.cases import spark_engines

        md, numbers["spark"] = spark_engines.run_family(
            200_000 if args.quick else 5_000_000,
            spark_engines.QUICK_CSV if args.quick else spark_engines.FULL_CSV,
            args.reps or (1 if args.quick else spark_engines.FULL_REPS),
        )
        spark_engines.save(md, numbers["spark"])
        bars(
            PLOTS / "spark_engines.png",
            "One orders day read, typed and written: wall time",
            spark_engines.plot_groups(numbers["spark"]),
        )
        bars(
            PLOTS / "spark_engines_memory.png",
            "Peak memory: the driver's Python, one executor (JVM + Python workers)",
            spark_engines.memory_groups(numbers["spark"]),
            unit="MiB",
        )
        if "spark" in args.reuse:  # spark_bench's part is collected as it was; this part is new
            command = " ".join(sys.argv[1:] if argv is None else argv)
            blocks["spark"].append(
                f"_S5 and S6: `python -m benchmarks.run {command}` on {machine()}._\n"
            )
        blocks["spark"] += [
            md,
            "![spark_engines](results/spark_engines.png)\n",
            "![spark_engines_memory](results/spark_engines_memory.png)\n",
            "![spark_engines_timeline](results/spark_engines_timeline.png)\n",
        ]
    if wanted != set(HEADINGS) and RESULTS.exists():
        for family, block in blocks.items():
            if family in args.reuse:
                continue  # collected as it was: its own text says when it ran
            block[1:1] = [
                "",
                f"_This section alone: `python -m benchmarks.run --only {family}"
                f"{' --quick' if args.quick else ''}"
                f"{f' --reps {args.reps}' if args.reps else ''}` on {machine()}._",
            ]
        RESULTS.write_text(merge_report(RESULTS.read_text(), blocks, numbers, wanted))
        print(RESULTS.read_text())
        return 0
    from benchmarks.targets import summary

    sections.append(summary(numbers))  # after the title and the run's description
    for family in HEADINGS:
        if family in blocks:
            sections += blocks[family]
    RESULTS.write_text("\n".join(sections))
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
