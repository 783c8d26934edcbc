"""Landing sensors: request a run when a day's files appear or change, exactly once."""


import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from idem_assets.defs.automation.jobs import catalog_job, daily_lake_job
from idem_assets.landing.contract import CUSTOMERS, EVENTS, FILE_SUFFIXES, ORDERS, PRODUCT_CATALOG
from idem_assets.landing.reader import day_signature, list_days, snapshot_signature
from idem_assets.partitions import DAILY_PARTITIONS
from idem_assets.resources import LakeResource

# Which assets a change in a source's files makes stale.
ASSETS_BY_SOURCE: dict[str, list[dg.AssetKey]] = {
    ORDERS.name: [dg.AssetKey("orders"), dg.AssetKey("daily_sales")],
    CUSTOMERS.name: [dg.AssetKey("customers")],
    EVENTS.name: [dg.AssetKey("events")],
}
_CONTRACTS = (ORDERS, CUSTOMERS, EVENTS)
_CURSOR_VERSION = 1


def folder_stat(folder: Path) -> str:
    """Cheap listing signature (names, sizes, mtimes); content is hashed only if it moves."""
    if not folder.is_dir():
        return ""
    entries = sorted(
        (e.name, e.stat().st_size, e.stat().st_mtime_ns)
        for e in os.scandir(folder)
        if e.is_file() and e.name.endswith(FILE_SUFFIXES)
    )
    return json.dumps(entries)


def transition_run_key(scope: str, previous: str | None, current: str | None) -> str:
    """A run key naming the content change, so A→B→A still reruns while A→B runs once."""
    before = (previous or "none")[:16]
    after = (current or "none")[:16]
    return f"{scope}:{before}->{after}"


class LandingCursor:
    """Per source-day (listing signature, content signature), kept in the sensor cursor."""

    def __init__(self, raw: str | None) -> None:
        data = json.loads(raw) if raw else {}
        if data.get("v") != _CURSOR_VERSION:
            data = {"v": _CURSOR_VERSION, "seen": {}}
        self.seen: dict[str, list[str | None]] = data["seen"]

    def serialize(self) -> str:
        """JSON for ``context.update_cursor``."""
        return json.dumps({"v": _CURSOR_VERSION, "seen": self.seen}, sort_keys=True)


def landing_changes(
    landing_dir: Path, cursor: LandingCursor, valid_keys: set[str]
) -> Iterator[tuple[str, dt.date, str | None, str | None]]:
    """(source, day, previous content, new content) for every changed source-day."""
    for contract in _CONTRACTS:
        for day in list_days(landing_dir, contract):
            if day.isoformat() not in valid_keys:
                continue
            scope = f"{contract.name}/{day.isoformat()}"
            stat = folder_stat(contract.day_dir(landing_dir, day))
            previous_stat, previous = (cursor.seen.get(scope) or [None, None])
            if stat == previous_stat:
                continue
            content = day_signature(landing_dir, contract, day)
            cursor.seen[scope] = [stat, content]
            if content != previous:
                yield contract.name, day, previous, content


@dg.sensor(
    job=daily_lake_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Requests the daily lake job for each (source, day) whose landing files "
    "appeared or changed. Run keys name the content transition, so the same files never "
    "trigger twice and a changed file triggers exactly one rerun.",
)
def landing_sensor(
    context: dg.SensorEvaluationContext, lake: LakeResource
) -> dg.SensorResult:
    """Run requests for new or changed landing days."""
    cursor = LandingCursor(context.cursor)
    valid_keys = set(DAILY_PARTITIONS.get_partition_keys())
    requests = [
        dg.RunRequest(
            run_key=transition_run_key(f"{source}/{day.isoformat()}", previous, content),
            partition_key=day.isoformat(),
            asset_selection=ASSETS_BY_SOURCE[source],
            tags={"idem/trigger": "landing", "idem/source": source},
        )
        for source, day, previous, content in landing_changes(
            lake.landing_path, cursor, valid_keys
        )
    ]
    return dg.SensorResult(run_requests=requests, cursor=cursor.serialize())


@dg.sensor(
    job=catalog_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Requests a catalog refresh when the newest catalog snapshot changes.",
)
def catalog_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
    """A run request when the product catalog snapshot content changes."""
    previous = context.cursor or None
    current = snapshot_signature(lake.landing_path, PRODUCT_CATALOG)
    if current is None or current == previous:
        return dg.SensorResult(run_requests=[], cursor=previous)
    request = dg.RunRequest(
        run_key=transition_run_key(PRODUCT_CATALOG.name, previous, current),
        tags={"idem/trigger": "landing", "idem/source": PRODUCT_CATALOG.name},
    )
    return dg.SensorResult(run_requests=[request], cursor=current)
