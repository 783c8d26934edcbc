"""Drop-in family: the same assets through dagster-deltalake's IO manager and ours.

Both IO managers are constructed alike — ``root_uri`` and ``LocalConfig()``, nothing else —
and the assets carry dagster-deltalake's own metadata only (``partition_expr``), so the
numbers are what a team gets by changing one import. On TPC-H orders:

- one daily partition (orders SF1 as one day, ``partition_expr`` on ``order_date``): first
  write and unchanged rerun, as IO-manager cost (``handle_output`` with an output context
  built outside the timer, as in case 1) and end to end (``dg.materialize`` of the
  partition, what a user waits for);
- an unpartitioned asset of the same rows (whole-table replace): first write, unchanged rerun;
- a single-run backfill of 7 days (the same orders spread over 7 days by o_orderdate) and
  its rerun, end to end.

Each sample runs in a fresh process after a warm-up write of another asset under the same
root (imports, the checkpoint store, delta-rs's first use: a running code location has done
those). After the timer stops the table's Delta version is read again: a rerun that
commits a new version rewrote the data. A run that fails is reported with its error.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from benchmarks.data import DAY, orders_day_file, orders_days_file
from benchmarks.harness import Contender, Stats, compare, table

OFFICIAL = "dagster-deltalake"
OURS = "ours (drop-in)"
PARTITIONS = dg.DailyPartitionsDefinition(start_date="2024-01-01", timezone="UTC")
RANGE_DAYS = 7
KEY = ["bench", "orders"]  # both managers: <root>/bench/orders
# CRITICAL: the official manager's failing backfill rerun would print its traceback.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# (scenario, level, warm): the cases in report order.
CASES = [
    ("partition", "io", False),
    ("partition", "io", True),
    ("partition", "run", False),
    ("partition", "run", True),
    ("table", "io", False),
    ("table", "io", True),
    ("range", "run", False),
    ("range", "run", True),
]
LABELS = {
    ("partition", "io"): "one partition, IO manager",
    ("partition", "run"): "one partition, dg.materialize",
    ("table", "io"): "unpartitioned, IO manager",
    ("range", "run"): f"{RANGE_DAYS}-day single-run backfill, dg.materialize",
}


def io_manager(contender: str, root: Path) -> Any:
    """The contender's IO manager, constructed exactly as dagster-deltalake documents."""
    from dagster_deltalake import DeltaLakePyarrowIOManager, LocalConfig

    from idem_assets import IdempotentDeltaIOManager

    kind = DeltaLakePyarrowIOManager if contender == OFFICIAL else IdempotentDeltaIOManager
    return kind(root_uri=str(root), storage_options=LocalConfig())


def _metadata(scenario: str) -> dict[str, Any]:
    return {} if scenario == "table" else {"partition_expr": "order_date"}


def _range_tags() -> dict[str, str]:
    last = DAY + dt.timedelta(days=RANGE_DAYS - 1)
    return {
        "dagster/asset_partition_range_start": DAY.isoformat(),
        "dagster/asset_partition_range_end": last.isoformat(),
    }


def _asset(key: list[str], scenario: str, data: Any) -> dg.AssetsDefinition:
    partitioned = scenario != "table"
    policy = dg.BackfillPolicy.single_run() if scenario == "range" else None

    @dg.asset(
        key=key,
        partitions_def=PARTITIONS if partitioned else None,
        metadata=_metadata(scenario),
        backfill_policy=policy,
    )
    def orders():  # noqa: ANN202  (a string annotation would not resolve here)
        return data

    return orders


def _materialize(state: dict[str, Any], asset: dg.AssetsDefinition) -> dg.ExecuteInProcessResult:
    scenario = state["scenario"]
    kwargs: dict[str, Any] = (
        {"partition_key": DAY.isoformat()}
        if scenario == "partition"
        else {"tags": _range_tags()}
        if scenario == "range"
        else {}
    )
    return dg.materialize(
        [asset],
        resources={"io_manager": state["manager"]},
        instance=state["instance"],
        run_config=QUIET,
        raise_on_error=False,
        **kwargs,
    )


def _output_context(state: dict[str, Any], key: list[str]) -> dg.OutputContext:
    partitioned = state["scenario"] != "table"
    # dagster-deltalake reads its connection from resource_config; ours ignores it.
    config = {"root_uri": str(state["root"]), "storage_options": {"local": {}}, "mode": "overwrite"}
    return dg.build_output_context(
        asset_key=dg.AssetKey(key),
        partition_key=DAY.isoformat() if partitioned else None,
        asset_partitions_def=PARTITIONS if partitioned else None,
        definition_metadata=_metadata(state["scenario"]),
        resource_config=config,
        run_id=str(uuid.uuid4()),
    )


def _handler(state: dict[str, Any]) -> Any:
    manager = state["manager"]
    if state["contender"] == OFFICIAL:
        return manager.create_io_manager(dg.build_init_resource_context())
    return manager


def _version(root: Path) -> int:
    path = root / "/".join(KEY)
    return DeltaTable(str(path)).version() if (path / "_delta_log").exists() else -1


def prepare(
    contender: str, scenario: str, level: str, warm: bool, scale: float, workdir: str
) -> dict[str, Any]:
    """Data loaded, a warm-up write done; with ``warm`` the case's write done once already."""
    # The drop-in's checkpoint store defaults to IDEM_STATE_URL (which `make` exports for the
    # project) else SQLite beside the root: keep every sample's records beside its own root.
    os.environ.pop("IDEM_STATE_URL", None)
    warnings.filterwarnings("ignore", category=dg.BetaWarning)  # backfill_policy
    source = orders_days_file(scale, RANGE_DAYS) if scenario == "range" else orders_day_file(scale)
    data = pq.read_table(source)
    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    state: dict[str, Any] = {
        "contender": contender,
        "scenario": scenario,
        "level": level,
        "data": data,
        "root": root,
        "manager": io_manager(contender, root),
    }
    warmup = data.filter(pc.equal(data["order_date"], pa.scalar(DAY))).slice(0, 10)
    if level == "io":
        handler = state["handler"] = _handler(state)
        handler.handle_output(_output_context(state, ["warmup", "orders"]), warmup)
        if warm:
            handler.handle_output(_output_context(state, KEY), data)
        # Dagster builds the output context whichever IO manager is used: not timed.
        state["timed_context"] = _output_context(state, KEY)
    else:
        state["instance"] = dg.DagsterInstance.ephemeral()
        first = _materialize(state, _asset(["warmup", "orders"], "partition", warmup))
        assert first.success, "warm-up run failed"
        state["asset"] = _asset(KEY, scenario, data)
        if warm:
            assert _materialize(state, state["asset"]).success, "first run failed"
    state["version_before"] = _version(root)
    return state


def run(state: dict[str, Any]) -> dict[str, Any]:
    """The timed call: one handle_output, or one materialize run."""
    if state["level"] == "io":
        context = state["timed_context"]
        state["handler"].handle_output(context, state["data"])
        return {"failed": "", "proof": _proof(context.get_logged_metadata())}
    result = _materialize(state, state["asset"])
    if not result.success:
        return {"failed": _first_error_line(result), "proof": ""}
    event = result.get_asset_materialization_events()[0]
    materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
    return {"failed": "", "proof": _proof(materialization.metadata)}


def _proof(metadata: Any) -> str:
    """How ours proved a no-op (its ``no_op_proof`` metadata); the official has none."""
    value = (metadata or {}).get("no_op_proof")
    return str(getattr(value, "value", value) or "")


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
    """What the timed call did to the table, read after the timer stopped."""
    before, after = state["version_before"], _version(state["root"])
    metrics: dict[str, Any] = {}
    if after > before and before >= 0:
        path = str(state["root"] / "/".join(KEY))
        metrics = DeltaTable(path).history(1)[0].get("operationMetrics", {})
    return {
        "version_before": before,
        "version_after": after,
        "files_added": metrics.get("num_added_files", 0),
        "files_removed": metrics.get("num_removed_files", 0),
    }


def _outcome(stat: Stats, warm: bool) -> str:
    failed = stat.last("failed")
    if failed:
        return f"fails: {failed[:160]}"
    before, after = stat.last("version_before"), stat.last("version_after")
    if not warm:
        return f"created, version {after}"
    if after == before:
        proof = stat.last("proof")
        return f"no commit (version {after}" + (f", proven by {proof})" if proof else ")")
    return (
        f"commit {before} → {after} (+{stat.last('files_added')} / "
        f"−{stat.last('files_removed')} files)"
    )


def _spread(stat: Stats) -> str:
    low, high = stat.spread
    return f"{low:.3f}–{high:.3f}"


def run_family(scale: float, repetitions: int) -> tuple[str, dict[str, Any]]:
    """Every drop-in case, both contenders alternately; the report section and its numbers."""
    orders_day_file(scale)
    orders_days_file(scale, RANGE_DAYS)  # generated here, not inside a timed sample
    rows = int(pq.read_metadata(orders_day_file(scale)).num_rows)
    work = tempfile.mkdtemp(prefix="bench-dropin-")
    measured: dict[tuple[str, str, bool], dict[str, Stats]] = {}
    for scenario, level, warm in CASES:
        contenders = [
            Contender(
                name,
                prepare,
                run,
                (name, scenario, level, warm, scale, f"{work}/{scenario}-{level}-{int(warm)}-{i}"),
                verify,
            )
            for i, name in enumerate((OFFICIAL, OURS))
        ]
        measured[(scenario, level, warm)] = {s.name: s for s in compare(contenders, repetitions)}
    shutil.rmtree(work, ignore_errors=True)

    lines: list[list[Any]] = []
    numbers: dict[str, Any] = {"first": {}, "rerun": {}, "rerun_failed": {}, "committed": {}}
    for (scenario, level, warm), stats in measured.items():
        case = f"{LABELS[(scenario, level)]}, {'unchanged rerun' if warm else 'first write'}"
        base = stats[OFFICIAL]
        for name in (OFFICIAL, OURS):
            stat = stats[name]
            ratio = (
                "—"
                if base.last("failed") or stat.last("failed")
                else f"{stat.median / base.median:.2f}×"
            )
            lines.append(
                [case, name, stat.median, _spread(stat), ratio, stat.rss, _outcome(stat, warm)]
            )
            label = LABELS[(scenario, level)]
            numbers["rerun" if warm else "first"].setdefault(label, {})[name] = stat.median
            if warm:
                numbers["rerun_failed"].setdefault(label, {})[name] = stat.last("failed")
                numbers["committed"].setdefault(label, {})[name] = stat.last(
                    "version_after"
                ) != stat.last("version_before")
    md = [
        f"### D. dagster-deltalake's IO manager and ours, constructed alike (TPC-H orders "
        f"SF{scale:g}: {rows:,} rows as one day; the same rows as an unpartitioned table and "
        f"spread over {RANGE_DAYS} days by o_orderdate)",
        "",
        table(
            [
                "case",
                "contender",
                "median s",
                "min–max s",
                "× dagster-deltalake",
                "peak RSS MiB",
                "Delta table after the timed call",
            ],
            lines,
        ),
        "",
    ]
    md += _summary(numbers)
    return "\n".join(md), numbers


def _summary(numbers: dict[str, Any]) -> list[str]:
    out = []
    for label, first in numbers["first"].items():
        line = f"- {label}: first write {first[OURS] / first[OFFICIAL]:.2f}× dagster-deltalake's"
        rerun = numbers["rerun"].get(label, {})
        failed = numbers["rerun_failed"].get(label, {})
        if failed.get(OFFICIAL):
            line += (
                f"; its rerun fails (`{failed[OFFICIAL][:120]}`), ours takes "
                f"{rerun[OURS]:.3f} s and commits "
                f"{'a new version' if numbers['committed'][label][OURS] else 'nothing'}"
            )
        elif rerun:
            line += (
                f"; unchanged rerun {rerun[OURS] / rerun[OFFICIAL]:.1%} of its rewrite "
                f"({rerun[OURS]:.3f} s vs {rerun[OFFICIAL]:.3f} s)"
            )
        out.append(line + ".")
    return out + [""]


SHORT = {
    "one partition, IO manager": "partition\nIO manager",
    "one partition, dg.materialize": "partition\nmaterialize",
    "unpartitioned, IO manager": "unpartitioned\nIO manager",
    f"{RANGE_DAYS}-day single-run backfill, dg.materialize": f"{RANGE_DAYS}-day backfill\n"
    "materialize",
}


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for the plot: each case's first write and rerun (a failed run left out)."""
    groups: dict[str, dict[str, float]] = {}
    for label, first in numbers["first"].items():
        groups[f"{SHORT[label]}\nfirst write"] = dict(first)
        failed = numbers["rerun_failed"].get(label, {})
        rerun = {
            name: value
            for name, value in numbers["rerun"].get(label, {}).items()
            if not failed.get(name)
        }
        note = "".join(f"\n({name} fails)" for name, why in failed.items() if why)
        groups[f"{SHORT[label]}\nrerun{note}"] = rerun
    return groups
