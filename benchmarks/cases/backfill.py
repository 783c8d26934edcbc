"""Case 5: a single-run backfill of 30 days vs 30 per-partition runs, through Dagster.

Both run the real daily job (orders, customers, events, daily_sales and their checks)
on the same generated landing data. Dagster's own per-run cost is measured with a
trivial partitioned asset run the same way.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.data import DATA_DIR
from benchmarks.harness import TIMING_HEADERS, Contender, compare, table, timing_rows

START = dt.date(2024, 3, 1)


def landing(days: int, scale: float) -> Path:
    """Generated landing data, cached."""
    from idem_assets.sample.generator import generate

    path = DATA_DIR / f"landing-{days}d-x{scale:g}"
    if not path.exists():
        generate(path, START, days, seed=7, scale=scale)
    return path


def prepare(days: int, scale: float, workdir: str) -> dict[str, Any]:
    """Definitions over a fresh lake; the landing data is shared and read-only."""
    import dagster as dg

    from idem_assets.definitions import build_definitions
    from idem_assets.lib.resources import default_resources
    from idem_assets.resources import CheckpointResource, LakeResource, NotificationResource

    root = Path(workdir)
    shutil.rmtree(root, ignore_errors=True)
    lake = LakeResource(landing_dir=str(landing(days, scale)), lake_dir=str(root / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{root / 'state.db'}")
    notifier = NotificationResource(base_url="http://127.0.0.1:9", token="unused")
    defs = build_definitions(default_resources(lake, checkpoint, notifier))
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    return {
        "job": defs.resolve_job_def("daily_lake_job"),
        "days": days,
        "quiet": quiet,
        "instance": dg.DagsterInstance.ephemeral(),
    }


def keys(days: int) -> list[str]:
    """Partition keys of the range."""
    return [(START + dt.timedelta(days=i)).isoformat() for i in range(days)]


def run_single(state: dict[str, Any]) -> dict[str, Any]:
    """One run for the whole range."""
    days = keys(state["days"])
    result = state["job"].execute_in_process(
        instance=state["instance"],
        run_config=state["quiet"],
        tags={
            "dagster/asset_partition_range_start": days[0],
            "dagster/asset_partition_range_end": days[-1],
        },
    )
    assert result.success
    return {"runs": 1}


def run_each(state: dict[str, Any]) -> dict[str, Any]:
    """One run per partition."""
    for key in keys(state["days"]):
        result = state["job"].execute_in_process(
            partition_key=key, instance=state["instance"], run_config=state["quiet"]
        )
        assert result.success
    return {"runs": state["days"]}


def prepare_trivial(runs: int) -> dict[str, Any]:
    """A partitioned asset that does nothing, to time Dagster's own per-run work."""
    import dagster as dg

    partitions = dg.DailyPartitionsDefinition(start_date=START.isoformat())

    @dg.asset(partitions_def=partitions)
    def nothing() -> None:
        return None

    job = dg.Definitions(assets=[nothing]).resolve_implicit_global_asset_job_def()
    return {
        "job": job,
        "runs": runs,
        "instance": dg.DagsterInstance.ephemeral(),
        "quiet": {"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
    }


def run_trivial(state: dict[str, Any]) -> dict[str, Any]:
    """``runs`` trivial runs."""
    for key in keys(state["runs"]):
        state["job"].execute_in_process(
            partition_key=key, instance=state["instance"], run_config=state["quiet"]
        )
    return {"runs": state["runs"]}


def run(days: int, scale: float, repetitions: int) -> tuple[str, dict[str, Any]]:
    """Case 5."""
    landing(days, scale)
    work = tempfile.mkdtemp(prefix="bench-backfill-")
    stats = compare(
        [
            Contender(f"{days} per-partition runs", prepare, run_each, (days, scale, f"{work}/a")),
            Contender("single-run backfill", prepare, run_single, (days, scale, f"{work}/b")),
            Contender(f"{days} trivial Dagster runs", prepare_trivial, run_trivial, (days,)),
        ],
        repetitions,
    )
    shutil.rmtree(work, ignore_errors=True)
    each, single, trivial = (s.median for s in stats)
    md = [
        f"### 5. Backfill of {days} days (orders, customers, events, daily_sales + checks; "
        f"landing scale ×{scale:g})",
        "",
        table(TIMING_HEADERS, timing_rows(stats, f"{days} per-partition runs")),
        "",
        f"- per partition: {each / days:.2f} s as separate runs, {single / days:.2f} s inside "
        "one backfill run.",
        f"- Dagster's own cost per run (trivial asset): {trivial / days:.2f} s; "
        f"separate runs spend about {(each - single) / days:.2f} s more per partition.",
        "",
    ]
    return "\n".join(md), {s.name: s.median for s in stats}
