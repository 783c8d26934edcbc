"""Erased keys kept out of an output before it is written, whatever kind of rows it holds.

The one place a write applies the erasure ledger: tables (pyarrow, polars, pandas),
record-batch streams and Spark DataFrames (filtered by the executors) alike, whether an
``idem/strategy`` or one of dagster-delta's modes writes them. Only the columns the output
declares erasable (``idem/erasable_keys``) are filtered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasure import Erasure, ErasureLedger
from idem_assets.io_manager.output import TableOutput, is_spark_frame, is_stream
from idem_assets.io_manager.spec import LANDING_SOURCE, WriteSpec
from idem_assets.lake.erasure import Erased, FileScan, HeldFile, files_holding, satellites
from idem_assets.lake.fingerprint import Fingerprint, fingerprint
from idem_assets.lake.frames import to_arrow
from idem_assets.lake.tables import LakeTable
from idem_assets.landing.quarantine import QUARANTINE_TABLE
from idem_assets.landing.quarantine_scan import quarantine_files_holding


@dataclass(frozen=True)
class Filtered:
    """An output without the rows holding an erased key, and what was taken out."""

    output: TableOutput
    # Rows taken out (None: the engine does not count them, a stream or a Spark DataFrame).
    removed: int | None
    # Their fingerprint, when rows of a table were taken out: the output as the asset gave
    # it is ``fingerprint(kept).plus(removed_fingerprint)`` (what an append is named by).
    removed_fingerprint: Fingerprint | None = None

    @classmethod
    def untouched(cls, output: TableOutput) -> Filtered:
        """An output nothing was taken out of."""
        return cls(output, 0)


def erased_for(columns: Sequence[str], store: CheckpointStore) -> Erased:
    """The erased keys of the erasable ``columns`` (none declared: nothing is read)."""
    if not columns:
        return Erased()
    return ErasureLedger(store).erased(columns)


def without_erased(output: TableOutput, erased: Erased) -> Filtered:
    """``output`` without the rows holding an erased key, and what was taken out."""
    rows: Any = output.rows
    if not erased or rows is None:
        return Filtered.untouched(output)
    if is_spark_frame(rows):
        from idem_assets.spark.erasure import without_erased_spark

        filtered: Any = without_erased_spark(rows, erased)
        return Filtered(TableOutput(filtered, output.input_signature, output.schema), None)
    if is_stream(rows):
        streamed = _stream(rows, erased)
        return Filtered(TableOutput(streamed, output.input_signature, output.schema), None)
    table = to_arrow(rows)
    kept, removed = erased.without(table)
    if not removed:
        return Filtered.untouched(output)
    taken = table.filter(erased.held(table))
    return Filtered(
        TableOutput(kept, output.input_signature, output.schema), removed, fingerprint(taken)
    )


def _stream(reader: Any, erased: Erased) -> Any:
    import pyarrow as pa  # here, not at import: see idem_assets._lazy

    return pa.RecordBatchReader.from_batches(
        reader.schema, erased.of(reader.schema.names).without_batches(reader)
    )


def _erasable_specs(defs: dg.Definitions) -> Iterator[tuple[dg.AssetSpec, tuple[str, ...]]]:
    """Each asset spec of ``defs`` declaring erasable keys, and those columns: read from
    ``idem/erasable_keys`` as the IO manager reads it, whether the asset is written by an
    ``idem/strategy`` or in one of dagster-delta's modes."""
    for item in defs.assets or ():
        specs = item.specs if isinstance(item, dg.AssetsDefinition) else [item]
        for spec in specs:
            if isinstance(spec, dg.AssetSpec):
                keys = WriteSpec.erasable_keys_in(spec.metadata)
                if keys:
                    yield spec, keys


def erasable_tables(defs: dg.Definitions) -> dict[str, tuple[str, ...]]:
    """Each lake table of ``defs`` that declares erasable keys, and those columns."""
    return {
        WriteSpec.table_in(spec.metadata) or "/".join(spec.key.path): keys
        for spec, keys in _erasable_specs(defs)
    }


def erasable_sources(defs: dg.Definitions) -> dict[str, tuple[str, ...]]:
    """Each landing source (``idem/landing_source``) of an asset declaring erasable keys,
    and those columns: the quarantine rows of that source can hold them."""
    found: dict[str, set[str]] = {}
    for spec, keys in _erasable_specs(defs):
        source = spec.metadata.get(LANDING_SOURCE)
        source = getattr(source, "value", source)
        if isinstance(source, str):
            found.setdefault(source, set()).update(keys)
    return {source: tuple(sorted(keys)) for source, keys in found.items()}


@dataclass(frozen=True)
class StorageScan:
    """One scan of storage for every erased key: each table's files, and each key's ledger
    entry as the scan left it."""

    tables: Mapping[str, FileScan]  # by table name (satellites as <table><suffix>)
    entries: tuple[Erasure, ...]

    def holding(self, erasure: Erasure) -> dict[str, list[HeldFile]]:
        """Table name -> the files holding ``erasure``'s key."""
        out: dict[str, list[HeldFile]] = {}
        for name, scan in self.tables.items():
            files = [f for f in scan.held if erasure.digest in f.keys]
            if files:
                out[name] = files
        return out


def scan_storage(
    ledger: ErasureLedger,
    locate: Callable[[str], LakeTable],
    declared: Mapping[str, tuple[str, ...]],
    sources: Mapping[str, tuple[str, ...]] | None = None,
    names: Iterable[str] | None = None,
) -> StorageScan:
    """Scan storage for every erased key: each table of ``declared`` (name -> erasable
    columns; ``locate`` finds a table by name) and the tables kept beside it, and the shared
    quarantine table for the rows of ``sources`` (landing source -> erasable columns), each
    once for all its keys. Each key's ledger entry records what was found and when the key
    was fully gone. ``names`` limits the scan to those tables."""
    erased = ledger.erased()
    scans: dict[str, FileScan] = {}
    columns: dict[str, set[str]] = {}  # scanned table -> the columns it declares
    for name in sorted(names if names is not None else declared):
        wanted = erased.of(declared.get(name, ()))
        if not wanted:
            continue
        target = locate(name)
        for table in (target, *(t for t in satellites(target) if t.exists())):
            scanned = name + table.uri[len(target.uri) :]
            scans[scanned] = files_holding(table, wanted)
            columns[scanned] = set(declared[name])
    wanted_columns = {c for cs in (sources or {}).values() for c in cs}
    if sources and erased.of(wanted_columns) and (names is None or QUARANTINE_TABLE in names):
        scans[QUARANTINE_TABLE] = quarantine_files_holding(
            locate(QUARANTINE_TABLE), erased, sources
        )
        columns[QUARANTINE_TABLE] = wanted_columns
    at = ledger.store.now()
    done = StorageScan(scans, ())
    entries = []
    for entry in ledger.entries():
        mine = [t for t, c in columns.items() if entry.column in c]
        if mine:
            holding = done.holding(entry)
            held = {t: [[f.path, f.kind] for f in holding.get(t, ())] for t in mine}
            entry = ledger.found(entry, held, at)
        entries.append(entry)
    return StorageScan(scans, tuple(entries))
