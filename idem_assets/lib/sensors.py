"""Landing sensors: request a run when a source's day (or snapshot) appears or changes, once.

Every declared source gets one. Run keys name the content transition, so the same files
never trigger twice, a changed file triggers exactly one rerun, and A -> B -> A reruns.
Days before the source's first partition day (or after its last) are not partitions: the
sensor says so in its log and its skip reason instead of requesting a run Dagster would refuse.
"""

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from idem_assets.landing.contract import SourceContract
from idem_assets.landing.files import (
    Discovery,
    classify,
    day_folders,
    discover_snapshot,
    formats_of,
    listing_hint,
    signature_of,
)
from idem_assets.landing.store import LandingRoot
from idem_assets.resources import LakeResource

_CURSOR_VERSION = 3


def content_of(root: LandingRoot, found: Discovery) -> str | None:
    """What names a folder's content for run keys: the listing's ETags where they name the
    bytes (object stores: nothing is downloaded), else the files' sha256 signature."""
    if root.hints_name_content:
        return listing_hint(root, found)
    return signature_of(root, found)


def transition_run_key(scope: str, previous: str | None, current: str | None) -> str:
    """A run key naming the content change, so A→B→A still reruns while A→B runs once."""
    before = (previous or "none")[:16]
    after = (current or "none")[:16]
    return f"{scope}:{before}->{after}"


class LandingCursor:
    """Per day (listing hint, content), and the early (and late) days already reported.

    The listing hint (names, sizes, ETags or mtimes) is what a tick compares; content is
    looked at only for a day whose hint moved. A cursor of the previous version keeps its
    contents, so an upgrade requests nothing for unchanged days.
    """

    def __init__(self, raw: str | None) -> None:
        data = json.loads(raw) if raw else {}
        if data.get("v") == 2:  # (folder listing JSON, content signature) per day
            data["seen"] = {day: [None, pair[1]] for day, pair in data.get("seen", {}).items()}
            data["v"] = _CURSOR_VERSION
        if data.get("v") != _CURSOR_VERSION:
            data = {"v": _CURSOR_VERSION, "seen": {}, "early": []}
        self.seen: dict[str, list[str | None]] = data["seen"]
        self.early: list[str] = data.get("early", [])
        self.late: list[str] = data.get("late", [])

    def serialize(self) -> str:
        """JSON for ``context.update_cursor``."""
        data: dict[str, Any] = {"v": _CURSOR_VERSION, "seen": self.seen, "early": self.early}
        if self.late:  # only sources with a last partition day have late days
            data["late"] = self.late
        return json.dumps(data, sort_keys=True)


def landing_changes(
    root: LandingRoot,
    contract: SourceContract,
    cursor: LandingCursor,
    valid_keys: set[str],
    found: dict[dt.date, Discovery],
) -> Iterator[tuple[dt.date, str | None, str | None]]:
    """(day, previous content, new content) for every changed day that is a partition."""
    for day, discovery in sorted(found.items()):
        if day.isoformat() not in valid_keys:
            continue
        scope = day.isoformat()
        hint = listing_hint(root, discovery)
        previous_hint, previous = cursor.seen.get(scope) or [None, None]
        if hint == previous_hint:
            continue
        content = content_of(root, discovery)
        cursor.seen[scope] = [hint, content]
        if content != previous:
            yield day, previous, content


def listed_days(root: LandingRoot, contract: SourceContract) -> dict[dt.date, Discovery]:
    """Every day folder of a source with its readable files, from one listing of the source."""
    formats = formats_of(contract)
    found = {
        day: classify(folder, formats, contract.csv_suffixes)
        for day, folder in day_folders(root, contract).items()
    }
    return {day: discovery for day, discovery in found.items() if discovery.files}


def _shown(days: Sequence[dt.date]) -> str:
    return ", ".join(d.isoformat() for d in days[:5]) + (
        f" and {len(days) - 5} more" if len(days) > 5 else ""
    )


# Landing days outside a source's partitions: (the cursor's list of them, which bound, the
# declaration field that moves it).
_OUTSIDE = {
    "early": ("before the first partition day", "first_day"),
    "late": ("after the last partition day", "last_day"),
}


def outside_days(contract: SourceContract, days: Sequence[dt.date]) -> dict[str, list[dt.date]]:
    """The landing days before the first and after the last partition day, by side."""
    return {
        "early": [d for d in days if contract.before_first_day(d)],
        "late": [d for d in days if contract.after_last_day(d)],
    }


def outside_days_message(contract: SourceContract, side: str, days: Sequence[dt.date]) -> str:
    """What the sensor says about landing days on one ``side`` of the partitions."""
    where, field = _OUTSIDE[side]
    return (
        f"{contract.name}: landing day(s) {_shown(days)} are {where} "
        f"{getattr(contract, field)} and are not loaded; set {field} in the source's "
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
        root = lake.landing()
        found = listed_days(root, contract)
        days = sorted(found)
        requests = [
            dg.RunRequest(
                run_key=transition_run_key(f"{contract.name}/{day.isoformat()}", previous, content),
                partition_key=day.isoformat(),
                asset_selection=list(assets),
                tags={"idem/trigger": "landing", "idem/source": contract.name},
            )
            for day, previous, content in landing_changes(root, contract, cursor, valid_keys, found)
        ]
        reported = []
        for side, outside in outside_days(contract, days).items():
            if not outside:
                continue
            message = outside_days_message(contract, side, outside)
            shown = [d.isoformat() for d in outside]
            if shown != getattr(cursor, side):
                context.log.warning(message)
                setattr(cursor, side, shown)
            reported.append(message)
        skip = None if requests or not reported else "; ".join(reported)
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
        root = lake.landing()
        found = discover_snapshot(root, contract)
        current = content_of(root, found) if found.files else None
        if current is None or current == previous:
            return dg.SensorResult(run_requests=[], cursor=previous)
        request = dg.RunRequest(
            run_key=transition_run_key(contract.name, previous, current),
            asset_selection=list(assets),
            tags={"idem/trigger": "landing", "idem/source": contract.name},
        )
        return dg.SensorResult(run_requests=[request], cursor=current)

    return _sensor
