"""Drop-in family for dagster-delta: its merge mode through its IO manager and ours.

Both IO managers are configured as a dagster-delta project configures merge mode — an
upsert on the key, ``MergeConfig(merge_type=upsert, predicate="s.customer_id =
t.customer_id", source_alias="s", target_alias="t")`` — each under its own root, and the
asset (``bench/customers``, unpartitioned) returns a pyarrow Table. Every timed call is one
``dg.materialize``, what a user waits for. The cases, on synthetic customers (files of 100k
ids, as in case 3):

- DD1: an upsert of 1% changed rows (the newest customers changed plus as many new ones:
  "clustered", the common shape; ids spread over the table: "random", reported);
- DD2: the same upsert again right after it was merged (the unchanged rerun);
- DD3: a first write, the merge into a table that does not exist yet (all the customers).

A fair sample starts where the other contender's does: each sample has a fresh root holding
the base table (hard links to a cached copy, so every sample sees the same files and
version) and, for ours, a fresh checkpoint store beside it. Before the timer, each sample
warms up through the same manager under the same root with another asset (created, then
merged into: imports, the checkpoint store, delta-rs's first MERGE; a running code location
has done those). Ours then holds no record for ``bench/customers``, as on any day whose
batch differs from the last one written, so DD1 pays for its content check. In DD2 the
upsert ran once in the same sample before the timer, through the same manager. After the
timer stops, the new Delta versions and the files their commits removed are read from the
table's history. A run that fails is reported with its error.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from benchmarks.data import DATA_DIR, customer_changes, customers
from benchmarks.harness import Contender, Stats, compare, table

OFFICIAL = "dagster-delta"
OURS = "ours (drop-in)"
FLOOR = "Dagster's floor (an IO manager that discards the output)"
CONTENDERS = (OFFICIAL, OURS)
KEY = ["bench", "customers"]  # both managers: <root>/bench/customers
WARMUP = ["warmup", "customers"]
PREDICATE = "s.customer_id = t.customer_id"
FILE_ROWS = 100_000
SHARE = 0.01
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# Fork from a small server, not spawned from the parent that generated the data: a
# sample's peak RSS is then its own.
METHOD = "forkserver"
CLUSTERED, RANDOM, RERUN, FIRST = "clustered", "random", "rerun", "first"
CASES = (CLUSTERED, RANDOM, RERUN, FIRST)
LABELS = {
    CLUSTERED: "DD1. 1% upsert, clustered",
    RANDOM: "DD1. 1% upsert, random (reported)",
    RERUN: "DD2. unchanged rerun of the clustered upsert",
    FIRST: "DD3. first write (no table yet)",
}
SHORT = {
    CLUSTERED: "1% upsert\nclustered",
    RANDOM: "1% upsert\nrandom",
    RERUN: "unchanged\nrerun",
    FIRST: "first write",
}


class DiscardIOManager(dg.ConfigurableIOManager):
    """Stores nothing: what a run costs Dagster alone."""

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Drop the output."""

    def load_input(self, context: dg.InputContext) -> Any:
        """Nothing was stored."""
        raise NotImplementedError


def io_manager(contender: str, root: Path) -> Any:
    """The contender's IO manager in merge mode: an upsert on the customer id."""
    if contender == FLOOR:
        return DiscardIOManager()
    if contender == OFFICIAL:
        import dagster_delta as dd

        return dd.DeltaLakePyarrowIOManager(
            root_uri=str(root),
            storage_options=dd.LocalConfig(),
            mode=dd.WriteMode.merge,
            merge_config=dd.MergeConfig(
                merge_type=dd.MergeType.upsert,
                predicate=PREDICATE,
                source_alias="s",
                target_alias="t",
            ),
        )
    from idem_assets import IdempotentDeltaIOManager, MergeConfig, MergeType

    return IdempotentDeltaIOManager(
        root_uri=str(root),
        mode="merge",
        merge_config=MergeConfig(
            merge_type=MergeType.upsert, predicate=PREDICATE, source_alias="s", target_alias="t"
        ),
    )


def customers_file(n: int) -> Path:
    """``n`` customers in one Parquet file, written once."""
    path = DATA_DIR / f"customers-{n}.parquet"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        pq.write_table(customers(n), path)
    return path


def changes_file(n: int, clustered: bool) -> Path:
    """The 1% change batch of ``n`` customers in one Parquet file, written once."""
    path = DATA_DIR / f"customer-changes-{n}-{CLUSTERED if clustered else RANDOM}.parquet"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        pq.write_table(customer_changes(n, SHARE, clustered), path)
    return path


def base_table(n: int) -> Path:
    """The customers as a Delta table in files of 100k ids, built once and never written."""
    path = DATA_DIR / f"dropin-delta-customers-{n}"
    if not (path / "_delta_log").exists():
        data = pq.read_table(customers_file(n))
        for start in range(0, n, FILE_ROWS):
            write_deltalake(str(path), data.slice(start, FILE_ROWS), mode="append")
    return path


def _link_copy(source: Path, target: Path) -> None:
    """The table at ``target``: its data files hard-linked (immutable), its log copied."""
    shutil.copytree(source, target, copy_function=os.link, ignore=shutil.ignore_patterns("_*"))
    shutil.copytree(source / "_delta_log", target / "_delta_log")


def _asset(key: list[str], data: pa.Table) -> dg.AssetsDefinition:
    @dg.asset(key=key)
    def customers_asset():  # noqa: ANN202  (a string annotation would not resolve here)
        return data

    return customers_asset


def _materialize(state: dict[str, Any], asset: dg.AssetsDefinition) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [asset],
        resources={"io_manager": state["manager"]},
        instance=state["instance"],
        run_config=QUIET,
        raise_on_error=False,
    )


def _path(root: Path) -> Path:
    return root / "/".join(KEY)


def _version(root: Path) -> int:
    path = _path(root)
    return DeltaTable(str(path)).version() if (path / "_delta_log").exists() else -1


def prepare(contender: str, case: str, n: int, workdir: str) -> dict[str, Any]:
    """A fresh root with the base table (none for DD3), warmed up; DD2's upsert done once."""
    # Ours keeps its records in IDEM_STATE_URL when set (`make` exports it for the project),
    # else in SQLite under <root>/_idem_state: keep each sample's beside its own root.
    os.environ.pop("IDEM_STATE_URL", None)
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if case == FIRST:
        data = pq.read_table(customers_file(n))
    else:
        data = pq.read_table(changes_file(n, case != RANDOM))
        _link_copy(base_table(n), _path(root))
    state: dict[str, Any] = {
        "root": root,
        "manager": io_manager(contender, root),
        "instance": dg.DagsterInstance.ephemeral(),
    }
    warmup = data.slice(0, 10)
    changed = warmup.set_column(
        warmup.schema.get_field_index("segment"), "segment", pa.array(["warm-up"] * 10)
    )
    for rows in (warmup, changed):
        assert _materialize(state, _asset(WARMUP, rows)).success, "warm-up run failed"
    state["asset"] = _asset(KEY, data)
    if case == RERUN:
        assert _materialize(state, state["asset"]).success, "the first upsert failed"
    state["version_before"] = _version(root)
    return state


def run(state: dict[str, Any]) -> dict[str, Any]:
    """The timed call: one materialize run of the customers asset."""
    result = _materialize(state, state["asset"])
    if not result.success:
        return {"failed": _first_error_line(result), "proof": ""}
    event = result.get_asset_materialization_events()[0]
    materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
    metadata = materialization.metadata or {}
    proof, io_seconds = metadata.get("no_op_proof"), metadata.get("write_seconds")
    return {
        "failed": "",
        "proof": str(getattr(proof, "value", proof) or ""),
        # Ours times its own part of the run: its handle_output.
        "io_seconds": getattr(io_seconds, "value", io_seconds),
    }


def _first_error_line(result: dg.ExecuteInProcessResult) -> str:
    """The first line of the innermost error of the run's failed step."""
    failures = result.get_step_failure_events()
    if not failures:
        return "run failed"
    error = failures[0].step_failure_data.error
    while error is not None and error.cause is not None:
        error = error.cause
    return (error.message.strip().splitlines() or ["run failed"])[0] if error else "run failed"


def verify(state: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
    """New versions, and the files their commits removed and added (after the timer)."""
    before, after = state["version_before"], _version(state["root"])
    commits = after - before
    history = DeltaTable(str(_path(state["root"]))).history(commits) if commits > 0 else []
    metrics = [entry.get("operationMetrics") or {} for entry in history]
    return {
        "version_before": before,
        "version_after": after,
        "new_versions": commits,
        "operations": " + ".join(str(e.get("operation", "?")) for e in reversed(history)),
        "rewritten": sum(int(m.get("num_target_files_removed", 0)) for m in metrics),
        "added": sum(
            int(m.get("num_target_files_added", m.get("num_added_files", 0))) for m in metrics
        ),
    }


def _outcome(stat: Stats) -> str:
    failed = stat.last("failed")
    if failed:
        return f"fails: {failed[:160]}"
    if stat.name == FLOOR:
        return "nothing stored"
    if not stat.last("new_versions"):
        proof = stat.last("proof")
        return "no commit" + (f" (proven by {proof})" if proof else "")
    before = stat.last("version_before")
    return (
        f"{stat.last('operations')}: version {before if before >= 0 else 'none'} → "
        f"{stat.last('version_after')}, +{stat.last('added')} files"
    )


def _line(case: str, stat: Stats, base: Stats) -> list[Any]:
    low, high = stat.spread
    failed = base.last("failed") or stat.last("failed")
    return [
        LABELS[case],
        stat.name,
        stat.median,
        f"{low:.3f}–{high:.3f}",
        "—" if failed else f"{stat.median / base.median:.2f}×",
        stat.rss,
        stat.last("rewritten", "—"),
        stat.last("new_versions", "—"),
        _outcome(stat),
    ]


def _measured(stat: Stats) -> dict[str, Any]:
    io = [e["io_seconds"] for e in stat.extra if e.get("io_seconds") is not None]
    return {
        "seconds": stat.median,
        "failed": stat.last("failed") or "",
        "new_versions": stat.last("new_versions"),
        "rewritten": stat.last("rewritten"),
        "proof": stat.last("proof"),
        # Ours' own part of the run (its handle_output), as it reports it.
        "io_seconds": statistics.median(io) if io else None,
    }


HEADERS = [
    "case",
    "contender",
    "median s",
    "min–max s",
    "× dagster-delta",
    "peak RSS MiB",
    "files rewritten",
    "new versions",
    "Delta table after the timed call",
]


def run_family(n: int, repetitions: int) -> tuple[str, dict[str, Any]]:
    """Every case, the contenders alternately; the report section and its numbers."""
    base_table(n)  # inputs built here, not inside a timed sample
    changes_file(n, clustered=False)
    # Beside the cached table: hard links need the same file system.
    work = tempfile.mkdtemp(prefix="bench-dropin-delta-", dir=DATA_DIR)
    load = [os.getloadavg()[0]]
    lines: list[list[Any]] = []
    numbers: dict[str, Any] = {"rows": n, "changes": int(n * SHARE), "cases": {}}
    for case in CASES:
        # In DD2 a run that stores nothing shows how much of a rerun is Dagster's own.
        names = CONTENDERS + ((FLOOR,) if case == RERUN else ())
        contenders = [
            Contender(name, prepare, run, (name, case, n, f"{work}/{case}-{i}"), verify)
            for i, name in enumerate(names)
        ]
        stats = compare(contenders, repetitions, method=METHOD)
        lines += [_line(case, stat, stats[0]) for stat in stats]
        numbers["cases"][case] = {stat.name: _measured(stat) for stat in stats}
        shutil.rmtree(work, ignore_errors=True)  # its roots: up to 1 GB each
    load.append(os.getloadavg()[0])
    numbers["load"] = load
    md = [
        f"### DD. dagster-delta's IO manager and ours in merge mode (upsert on customer_id; "
        f"{n:,} synthetic customers in files of {FILE_ROWS:,} ids, {int(n * SHARE):,} "
        "changed rows per batch: half existing customers, half new when clustered)",
        "",
        table(HEADERS, lines),
        "",
        f"Load average (1 min) on {os.cpu_count()} cores when the cases started and ended: "
        f"{load[0]:.1f}, {load[1]:.1f}.",
        "",
        *_summary(numbers),
    ]
    return "\n".join(md), numbers


def _summary(numbers: dict[str, Any]) -> list[str]:
    out = []
    for case, label in LABELS.items():
        values = numbers["cases"][case]
        ours, theirs = values[OURS], values[OFFICIAL]
        if ours["failed"] or theirs["failed"]:
            out.append(f"- {label}: a run failed (see the table).")
            continue
        line = (
            f"- {label}: ours {ours['seconds']:.3f} s, {ours['seconds'] / theirs['seconds']:.2f}× "
            f"dagster-delta's {theirs['seconds']:.3f} s; new versions {ours['new_versions']} "
            f"vs {theirs['new_versions']}, files rewritten {ours['rewritten']} vs "
            f"{theirs['rewritten']}"
        )
        if ours["io_seconds"] is not None:
            line += f"; ours' IO manager part {ours['io_seconds']:.3f} s"
        if FLOOR in values:
            line += f"; a run that stores nothing {values[FLOOR]['seconds']:.3f} s"
        out.append(line + ".")
    return out + [""]


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for the plot: each case's medians (a failed run left out)."""
    return {
        SHORT[case]: {
            name: value["seconds"] for name, value in by_name.items() if not value["failed"]
        }
        for case, by_name in numbers["cases"].items()
    }
