"""The performance targets, checked against the numbers of one ``make bench`` run.

Each row names a target, what this run measured, whether it is met, and — when it is
not — the cause as measured while building (so a reader sees the gap and its reason in
the same report). Families that were not run are left out.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from benchmarks.harness import table

OURS = "ours (IO manager)"
RAW = "raw write_deltalake"
OFFICIAL = "dagster-deltalake"

# Why a target can fall short, from profiles of the code paths involved.
CAUSES = {
    "overwrite": "the content fingerprint (one row-hash pass: 30–45 ms of CPU for 1.5M rows) "
    "runs beside delta-rs's writer, which already keeps both cores busy; dedupe "
    "checks and the checkpoint record add ~15 ms",
    "official": "dagster-deltalake computes no fingerprint: it can prove neither a no-op "
    "rerun nor rerun equality; the fingerprint is the difference",
    "noop_io": "without an input signature the IO manager must hash the incoming frame to "
    "prove the slice unchanged (30–45 ms at 1.5M rows): the proof alone is 5–8% "
    "of a write",
    "noop_asset": "Dagster's own per-run work (run record, events, resource set-up) is about "
    "half of the rerun; our part is a stat per landing file, two checkpoint "
    "reads and two Delta log reads",
    "merge": "",
    "fingerprint": "",
    "check": "",
    "stream": "",
    "dropin_first": "the content fingerprint (51 ms alone in a fresh process at 1.5M rows) "
    "is hashed on a thread beside delta-rs's writer but still lengthens it by "
    "~44 ms (the writer releases the GIL; they share 2 cores and memory "
    "bandwidth), and the checkpoint record costs ~6 ms more per write than "
    "dagster-deltalake's bookkeeping: see the cost split under D",
    "dropin_rerun": "with no input signature the proof is a hash of the incoming frame "
    "(~45 ms of the 50–60 ms at 1.5M rows) plus checkpoint and Delta log reads; "
    "through dg.materialize Dagster's per-run floor (~20 ms) is added; at SF0.2 "
    "(--quick) the fixed costs weigh more against a smaller rewrite",
    "dropin_commit": "a rerun committed a new Delta version",
    "dd_upsert": "dagster-delta's MERGE reads every file of the table to find the batch's "
    "keys and ours only the files of the changed keys' [min, max] (both rewrite the same "
    "files), so ours' margin grows with the table: at {size} rows the table is only {files} "
    "files; ours' own part is {io:.3f} s (the content check reads the key range's rows before "
    "its MERGE) and Dagster's run adds the rest",
    "dd_rerun": "ours is mostly Dagster's: a run whose IO manager stores nothing takes "
    "{floor:.3f} s, ours' IO manager part (the batch's content fingerprint, the checkpoint and "
    "Delta log reads) {io:.3f} s, and the rest, {rest:.3f} s, is Dagster setting ours up as a "
    "resource (by a profile: it infers the config schema of the manager's fields, nested "
    "MergeConfig included, on every run); dagster-delta's rerun is its MERGE again, which "
    "reads the whole table: at {size} rows that is only {files} files",
    "dd_first": "ours hashes the {size} rows for its content fingerprint before delta-rs "
    "writes them (the merge path hashes first: the fingerprint is part of the proof it "
    "checks) and writes its checkpoint record; dagster-delta's CREATE TABLE and MERGE into "
    "the empty table is about one plain write (ours' IO manager part {io:.3f} s)",
    "dd_failed": "{failed} failed: see DD",
    "import": "above dagster the code location adds {above}, {over:.2f} s more than the "
    "target allows (garbage collection during the import: {gc:.2f} s wall; the largest self "
    "import times besides dagster's own, by importtime: {largest}; see F1)",
    "landing_gets": "the sensor downloaded objects on a quiet tick: its listing hints did not "
    "name the content (hints_name_content)",
    "landing_quiet": "the tick waits for moto: it uses {cpu:.2f} s of CPU itself (Dagster's "
    "context, the {objects:,} listed keys parsed into day folders, the cursor) while moto "
    "spends {server:.2f} s of CPU on its {pages} LISTs; the listing alone, with no project "
    "code, takes {listing:.2f} s wall (for every page of 1,000 moto scans all the bucket's "
    "keys and sorts the prefix's), on {cores} cores shared with other work (load average {load})",
    "landing_read": "the read is parsing-bound: its CPU is {cpu:.2f}× the local read's and "
    "downloading the {mib:.0f} MiB alone takes {download:.2f} s; the rest is moto and the "
    "reader sharing {cores} cores (moto {server:.2f} s of CPU during the read)",
    "landing_equal": "the bucket's read differs from the folder's: see L2",
    "spark_same": "the engines' tables differ: see S5",
    "spark_failed": "{failed} failed: see S5",
    "spark_big": "{cause}",
    "changes_history": "see C: the share of each contender's time spent in its MERGE",
    "changes_rerun": "the rerun of the change set committed: see C",
    "changes_wrong": "a result table differs from the correct merge of the change set: see C",
    "history": "see the Whole history section: its events per run and where the CPU goes",
    "history_floor": "on the same instance profile a stored event costs ours and Dagster's "
    "trivial run alike, and (a) stores one materialization a day where ours stores one "
    "materialization and a check evaluation per check a day: Dagster plans an evaluation of "
    "each selected check for every partition when a run is launched and shows a planned one "
    "that is not reported as Skipped, so a day's results cannot be left out; see the events "
    "per run in the Whole history section",
    "history_above_b": "ours stores the same number of events as (b), but larger ones (a "
    "materialization carries the write's and the landing's metadata, a check result its "
    "figures and proof), reads and writes the rows, and computes each day's checks; see the "
    "Whole history section",
    "history_failed": "a run of the whole history failed: see its section",
    "ui_launch": "see the UI launch section: the events the runs stored and the runs' own time",
    "history_commit": "an unchanged rerun committed, or a corrected day did not commit exactly "
    "once: see the Whole history section",
    "cli_floor": "both launches pay dg's start, Dagster's import, the instance from "
    "DAGSTER_HOME, a run's bookkeeping and process exit ({base:.2f} s for the trivial run); "
    "orders' adds its code location's import beyond dagster ({above:.2f} s wall, F1) and its "
    "asset with its checks ({api}), {gap:.2f} s over the trivial run where the target allows "
    "{allowed:.2f} s",
    "cli": "every `dg launch` is a fresh process: importing the code location alone is "
    "{imported:.2f} s of it (F1){split}. A profile of one launch (cProfile, which "
    "stretches times ~1.5×): dg's own command tree 0.7 s, the code location's import "
    "2.0 s, the DagsterInstance from DAGSTER_HOME 0.8 s (its SQLite storage imports "
    "alembic), building the selection's job and executing it 2.0 s, of which the run "
    "1.2 s",
}


def _ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else value / base


def _row(target: str, measured: str, met: bool, cause: str) -> list[str]:
    return [target, measured, "yes" if met else "**no**", "" if met else cause]


def _overwrite(numbers: dict[str, Any]) -> list[list[str]]:
    first = numbers["first"]
    rows = []
    ratio = _ratio(first.get(OURS), first.get(RAW))
    if ratio is not None:
        rows.append(
            _row(
                "1. overwrite through the IO manager ≤ 1.15× raw write_deltalake",
                f"{ratio:.2f}×",
                ratio <= 1.15,
                CAUSES["overwrite"],
            )
        )
    versus = _ratio(first.get(OURS), first.get(OFFICIAL))
    if versus is not None:
        rows.append(
            _row(
                "1. no slower than dagster-deltalake's IO manager",
                f"{versus:.2f}× its time",
                versus <= 1.0,
                CAUSES["official"],
            )
        )
    rerun = _ratio(numbers["rerun"].get(OURS), first.get(OURS))
    changes = numbers.get("ours_rerun_changes", {})
    if rerun is not None:
        rows.append(
            _row(
                "2. no-op rerun ≤ 5% of the first write (IO manager, no input signature)",
                f"{rerun:.1%}",
                rerun <= 0.05,
                CAUSES["noop_io"],
            )
        )
    if changes:
        untouched = not any(changes.values())
        rows.append(
            _row(
                "2. no-op rerun: zero new Delta versions, zero files rewritten",
                ", ".join(f"{k} {v}" for k, v in changes.items()),
                untouched,
                "a rerun committed",
            )
        )
    return rows


def _asset(numbers: dict[str, Any]) -> list[list[str]]:
    first = numbers.get("first run (read, validate, write)")
    rerun = numbers.get("rerun, landing unchanged")
    floor = numbers.get("trivial asset, same path (Dagster's floor)")
    if not first or rerun is None or floor is None:
        return []
    whole, net = rerun / first, max(rerun - floor, 0.0) / first
    return [
        _row(
            "2. no-op rerun of the orders asset ≤ 5% of its first run (through Dagster)",
            f"{whole:.1%}",
            whole <= 0.05,
            CAUSES["noop_asset"],
        ),
        _row(
            "2. the same, without Dagster's per-run floor (trivial asset)",
            f"{net:.1%}",
            net <= 0.05,
            CAUSES["noop_asset"],
        ),
    ]


def _merge(numbers: dict[str, Any]) -> list[list[str]]:
    sizes = sorted({int(k.split("/")[1]) for k in numbers})
    if len(sizes) < 2:
        return []
    small, large = sizes[0], sizes[-1]
    name = "ours (merge_upsert)"
    ratio = _ratio(
        numbers.get(f"clustered/{large}/{name}"), numbers.get(f"clustered/{small}/{name}")
    )
    spread = _ratio(numbers.get(f"random/{large}/{name}"), numbers.get(f"random/{small}/{name}"))
    rows = []
    if ratio is not None:
        rows.append(
            _row(
                f"3. clustered 1% merge: {large:,} rows ≤ 3× the cost at {small:,}",
                f"{ratio:.2f}×",
                ratio <= 3.0,
                CAUSES["merge"],
            )
        )
    if spread is not None:
        rows.append(["3. random 1% merge: reported", f"{spread:.2f}×", "reported", ""])
    return rows


def _changes(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases.changes import HISTORY, OURS, RERUN, UNAVAILABLE, history_ratio

    values = numbers["contenders"]
    ratio = history_ratio(numbers)
    target = "C. SCD2 history of the change set (merge_history) ≤ 2× merge_with_deletes"
    if HISTORY not in values:
        rows = [[target, UNAVAILABLE, "not run", ""]]
    elif ratio is None:
        rows = [[target, "a run failed (see C)", "**no**", CAUSES["changes_wrong"]]]
    else:
        history, ours = values[HISTORY]["seconds"], values[OURS]["seconds"]
        rows = [
            _row(
                target,
                f"{ratio:.2f}× ({history:.3f} s vs {ours:.3f} s)",
                ratio <= 2.0,
                CAUSES["changes_history"],
            )
        ]
    rerun = values[RERUN]
    quiet = not rerun["new_versions"] and not rerun["tombstones_moved"]
    rows.append(
        _row(
            "C. the same change set again commits nothing (table and tombstones)",
            f"new versions {rerun['new_versions']}, tombstones "
            f"{'moved' if rerun['tombstones_moved'] else 'unchanged'}",
            quiet,
            CAUSES["changes_rerun"],
        )
    )
    right = [name for name, value in values.items() if value["check"] == "ok"]
    rows.append(
        _row(
            "C. every contender's result table is the correct merge of the change set",
            f"{len(right)} of {len(values)} right",
            len(right) == len(values),
            CAUSES["changes_wrong"],
        )
    )
    return rows


def _fingerprint(numbers: dict[str, Any]) -> list[list[str]]:
    hashing, check = numbers["hash"], numbers["check"]
    rows = []
    speed = _ratio(
        hashing.get("pandas hash_pandas_object + xor"), hashing.get("ours (fingerprint)")
    )
    if speed is not None:
        rows.append(
            _row(
                "4. fingerprint ≥ 3× pandas hash_pandas_object + xor",
                f"{speed:.1f}×",
                speed >= 3.0,
                CAUSES["fingerprint"],
            )
        )
    cost = _ratio(check.get("rerun_equality check"), check.get("first write of the day"))
    if cost is not None:
        rows.append(
            _row(
                "4. rerun_equality check costs less than the write it verifies",
                f"{cost:.2f}× the write",
                cost < 1.0,
                CAUSES["check"],
            )
        )
    return rows


def _stream(numbers: dict[str, Any]) -> list[list[str]]:
    rss = numbers["rss"]
    growth = _ratio(rss["stream_3x"], rss["stream"])
    if growth is None:
        return []
    return [
        _row(
            "memory: a streamed day's peak RSS does not grow with its rows (3× rows within 10%)",
            f"{rss['stream']:,.0f} → {rss['stream_3x']:,.0f} MiB "
            f"(table in memory: {rss['table']:,.0f} MiB)",
            growth <= 1.10,
            CAUSES["stream"],
        )
    ]


def _dropin(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases.dropin import OURS as DROPIN

    rows = []
    for label, first in numbers["first"].items():
        ratio = _ratio(first.get(DROPIN), first.get(OFFICIAL))
        if ratio is not None:
            rows.append(
                _row(
                    f"D. drop-in first write no slower than dagster-deltalake: {label}",
                    f"{ratio:.2f}× its time",
                    ratio <= 1.0,
                    CAUSES["dropin_first"],
                )
            )
    for label, rerun in numbers["rerun"].items():
        failed = numbers["rerun_failed"].get(label, {})
        ours_commits = numbers["committed"].get(label, {}).get(DROPIN, True)
        if failed.get(OFFICIAL):
            met = not ours_commits and not failed.get(DROPIN)
            rows.append(
                _row(
                    f"D. drop-in rerun of a {label.split(',')[0]} commits nothing "
                    "(dagster-deltalake's rerun fails)",
                    f"ours {rerun[DROPIN]:.3f} s, "
                    f"{'a new version' if ours_commits else 'no new version'}; "
                    "dagster-deltalake fails",
                    met,
                    CAUSES["dropin_commit"],
                )
            )
            continue
        ratio = _ratio(rerun.get(DROPIN), rerun.get(OFFICIAL))
        if ratio is not None:
            rows.append(
                _row(
                    f"D. drop-in unchanged rerun ≤ 10% of dagster-deltalake's rewrite: {label}",
                    f"{ratio:.1%} ({rerun[DROPIN]:.3f} s vs {rerun[OFFICIAL]:.3f} s)",
                    ratio <= 0.10,
                    CAUSES["dropin_rerun"],
                )
            )
    committed = numbers["committed"]
    if committed:
        ours = {label: flags.get(DROPIN) for label, flags in committed.items()}
        rows.append(
            _row(
                "D. drop-in unchanged reruns commit no new Delta version",
                f"{sum(not c for c in ours.values())} of {len(ours)} reruns without a commit",
                not any(ours.values()),
                CAUSES["dropin_commit"],
            )
        )
    return rows


def _dropin_delta(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases.dropin_delta import CLUSTERED, FILE_ROWS, FIRST, FLOOR, RANDOM, RERUN
    from benchmarks.cases.dropin_delta import OFFICIAL as DELTA
    from benchmarks.cases.dropin_delta import OURS as DROPIN

    size, changes = _size(numbers["rows"]), f"{numbers['changes']:,}"
    files = numbers["rows"] // FILE_ROWS
    cases = numbers["cases"]

    def versus(case: str, digits: str = ".2f") -> tuple[float | None, str]:
        ours, theirs = cases[case][DROPIN], cases[case][DELTA]
        failed = [name for name, value in ((DROPIN, ours), (DELTA, theirs)) if value["failed"]]
        if failed:
            return None, CAUSES["dd_failed"].format(failed=" and ".join(failed))
        ratio = ours["seconds"] / theirs["seconds"]
        shown = f"{ratio:.1%}" if digits == "%" else f"{ratio:{digits}}×"
        return ratio, f"{shown} ({ours['seconds']:.3f} s vs {theirs['seconds']:.3f} s)"

    def versions(case: str) -> str:
        return (
            f"new versions {cases[case][DROPIN]['new_versions']} vs "
            f"{cases[case][DELTA]['new_versions']}"
        )

    rows = []
    ratio, shown = versus(CLUSTERED)
    upsert = cases[CLUSTERED]
    rows.append(
        _row(
            f"DD1. 1% upsert ({changes} rows, clustered) into a {size}-row table through "
            "dagster-delta's merge mode ≤ 0.5× dagster-delta's time",
            f"{shown}; files rewritten {upsert[DROPIN]['rewritten']} vs "
            f"{upsert[DELTA]['rewritten']}",
            ratio is not None and ratio <= 0.5,
            shown
            if ratio is None
            else CAUSES["dd_upsert"].format(
                size=size, files=files, io=upsert[DROPIN]["io_seconds"] or 0.0
            ),
        )
    )
    ratio, shown = versus(RANDOM)
    rows.append(
        [
            "DD1. the same with ids spread over the table: reported",
            f"{shown}; files rewritten {cases[RANDOM][DROPIN]['rewritten']} vs "
            f"{cases[RANDOM][DELTA]['rewritten']}",
            "reported",
            "",
        ]
    )
    ratio, shown = versus(RERUN, "%")
    rerun = cases[RERUN]
    quiet = rerun[DROPIN]["new_versions"] == 0
    rows.append(
        _row(
            "DD2. unchanged rerun of the 1% upsert ≤ 10% of dagster-delta's time, no commit",
            f"{shown}; {versions(RERUN)}",
            ratio is not None and ratio <= 0.10 and quiet,
            shown
            if ratio is None
            else CAUSES["dropin_commit"]
            if not quiet
            else CAUSES["dd_rerun"].format(
                floor=rerun[FLOOR]["seconds"],
                io=rerun[DROPIN]["io_seconds"] or 0.0,
                rest=rerun[DROPIN]["seconds"]
                - rerun[FLOOR]["seconds"]
                - (rerun[DROPIN]["io_seconds"] or 0.0),
                size=size,
                files=files,
            ),
        )
    )
    ratio, shown = versus(FIRST)
    rows.append(
        _row(
            f"DD3. first write ({size} rows, no table yet) ≤ 1.05× dagster-delta's time",
            f"{shown}; {versions(FIRST)}",
            ratio is not None and ratio <= 1.05,
            shown
            if ratio is None
            else CAUSES["dd_first"].format(size=size, io=cases[FIRST][DROPIN]["io_seconds"] or 0.0),
        )
    )
    return rows


def _fast_runs(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases.fast_runs import (
        ABOVE_DAGSTER,
        API,
        FLOOR,
        IN_PROCESS,
        MULTI,
        NO_GC,
        NOW,
        OLD,
        TRIVIAL,
        TRIVIAL_RATIO,
    )

    imports, rows = numbers["import"], []
    now, old, floor = imports[NOW], imports[OLD], imports[FLOOR]
    largest = (
        ", ".join(
            [
                f"{name} {ms:.0f} ms"
                for name, ms in now.get("packages", {}).items()
                if not name.startswith("dagster")
            ][:5]
        )
        or "—"
    )

    def cause(above_s: float, how: str) -> str:
        return CAUSES["import"].format(
            above=f"{above_s:.2f} s {how}",
            over=above_s - ABOVE_DAGSTER,
            largest=largest,
            gc=now["wall"] - imports[NO_GC]["wall"],
        )

    above = now["wall"] - floor["wall"]
    rows.append(
        _row(
            f"F1. `import idem_assets.definitions` ≤ `import dagster` + {ABOVE_DAGSTER:g} s "
            "(wall medians, fresh processes, same run)",
            f"+{above:.2f} s ({now['wall']:.2f} s vs {floor['wall']:.2f} s; before lazy "
            f"imports +{old['wall'] - floor['wall']:.2f} s)",
            above <= ABOVE_DAGSTER,
            cause(above, "wall"),
        )
    )
    traced = now["importtime"] - now["dagster_importtime"]
    rows.append(
        _row(
            "F1. the same by -X importtime: the code location's cumulative minus dagster's "
            f"cumulative in the same import ≤ {ABOVE_DAGSTER:g} s",
            f"+{traced:.2f} s ({now['importtime']:.2f} s − dagster "
            f"{now['dagster_importtime']:.2f} s; before lazy imports "
            f"+{old['importtime'] - old['dagster_importtime']:.2f} s)",
            traced <= ABOVE_DAGSTER,
            cause(traced, "by -X importtime"),
        )
    )
    label = (
        f"F2. one partition of orders with its checks ≤ {TRIVIAL_RATIO:g}× a trivial "
        "in-process run through the same CLI"
    )
    for run, title in (("first", "first run"), ("rerun", "unchanged rerun")):
        values = numbers["one"][run]
        ours, base, was = values.get(IN_PROCESS), values.get(TRIVIAL), values.get(MULTI)
        if ours is None or base is None:
            failed = " and ".join(
                name for name, value in (("orders", ours), ("the trivial run", base)) if not value
            )
            rows.append(
                _row(f"{label}, {title}", f"{failed} failed", False, "see F2 for the failure")
            )
            continue
        api, cpu = values.get(API), numbers.get("one_cpu", {}).get(run, {})
        by_cpu = (
            f"; by CPU {cpu[IN_PROCESS] / cpu[TRIVIAL]:.2f}×"
            if cpu.get(IN_PROCESS) and cpu.get(TRIVIAL)
            else ""
        )
        rows.append(
            _row(
                f"{label}, {title}",
                f"{ours / base:.2f}× ({ours:.2f} s vs {base:.2f} s{by_cpu}"
                + (f"; multiprocess {was:.2f} s" if was else "")
                + ")",
                ours <= TRIVIAL_RATIO * base,
                CAUSES["cli_floor"].format(
                    base=base,
                    above=above,
                    api=f"{api:.2f} s through the Python API, Dagster's per-run work included"
                    if api is not None
                    else "see F2",
                    gap=ours - base,
                    allowed=(TRIVIAL_RATIO - 1) * base,
                ),
            )
        )
    label, limit = (
        "F3. three days of four assets with every check, `dg launch --partition-range`",
        10.0,
    )
    for run, title in (("first", "first run"), ("rerun", "unchanged rerun")):
        values = numbers["range"][run]
        ours, was = values.get(IN_PROCESS), values.get(MULTI)
        if ours is None:
            rows.append(
                _row(
                    f"{label}, {title} ≤ {limit:g} s",
                    "failed",
                    False,
                    "the run failed: see its section",
                )
            )
            continue
        rows.append(
            _row(
                f"{label}, {title} ≤ {limit:g} s (in-process, the default)",
                f"{ours:.2f} s" + (f" (multiprocess {was:.2f} s)" if was else ""),
                ours <= limit,
                CAUSES["cli"].format(imported=now["wall"], split=""),
            )
        )
    return rows


# H: the whole history's targets (issue 41), each judged by CPU against its limit here.
HISTORY_LIMITS: dict[str, float] = {
    "rerun_vs_a": 1.5,  # unchanged rerun ÷ (a), Dagster's trivial run of the range
    "first_vs_a": 3.0,  # first run of the whole history ÷ (a)
    "above_b_per_c": 3.0,  # (first run − (b), the same checks) ÷ (c), the delta-rs process
}


def _history(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases import history

    sizes = numbers["sizes"]
    days = sorted(sizes)
    largest = days[-1]
    top = sizes[largest]

    def at(n: int, key: str) -> float | None:
        return sizes[n]["by_cpu"].get(key)

    def every_size(key: str) -> str:
        return ", ".join(
            f"{n:,} days " + ("—" if at(n, key) is None else f"{at(n, key):.2f}×") for n in days
        )

    def seconds(n: int, *names: str) -> str:
        cpu = sizes[n]["cpu"]
        return ", ".join(
            f"{name} {cpu[name]:.1f} s" if name in cpu else f"{name} failed" for name in names
        )

    rows = []
    for key, floor, what, scope in (
        ("rerun_vs_a", history.FLOOR_A_STOCK, "Dagster's default SQLite storage", days),
        ("rerun_vs_a", history.FLOOR_A, "the same instance profile as ours", days),
        ("first_vs_a", history.FLOOR_A_STOCK, "Dagster's default SQLite storage", [largest]),
        ("first_vs_a", history.FLOOR_A, "the same instance profile as ours", [largest]),
    ):
        stock = floor == history.FLOOR_A_STOCK
        metric = f"{key}_stock" if stock else key
        values = [at(n, metric) for n in scope]
        limit = HISTORY_LIMITS[key]
        ours = history.RERUN if key == "rerun_vs_a" else history.OURS
        label = (
            f"H1. unchanged rerun of any range ≤ {limit:g}× (a), Dagster's trivial run of it "
            f"on {what}, by CPU"
            if key == "rerun_vs_a"
            else f"H2. first run of {largest:,} days ≤ {limit:g}× (a) on {what}, by CPU"
        )
        shown = ", ".join(
            f"{n:,} days " + ("—" if v is None else f"{v:.2f}×")
            for n, v in zip(scope, values, strict=True)
        )
        shown += f" (at {largest:,} days: {seconds(largest, ours, floor)})"
        met = all(v is not None and v <= limit for v in values)
        cause = CAUSES["history_floor"] if not stock else CAUSES["history"]
        rows.append(_row(label, shown, met, cause))
    above = top["by_cpu"].get("above_b_per_c")
    rows.append(
        _row(
            f"H3. first run of {largest:,} days: ours above (b), the same checks stored by a "
            f"trivial asset, ≤ {HISTORY_LIMITS['above_b_per_c']:g}× (c), one pyarrow + "
            "write_deltalake process, by CPU",
            f"{every_size('above_b_per_c')} (at {largest:,} days: "
            f"{seconds(largest, history.OURS, history.FLOOR_B, history.DELTA_RS)})",
            above is not None and above <= HISTORY_LIMITS["above_b_per_c"],
            CAUSES["history_above_b"],
        )
    )
    versions = [sizes[n]["versions"] for n in days]
    quiet = sum(v.get(history.RERUN, -2) == v.get(history.OURS, -1) >= 0 for v in versions)
    once = sum(v.get(history.DAY, -2) == v.get(history.OURS, -1) + 1 >= 1 for v in versions)
    touched = top.get("corrected_days")
    only_that_day = touched == [top.get("corrected_day")]
    rows.append(
        _row(
            "H4. an unchanged rerun commits nothing; a corrected day inside the history commits "
            "exactly one Delta version, touching that day alone",
            f"no commit at {quiet} of {len(days)} sizes, one version at {once} of {len(days)}; "
            f"at {largest:,} days the corrected day's commit touches "
            f"{', '.join(touched or ['nothing'])} ({seconds(largest, history.DAY)})",
            quiet == once == len(days) and only_that_day,
            CAUSES["history_commit"],
        )
    )
    return rows


# H5: the shipped TPC-H example's 31 days from the UI, click to the last run's end, ÷ (a).
UI_LAUNCH_LIMIT = 3.0


def _ui_launch(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases.ui_launch import DAYS, FLOOR, OURS

    medians, ratio = numbers["medians"], numbers["ratio"]
    return [
        _row(
            f"H5. {DAYS} days of the shipped TPC-H example (three tables) launched from the UI: "
            f"click to success ≤ {UI_LAUNCH_LIMIT:g}× (a) launched the same way",
            f"{ratio:.2f}× (click → last run ended {medians[OURS]['click_to_end']:.1f} s vs "
            f"{medians[FLOOR]['click_to_end']:.1f} s; the page showed Succeeded after "
            f"{medians[OURS]['click_to_page']:.1f} s vs {medians[FLOOR]['click_to_page']:.1f} s)",
            ratio <= UI_LAUNCH_LIMIT,
            CAUSES["ui_launch"],
        )
    ]


def _size(rows: int) -> str:
    return f"{rows / 1e6:.0f}M" if rows >= 1_000_000 else f"{rows / 1e3:.0f}k"


def _landing(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases.landing_store import BUCKET_READ, DOWNLOAD, LOCAL, QUIET

    ticks, read = numbers["ticks"], numbers["read"]
    seconds, gets = ticks["seconds"], ticks["gets"]
    quiet, listing = seconds[QUIET], seconds["listing"]
    others = ", ".join(f"{k} {v}" for k, v in gets.items() if k not in (QUIET, "naive"))
    local, remote = read["seconds"][LOCAL], read["seconds"][BUCKET_READ]
    download = read["seconds"][DOWNLOAD]
    mib = read["bytes"] / 2**20
    ratio = remote / local
    return [
        _row(
            f"L1. a quiet sensor tick over {ticks['objects']:,} objects downloads nothing (0 GETs)",
            f"{gets[QUIET]} GETs, {ticks['lists']} LISTs ({others} GETs; the naive tick "
            f"{gets['naive']:,} GETs, {ticks['naive_mib']:.1f} MiB)",
            gets[QUIET] == 0,
            CAUSES["landing_gets"],
        ),
        _row(
            "L1. quiet tick ≤ 2 s",
            f"{quiet:.2f} s (the listing alone {listing:.2f} s; the naive tick "
            f"{seconds['naive']:.2f} s)",
            quiet <= 2.0,
            CAUSES["landing_quiet"].format(
                cpu=ticks["cpu"][QUIET],
                objects=ticks["objects"],
                server=ticks["server_cpu"][QUIET],
                pages=ticks["lists"],
                listing=listing,
                load=numbers["load"],
                cores=os.cpu_count(),
            ),
        ),
        _row(
            f"L2. S3 read of a {_size(read['rows'])}-row day within 2× the local read",
            f"{ratio:.2f}× ({remote:.2f} s vs {local:.2f} s)",
            ratio <= 2.0,
            CAUSES["landing_read"].format(
                cpu=read["cpu"][BUCKET_READ] / read["cpu"][LOCAL],
                mib=mib,
                download=download,
                server=read["server_cpu"],
                cores=os.cpu_count(),
            ),
        ),
        _row(
            "L2. the bucket read gives the local read's batch.signature and row fingerprint",
            "equal" if read["equal"] else "different",
            read["equal"],
            CAUSES["landing_equal"],
        ),
    ]


def _spark(numbers: dict[str, Any]) -> list[list[str]]:
    from benchmarks.cases.spark_engines import (
        CLUSTER,
        LOCAL,
        LOCAL2,
        SAME_MEMORY,
        big_cause,
        bounded,
    )

    engines, cases = numbers["engines"], numbers["big"]
    size = _size(engines["rows"])
    speed = engines["rows_per_s"]
    failed = [name for name in (LOCAL, LOCAL2, CLUSTER) if name not in speed]

    def rate(name: str) -> str:
        return f"{speed[name]:,.0f} rows/s" if name in speed else "failed"

    target = cases[0]
    gb = f"{target['bytes'] / 1e9:.2f} GB"
    held, measured = bounded(cases)
    return [
        _row(
            f"S5. {size}-row day: the cluster's rows/s reported beside local and local[2]",
            f"cluster {rate(CLUSTER)}; local {rate(LOCAL)}, local[2] {rate(LOCAL2)}",
            not failed,
            CAUSES["spark_failed"].format(failed=", ".join(failed)),
        ),
        _row(
            f"S5. {size}-row day: the three engines' tables have the same fingerprint",
            "same" if engines["same"] else "different",
            engines["same"],
            CAUSES["spark_same"],
        ),
        _row(
            f"S6. a {gb} CSV day (one file) through the cluster on executors of a 1 GiB heap",
            f"failed after {target['seconds']:.0f} s"
            if target["error"]
            else f"{target['rows']:,} rows in {target['seconds']:.0f} s, executor peak "
            f"{target['executor_total']:,.0f} MiB",
            not target["error"],
            CAUSES["spark_big"].format(cause=target["error"]),
        ),
        _row(
            "S6. executor memory bounded by a piece, not by the file: every file passes, "
            f"the {gb} file's executor peak within {SAME_MEMORY:g}× the smallest file's",
            measured,
            held,
            CAUSES["spark_big"].format(cause=big_cause(cases)),
        ),
    ]


_FAMILIES: list[tuple[str, Callable[[dict[str, Any]], list[list[str]]]]] = [
    ("overwrite", _overwrite),
    ("asset_rerun", _asset),
    ("stream_write", _stream),
    ("dropin", _dropin),
    ("dropin_delta", _dropin_delta),
    ("merge", _merge),
    ("changes", _changes),
    ("fingerprint", _fingerprint),
    ("fast_runs", _fast_runs),
    ("history", _history),
    ("ui_launch", _ui_launch),
    ("landing", _landing),
    ("spark", _spark),
]

# The run family (``python -m benchmarks.run --only NAME``) that owns a Targets row, told by
# the case label the row starts with; a run of some families keeps the others' rows.
ROW_LABELS: list[tuple[str, str]] = [
    ("1.", "overwrite"),
    ("2.", "overwrite"),
    ("memory:", "overwrite"),
    ("D.", "dropin"),
    ("DD1.", "dropin_delta"),
    ("DD2.", "dropin_delta"),
    ("DD3.", "dropin_delta"),
    ("3.", "merge"),
    ("C.", "changes"),
    ("4.", "fingerprint"),
    ("F", "fast_runs"),
    ("H1.", "history"),
    ("H2.", "history"),
    ("H3.", "history"),
    ("H4.", "history"),
    ("H5.", "ui_launch"),
    ("L1.", "landing"),
    ("L2.", "landing"),
    ("S5.", "spark"),
    ("S6.", "spark"),
]
ORDER = [family for _, family in ROW_LABELS]
HEADERS = ["target", "this run", "met", "cause when not met"]


def rows(numbers: dict[str, Any]) -> list[list[str]]:
    """Every target row the families in ``numbers`` measured."""
    return [
        row for family, build in _FAMILIES if family in numbers for row in build(numbers[family])
    ]


def row_family(target: str) -> str | None:
    """The run family of a Targets row, from the label its target text starts with."""
    text = target.strip().lstrip("|").strip()
    return next((family for label, family in ROW_LABELS if text.startswith(label)), None)


def summary(numbers: dict[str, Any]) -> str:
    """A markdown section: every target this run measured, met or not, and why not."""
    measured = rows(numbers)
    if not measured:
        return ""
    return "\n".join(["## Targets", "", table(HEADERS, measured), ""])


def merged_summary(old_section: str, numbers: dict[str, Any], ran: set[str]) -> str:
    """The Targets section of a run of some families: their rows new, the others' kept.

    ``old_section`` is the Targets section of the report being updated; its rows of families
    not in ``ran`` are kept verbatim, ordered with the new rows by family.
    """
    kept = [
        line
        for line in old_section.splitlines()
        if line.startswith("| ") and row_family(line) not in (None, *ran)
    ]
    measured = rows(numbers)
    new = table(HEADERS, measured).splitlines()[2:] if measured else []
    lines = sorted(kept + new, key=lambda line: ORDER.index(row_family(line) or ORDER[-1]))
    if not lines:
        return ""
    return "\n".join(["## Targets", "", *table(HEADERS, []).splitlines(), *lines, ""])
