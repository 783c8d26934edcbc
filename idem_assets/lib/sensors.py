"""Landing sensors: request a run when a source's day (or snapshot) appears or changes, once.

Every declared source gets one. Run keys name the content transition, so the same files
never trigger twice, a changed file triggers exactly one rerun, and A -> B -> A reruns.
Days before the source's first partition day are not partitions: the sensor says so in
its log and its skip reason instead of requesting a run Dagster would refuse.
"""

import datetime as dt
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from idem_assets.landing import day_signature, list_days, snapshot_signature
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.files import file_format, is_hidden
from idem_assets.resources import LakeResource

_CURSOR_VERSION = 2


def folder_stat(folder: Path, contract: SourceContract) -> str:
    """Cheap listing signature (names, sizes, mtimes); content is hashed only if it moves."""
    if not folder.is_dir():
        return ""
    entries = sorted(
        (e.name, e.stat().st_size, e.stat().st_mtime_ns)
        for e in os.scandir(folder)
        if e.is_file() and not is_hidden(e.name) and file_format(Path(e.path)) in contract.formats
    )
    return json.dumps(entries)


def transition_run_key(scope: str, previous: str | None, current: str | None) -> str:
    """A run key naming the content change, so A→B→A still reruns while A→B runs once."""
    before = (previous or "none")[:16]
    after = (current or "none")[:16]
    return f"{scope}:{before}->{after}"


class LandingCursor:
    """Per day (listing signature, content signature), and the early days already reported."""

    def __init__(self, raw: str | None) -> None:
        data = json.loads(raw) if raw else {}
        if data.get("v") != _CURSOR_VERSION:
            data = {"v": _CURSOR_VERSION, "seen": {}, "early": []}
        self.seen: dict[str, list[str | None]] = data["seen"]
        self.early: list[str] = data.get("early", [])

    def serialize(self) -> str:
        """JSON for ``context.update_cursor``."""
        return json.dumps(
            {"v": _CURSOR_VERSION, "seen": self.seen, "early": self.early}, sort_keys=True
        )


def landing_changes(
    landing_dir: Path,
    contract: SourceContract,
    cursor: LandingCursor,
    valid_keys: set[str],
    days: Sequence[dt.date] | None = None,
) -> Iterator[tuple[dt.date, str | None, str | None]]:
    """(day, previous content, new content) for every changed day that is a partition."""
    for day in list_days(landing_dir, contract) if days is None else days:
        if day.isoformat() not in valid_keys:
            continue
        scope = day.isoformat()
        stat = folder_stat(contract.day_dir(landing_dir, day), contract)
        previous_stat, previous = cursor.seen.get(scope) or [None, None]
        if stat == previous_stat:
            continue
        content = day_signature(landing_dir, contract, day)
        cursor.seen[scope] = [stat, content]
        if content != previous:
            yield day, previous, content


def early_days_message(contract: SourceContract, days: Sequence[dt.date]) -> str:
    """What the sensor says about landing days before the first partition day."""
    shown = ", ".join(d.isoformat() for d in days[:5]) + (
        f" and {len(days) - 5} more" if len(days) > 5 else ""
    )
    return (
        f"{contract.name}: landing day(s) {shown} are before the first partition day "
        f"{contract.first_day} and are not loaded; set first_day in the source's "
        "declaration to load them"
    )


def _landing_sensor(
    contract: SourceContract, assets: Sequence[dg.AssetKey], interval: int, when: str
) -> Any:
    """``@dg.sensor`` for a source's landing sensor (stopped until turned on)."""
    names = ", ".join(a.to_user_string() for a in assets)
    return dg.sensor(
        name=f"{contract.name}_landing_sensor",
        asset_selection=dg.AssetSelection.assets(*assets),
        minimum_interval_seconds=interval,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=f"Requests {names} {when}. Run keys name the content transition, so the "
        "same files never trigger twice and a changed file triggers exactly one rerun.",
    )


def daily_landing_sensor(
    contract: SourceContract,
    partitions_def: dg.PartitionsDefinition,
    assets: Sequence[dg.AssetKey],
    minimum_interval_seconds: int = 30,
) -> dg.SensorDefinition:
    """A sensor requesting ``assets`` for each day of ``contract`` whose files changed."""

    @_landing_sensor(
        contract,
        assets,
        minimum_interval_seconds,
        f"for each day whose {contract.name} landing files appeared or changed",
    )
    def _sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
        cursor = LandingCursor(context.cursor)
        valid_keys = set(partitions_def.get_partition_keys())
        days = list_days(lake.landing_path, contract)
        requests = [
            dg.RunRequest(
                run_key=transition_run_key(f"{contract.name}/{day.isoformat()}", previous, content),
                partition_key=day.isoformat(),
                asset_selection=list(assets),
                tags={"idem/trigger": "landing", "idem/source": contract.name},
            )
            for day, previous, content in landing_changes(
                lake.landing_path, contract, cursor, valid_keys, days
            )
        ]
        early = [d for d in days if contract.before_first_day(d)]
        skip = None
        if early:
            message = early_days_message(contract, early)
            if [d.isoformat() for d in early] != cursor.early:
                context.log.warning(message)
                cursor.early = [d.isoformat() for d in early]
            skip = None if requests else message
        return dg.SensorResult(run_requests=requests, cursor=cursor.serialize(), skip_reason=skip)

    return _sensor


def snapshot_landing_sensor(
    contract: SourceContract,
    assets: Sequence[dg.AssetKey],
    minimum_interval_seconds: int = 60,
) -> dg.SensorDefinition:
    """A sensor requesting ``assets`` when the newest snapshot's content changes."""

    @_landing_sensor(
        contract,
        assets,
        minimum_interval_seconds,
        f"when the newest {contract.name} snapshot's content changes",
    )
    def _sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
        previous = context.cursor or None
        current = snapshot_signature(lake.landing_path, contract)
        if current is None or current == previous:
            return dg.SensorResult(run_requests=[], cursor=previous)
        request = dg.RunRequest(
            run_key=transition_run_key(contract.name, previous, current),
            asset_selection=list(assets),
            tags={"idem/trigger": "landing", "idem/source": contract.name},
        )
        return dg.SensorResult(run_requests=[request], cursor=current)

    return _sensor
