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

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasures import Erasure, ErasureLedger
from idem_assets.io_manager import WriteSpec
from idem_assets.lake.erasure import ErasedFrom, erase_key, satellites
from idem_assets.resources import CheckpointResource, LakeResource


class EraseError(ValueError):
    """A usage error: a malformed key, an unknown table, a column no table declares."""


def parse_key(text: str) -> tuple[str, str]:
    """``column=value`` -> (column, value)."""
    column, sep, value = text.partition("=")
    if not sep or not column.strip() or value == "":
        raise EraseError(f"--key takes column=value (e.g. customer_id=42), got {text!r}")
    return column.strip(), value


def erasable_tables(defs: dg.Definitions) -> dict[str, tuple[str, ...]]:
    """Each lake table of ``defs`` that declares erasable keys, and those columns."""
    found: dict[str, tuple[str, ...]] = {}
    for item in defs.assets or ():
        specs = item.specs if isinstance(item, dg.AssetsDefinition) else [item]
        for spec in specs:
            if not isinstance(spec, dg.AssetSpec) or "idem/strategy" not in spec.metadata:
                continue
            write = WriteSpec.from_metadata(spec.metadata)
            if write.erasable_keys:
                found[write.table or "/".join(spec.key.path)] = write.erasable_keys
    return found


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
class Erased:
    """What one ``erase`` did: the ledger entry and each table's outcome."""

    erasure: Erasure
    done: Mapping[str, ErasedFrom]  # by table name
    still_held: Mapping[str, list[str]]


def erase(
    lake: LakeResource,
    store: CheckpointStore,
    declared: Mapping[str, tuple[str, ...]],
    column: str,
    value: str,
    tables: Iterable[str] | None = None,
) -> Erased:
    """Record the key, then delete its rows from the tables declaring ``column``."""
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
    erasure = ledger.note(erasure, done)
    return Erased(erasure, done, ledger.still_holding(erasure, lake.table))


def erase_report(erased: Erased) -> str:
    """What an erase did, table by table (the key by digest only)."""
    lines = [f"erased key {erased.erasure.digest} ({erased.erasure.column})"]
    for name, item in erased.done.items():
        if item.version is None:
            lines.append(f"  {name}: no row holds it")
        else:
            lines.append(f"  {name}: {item.rows_deleted} row(s) deleted in version {item.version}")
    lines.extend(_held_lines(erased.still_held))
    return "\n".join(lines)


def erasure_status(ledger: ErasureLedger, lake: LakeResource) -> str:
    """Every erased key (by digest) and the files still holding it."""
    entries = ledger.entries()
    if not entries:
        return "no key has been erased"
    lines = []
    for entry in entries:
        held = ledger.still_holding(entry, lake.table)
        tables = ", ".join(sorted(entry.tables)) or "no table"
        lines.append(f"{entry.digest} ({entry.column}): erased from {tables}")
        lines.extend(_held_lines(held))
    return "\n".join(lines)


def _held_lines(held: Mapping[str, list[str]]) -> list[str]:
    if not held:
        return ["  no data file holds it any more"]
    return [
        f"  {name}: {len(files)} removed data file(s) still hold it until vacuum's retention "
        "passes (lake_maintenance_job then deletes them)"
        for name, files in held.items()
    ]
