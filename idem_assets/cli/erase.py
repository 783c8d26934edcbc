"""``idem-assets erase``: erase a key from every lake table that declares it, for good.

``idem-assets erase --key customer_id=42 [--tables customers,orders]`` records the key in
the erasure ledger first (so a write starting from then on leaves it out), then removes its
rows from each table whose declaration lists the column in ``erasable_keys`` (and from the
tables kept beside it: a merge's tombstones), one commit per table, and prints what it did
and which data files still hold the key on storage until vacuum's retention passes
(``lake_maintenance_job`` deletes them then). ``idem-assets erase --status`` prints the
ledger and the files still holding each key. Erasing a key again is a no-op that reports
the same. Keys are printed and committed by digest (``key_digest``), never by value.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasure import Erasure, ErasureLedger
from idem_assets.io_manager.erasure import StorageScan, scan_storage
from idem_assets.lake import LakeTable
from idem_assets.lake.changes import OFFSETS_SCOPE
from idem_assets.lake.erasure import (
    CHANGE_DATA,
    CURRENT,
    REMOVED,
    UNLOGGED,
    ErasedFrom,
    ErasureVacuum,
    erase_key,
    satellites,
    vacuum_erased,
)
from idem_assets.landing.erasure import erase_from_quarantine
from idem_assets.landing.quarantine import QUARANTINE_TABLE
from idem_assets.resources import CheckpointResource, LakeResource

_log = logging.getLogger(__name__)


class EraseError(ValueError):
    """A usage error: a malformed key, an unknown table, a column no table declares."""


def parse_key(text: str) -> tuple[str, str]:
    """``column=value`` -> (column, value)."""
    column, sep, value = text.partition("=")
    if not sep or not column.strip() or value == "":
        raise EraseError(f"--key takes column=value (e.g. customer_id=42), got {text!r}")
    return column.strip(), value


@contextmanager
def bound_resources(defs: dg.Definitions) -> Iterator[tuple[LakeResource, CheckpointResource]]:
    """The code location's lake and checkpoint resources, configured (environment read)."""
    resources = defs.resources or {}
    missing = [name for name in ("lake", "checkpoint") if name not in resources]
    if missing:
        raise EraseError(f"the code location has no {' or '.join(missing)} resource")
    with dg.build_resources(
        {"lake": resources["lake"], "checkpoint": resources["checkpoint"]}
    ) as built:
        yield built.lake, built.checkpoint


@dataclass(frozen=True)
class Erasing:
    """What one ``erase`` did: the ledger entry, each table's outcome, and the scan of
    storage after it."""

    erasure: Erasure
    done: Mapping[str, ErasedFrom]  # by table name
    scan: StorageScan


def erase(
    lake: LakeResource,
    store: CheckpointStore,
    declared: Mapping[str, tuple[str, ...]],
    column: str,
    value: str,
    tables: Iterable[str] | None = None,
    *,
    sources: Mapping[str, tuple[str, ...]] | None = None,
) -> Erasing:
    """Record the key, then delete its rows from the tables declaring ``column`` (and the
    quarantine rows of the landing ``sources`` declaring it: source -> erasable columns)."""
    names = sorted(name for name, keys in declared.items() if column in keys)
    if tables is not None:
        wanted = list(tables)
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise EraseError(
                f"not lake tables declaring {column} as an erasable key: {', '.join(unknown)} "
                f"(those that do: {', '.join(names) or 'none'})"
            )
        names = sorted(wanted)
    if not names:
        raise EraseError(f"no lake table declares {column} in erasable_keys")
    ledger = ErasureLedger(store)
    erasure = ledger.record(column, value)
    done = {}
    for name in names:
        target = lake.table(name)
        for table in (target, *(t for t in satellites(target) if t.exists())):
            done[name + table.uri[len(target.uri) :]] = erase_key(
                table, column, value, {"idem.erase": "1"}
            )
    quarantined = {name: keys for name, keys in (sources or {}).items() if column in keys}
    if quarantined and tables is None:
        done[QUARANTINE_TABLE] = erase_from_quarantine(
            lake.table(QUARANTINE_TABLE), column, value, quarantined, {"idem.erase": "1"}
        )
    erasure = ledger.note(erasure, done)
    scan = scan_storage(ledger, lake.table, declared, sources, [*names, QUARANTINE_TABLE])
    return Erasing(_entry(scan, erasure), done, scan)


def erase_report(erasing: Erasing) -> str:
    """What an erase did, table by table, and what still holds the key (by digest only)."""
    lines = [f"erased key {erasing.erasure.digest} ({erasing.erasure.column})"]
    for name, item in erasing.done.items():
        if item.version is None:
            lines.append(f"  {name}: no row holds it")
        else:
            lines.append(f"  {name}: {item.rows_deleted} row(s) deleted in version {item.version}")
    lines.extend(_held_lines(erasing.scan, erasing.erasure))
    lines.append(_scan_line(erasing.scan))
    return "\n".join(lines)


def erasure_status(
    ledger: ErasureLedger,
    lake: LakeResource,
    declared: Mapping[str, tuple[str, ...]],
    sources: Mapping[str, tuple[str, ...]] | None = None,
) -> str:
    """Every erased key (by digest), each data file on storage still holding it, and when
    it was fully gone."""
    if not ledger.entries():
        return "no key has been erased"
    scan = scan_storage(ledger, lake.table, declared, sources)
    lines = []
    for entry in scan.entries:
        tables = ", ".join(sorted(entry.tables)) or "no table"
        lines.append(
            f"{entry.digest} ({entry.column}): erased from {tables} at {_at(entry.erased_at)}"
        )
        lines.extend(_held_lines(scan, entry))
    lines.append(_scan_line(scan))
    return "\n".join(lines)


@dataclass(frozen=True)
class VacuumedNow:
    """What ``vacuum_now`` did: each table's vacuum, and the scan after it."""

    vacuums: Mapping[str, ErasureVacuum]
    behind: Mapping[str, list[str]]  # table -> change-feed consumers that had not read it all
    scan: StorageScan


def vacuum_now(
    lake: LakeResource,
    store: CheckpointStore,
    declared: Mapping[str, tuple[str, ...]],
    sources: Mapping[str, tuple[str, ...]] | None = None,
) -> VacuumedNow:
    """Delete now, overriding the retention, what still holds an erased key in the tables
    declaring its column (see ``lake.erasure.vacuum_erased`` for what goes and the risk),
    then scan again: the ledger records when each key was fully gone."""
    ledger = ErasureLedger(store)
    before = scan_storage(ledger, lake.table, declared, sources)
    vacuums, behind = {}, {}
    for name, scan in before.tables.items():
        if not any(f.kind != CURRENT for f in scan.held):
            continue
        target = lake.table(name)
        late = _consumers_behind(store, target)
        if late and any(f.kind == CHANGE_DATA for f in scan.held):
            behind[name] = late
        _log.warning(
            "erasure vacuum of %s: the retention is overridden; readers of earlier versions "
            "and time travel to them lose their files",
            name,
        )
        vacuums[name] = vacuum_erased(target, scan, store.now())
    after = scan_storage(ledger, lake.table, declared, sources)
    return VacuumedNow(vacuums, behind, after)


def vacuum_report(done: VacuumedNow) -> str:
    """What ``vacuum_now`` deleted, the risk it took, and what still holds a key."""
    if not done.vacuums:
        lines = ["no removed, change-data or unlogged file held an erased key: nothing to vacuum"]
    else:
        lines = [
            "retention overridden for the tables below: time travel to their earlier "
            "versions, and readers still on one, lose their files"
        ]
    for name, vacuum in done.vacuums.items():
        lines.append(
            f"  {name}: vacuumed {len(vacuum.vacuumed)} removed file(s), deleted "
            f"{len(vacuum.deleted)} change-data or unlogged file(s) holding an erased key"
        )
        for consumer in done.behind.get(name, ()):
            lines.append(
                f"    change-feed consumer {consumer!r} had not read every version: the "
                "deleted change data of those versions can no longer be read by it"
            )
    for entry in done.scan.entries:
        lines.append(f"{entry.digest} ({entry.column}):")
        lines.extend(_held_lines(done.scan, entry))
    lines.append(_scan_line(done.scan))
    return "\n".join(lines)


def _entry(scan: StorageScan, erasure: Erasure) -> Erasure:
    return next((e for e in scan.entries if e.digest == erasure.digest), erasure)


def _consumers_behind(store: CheckpointStore, target: LakeTable) -> list[str]:
    """Change-feed consumers of ``target`` that have not acknowledged its newest version."""
    table = target.open()
    newest = -1 if table is None else table.version()
    return sorted(
        memo.key
        for memo in store.memos_in(OFFSETS_SCOPE).values()
        if memo.stamp == target.uri and int(memo.value.get("acknowledged", -1)) < newest
    )


_KINDS = {
    CURRENT: "current (erase again: `idem-assets erase --key`)",
    REMOVED: "removed by a commit, kept for time travel until vacuum's retention passes",
    CHANGE_DATA: "change data, kept until vacuum's retention passes",
    UNLOGGED: "added by no commit (a failed write's), deleted by vacuum after the retention",
}


def _held_lines(scan: StorageScan, erasure: Erasure) -> list[str]:
    holding = scan.holding(erasure)
    if not holding:
        gone = f" (since {_at(erasure.gone_at)})" if erasure.gone_at is not None else ""
        return [f"  no data file holds it any more{gone}"]
    lines = []
    for name, files in holding.items():
        lines.append(f"  {name}: {len(files)} data file(s) hold it")
        for held in files:
            lines.append(f"    {held.path}  [{_KINDS[held.kind]}]")
    lines.append(
        "  lake_maintenance_job deletes the removed and change-data files once vacuum's "
        "retention passes; `idem-assets erase --vacuum-now` deletes them now"
    )
    return lines


def _scan_line(scan: StorageScan) -> str:
    files = sum(s.files for s in scan.tables.values())
    decided = sum(s.by_statistics for s in scan.tables.values())
    read = sum(s.read for s in scan.tables.values())
    return (
        f"scanned {files} data file(s) of {len(scan.tables)} table(s): {decided} ruled out by "
        f"statistics, {read} read"
    )


def _at(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")
