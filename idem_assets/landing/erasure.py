"""Erased keys in the shared quarantine table: which rows hold one, and their delete.

A quarantined row keeps its raw field values as JSON (``raw_record``), so a key a source
declares erasable can sit in it: ``{"customer_id": "42", "amount": "abc"}``. A row of source
S holds ``column = value`` when S declares ``column`` erasable and its raw record is a JSON
object whose field ``column`` (``column#2``... where a file names the column more than
once) is ``value`` as text, compared as ``Erased.held`` compares a column (``42`` matches
the number 42 and the text "42"). A value longer than ``raw_record_json`` keeps is stored
cut short; the cut key still names the person, so a field equal to the key cut the same
way holds it. A record that is a JSON array (a row whose fields could not be named) has no
field to compare and holds no key.

The delete, like ``erase_key``, is one MERGE whose source table carries the matching rows'
identifying columns; no predicate is built from the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.lake.commits import Attempt, commit_retried
from idem_assets.lake.erasure import Erased, ErasedFrom, key_digest
from idem_assets.lake.predicates import In, all_of, quote_identifier
from idem_assets.lake.tables import LakeTable, commit_properties, read_rows
from idem_assets.landing.quarantine import quarantine_commit_metadata
from idem_assets.landing.raw import raw_text

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")

# Source name -> the columns it declares erasable.
ErasableSources = Mapping[str, tuple[str, ...]]
# Column -> the text a raw record stores for an erased value -> the erased values stored so.
Spellings = dict[str, dict[str, frozenset[str]]]

# What names one quarantine row: a file's data row of one source and day.
IDENTITY = ("source", "source_file", "row_number", "partition_date")
_SOURCE, _TARGET = "s", "t"
# A raw record's field: a file's column name, ``#<n>`` added to its repeats (unique_names).
_FIELD = re.compile(r"(?P<column>.+?)(?:#\d+)?")


def spellings(erased: Erased, columns: tuple[str, ...]) -> Spellings:
    """How raw records spell the erased values of ``columns`` (empty: none erased)."""
    out: dict[str, dict[str, set[str]]] = {}
    for column in columns:
        for value in erased.values.get(column, ()):
            out.setdefault(column, {}).setdefault(raw_text(value), set()).add(value)
    return {c: {t: frozenset(v) for t, v in texts.items()} for c, texts in out.items()}


def keys_in_records(records: pa.Array | pa.ChunkedArray, spelled: Spellings) -> dict[int, set[str]]:
    """Position -> digests (``key_digest``) of the erased keys each raw record holding one
    holds. A record holds a key only if it contains the key's JSON text, so only those
    records are parsed."""
    records = pc.cast(records, pa.string())  # a MERGE may have written string views
    candidate = None
    for texts in spelled.values():
        for text in texts:
            hit = pc.match_substring(records, json.dumps(text, ensure_ascii=False)[1:-1])
            candidate = hit if candidate is None else pc.or_(candidate, hit)
    if candidate is None:
        return {}
    found = {}
    for position in pc.indices_nonzero(pc.fill_null(candidate, False)).to_pylist():
        keys = _keys_of(records[position].as_py(), spelled)
        if keys:
            found[position] = keys
    return found


def _keys_of(record: str, spelled: Spellings) -> set[str]:
    try:
        fields = json.loads(record)
    except ValueError:
        return set()
    if not isinstance(fields, dict):
        return set()  # the raw fields of a row that could not be named: no key to compare
    keys = set()
    for name, raw in fields.items():
        match = _FIELD.fullmatch(name)
        column = name if name in spelled or match is None else match.group("column")
        text = _text(raw)
        if text is not None:
            keys.update(key_digest(column, v) for v in spelled.get(column, {}).get(text, ()))
    return keys


def _text(value: object) -> str | None:
    """A raw JSON value as text, as Arrow casts a column to text (None: never a key)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return pa.scalar(value, pa.float64()).cast(pa.string()).as_py()
    return None


def quarantine_held(
    rows: pa.Table | pa.RecordBatch, erased: Erased, sources: ErasableSources
) -> pa.Array:
    """True for each quarantine row (``quarantine_schema()`` columns ``source`` and
    ``raw_record`` at least) holding an erased key of a column its source declares
    erasable in ``sources``."""
    mask = [False] * rows.num_rows
    names = rows.column("source")
    for source in pc.unique(names).to_pylist():
        spelled = spellings(erased, sources.get(source, ()))
        if not spelled:
            continue
        positions = pc.indices_nonzero(pc.fill_null(pc.equal(names, source), False))
        records = pc.take(rows.column("raw_record"), positions)
        for index in keys_in_records(records, spelled):
            mask[positions[index].as_py()] = True
    return pa.array(mask, pa.bool_())


def quarantine_without_erased(
    rows: pa.Table, erased: Erased, sources: ErasableSources
) -> tuple[pa.Table, int]:
    """Quarantine ``rows`` without those holding an erased key, and how many were taken out."""
    if not any(spellings(erased, columns) for columns in sources.values()):
        return rows, 0
    kept = rows.filter(pc.invert(quarantine_held(rows, erased, sources)))
    return kept, rows.num_rows - kept.num_rows


@dataclass(frozen=True)
class QuarantineWithoutErased:
    """Quarantine record batches without the rows holding an erased key: the function the
    executors of a Spark write run (``mapInArrow``), the same rule as every other write."""

    erased: Erased
    sources: ErasableSources

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield batch.filter(pc.invert(quarantine_held(batch, self.erased, self.sources)))


def erase_from_quarantine(
    target: LakeTable,
    column: str,
    value: str,
    sources: ErasableSources,
    commit_metadata: Mapping[str, str] | None = None,
) -> ErasedFrom:
    """Delete every quarantine row holding ``column = value`` (of the sources declaring
    ``column`` erasable in ``sources``), in one commit; nothing is committed when no row
    holds it (erasing again is a no-op)."""
    quote_identifier(column)  # a plain identifier, or an error before anything is read
    erased = Erased({column: frozenset({value})})
    declaring = tuple(sorted(s for s, columns in sources.items() if column in columns))
    none = ErasedFrom(target.uri, None, 0, ())

    def once(attempt: Attempt) -> ErasedFrom:
        table = attempt.table
        if table is None or not declaring:
            return none
        stored = read_rows(
            table, ranges=[In("source", declaring)], columns=[*IDENTITY, "raw_record"]
        )
        held = stored.filter(quarantine_held(stored, erased, sources)).select(list(IDENTITY))
        if not held.num_rows:
            return none
        held = held.group_by(list(IDENTITY), use_threads=False).aggregate([])
        matched = tuple(sorted(set(held.column("source").to_pylist())))
        before = set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())
        metrics = (
            table.merge(
                held,
                predicate=all_of(
                    In("source", matched).sql(_TARGET),  # prunes to the sources' partitions
                    *(
                        f"{quote_identifier(c, _TARGET)} IS NOT DISTINCT FROM "
                        f"{quote_identifier(c, _SOURCE)}"
                        for c in IDENTITY
                    ),
                ),
                source_alias=_SOURCE,
                target_alias=_TARGET,
                commit_properties=commit_properties(
                    quarantine_commit_metadata(
                        {**(commit_metadata or {}), "idem.erased": key_digest(column, value)}
                    )
                ),
            )
            .when_matched_delete()
            .execute()
        )
        deleted = int(metrics.get("num_target_rows_deleted", 0))
        if not deleted:
            return none
        after = set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())
        return ErasedFrom(target.uri, table.version(), deleted, tuple(sorted(before - after)))

    return commit_retried(target, "erase", once)
