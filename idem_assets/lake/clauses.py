"""MERGE by when-clauses (dagster-delta's merge types) that sends only the rows that change.

delta-rs rewrites every file that holds a matched row, even when the update sets the values
it already has, so an unchanged rerun of a plain MERGE commits a new version and rewrites
the files it touched. Here a merge whose predicate is a conjunction of key equalities
(``s.id = t.id AND s.day = t.day``) and whose clauses are the unconditional ones of the
standard merge types is planned first: the target rows of the batch's keys are read, and
only rows that a clause would change go into the MERGE, each marked with the clause it
takes. Nothing to change means no commit; a change rewrites only the files of the rows it
changes. Any other merge (a predicate with more than key equalities, conditional clauses,
update expressions) runs as configured, and its no-op is proven by the checkpoint instead.

Clauses follow delta-rs's semantics. One difference, on purpose: in a partitioned merge
the "not matched by source" clauses act on the output's partitions only (their partition
filter becomes part of the clause), where a bare partition filter in the MERGE predicate
would make every row of every other partition "not matched" and delete or update it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from deltalake import CommitProperties, DeltaTable, WriterProperties

from idem_assets._lazy import lazy_module
from idem_assets.faults import crash_point
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.predicates import Condition, Range, all_of, conjunction, quote_identifier
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.tables import LakeTable, WriteOptions, create_table, read_rows, table_schema

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pl = lazy_module("polars")


STRATEGY = "merge"
_OP = "__idem_op"
_UPDATE, _INSERT, _DELETE = "u", "i", "d"

ClauseKind = Literal[
    "when_matched_update",
    "when_matched_update_all",
    "when_matched_delete",
    "when_not_matched_insert",
    "when_not_matched_insert_all",
    "when_not_matched_by_source_delete",
    "when_not_matched_by_source_update",
]
_BY_SOURCE = ("when_not_matched_by_source_delete", "when_not_matched_by_source_update")
# The clauses a planned merge can decide row by row (unconditional, all columns).
_PLANNABLE = (
    "when_matched_update_all",
    "when_matched_delete",
    "when_not_matched_insert_all",
    "when_not_matched_by_source_delete",
)


class MergeConfigError(ValueError):
    """A merge that cannot run as configured; the message names the setting."""


@dataclass(frozen=True)
class Clause:
    """One ``WHEN ...`` clause, as delta-rs's ``TableMerger`` methods take it."""

    kind: ClauseKind
    predicate: str | None = None
    updates: Mapping[str, str] | None = None
    except_cols: Sequence[str] | None = None

    @property
    def plain(self) -> bool:
        """Unconditional and over all columns: decidable without evaluating SQL."""
        return (
            self.kind in _PLANNABLE
            and self.predicate is None
            and not self.updates
            and not self.except_cols
        )


@dataclass(frozen=True)
class ClauseMerge:
    """A configured merge: predicate, aliases, clauses in the order they apply."""

    predicate: str
    clauses: tuple[Clause, ...]
    source_alias: str | None = None
    target_alias: str | None = None
    error_on_type_mismatch: bool = True
    merge_schema: bool = False

    def key_pairs(self) -> list[tuple[str, str]] | None:
        """(source column, target column) pairs when the predicate is only key equalities."""
        return key_equalities(self.predicate, self.source_alias, self.target_alias)

    def planned(self) -> bool:
        """Whether rows can be sent only when they change (see the module docstring)."""
        kinds = [c.kind for c in self.clauses]
        return (
            self.key_pairs() is not None
            and all(c.plain for c in self.clauses)
            and len(kinds) == len(set(kinds))
        )

    def describe(self) -> str:
        """Text that changes whenever the merge's outcome could (for no-op proofs)."""
        parts = [self.predicate, str(self.source_alias), str(self.target_alias)]
        parts += [
            f"{c.kind}|{c.predicate}|{sorted((c.updates or {}).items())}" for c in self.clauses
        ]
        parts.append(f"schema={self.merge_schema}")
        return "\n".join(parts)


_NAME = r'(?:`([^`]+)`|"([^"]+)"|([A-Za-z_][A-Za-z0-9_]*))'
_REF = rf"([A-Za-z_][A-Za-z0-9_]*)\.{_NAME}"
_EQUALITY = re.compile(rf"^\(?\s*{_REF}\s*=\s*{_REF}\s*\)?$")
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)


def key_equalities(
    predicate: str, source_alias: str | None, target_alias: str | None
) -> list[tuple[str, str]] | None:
    """``s.a = t.a AND t.b = s.c`` as [(a, a), (c, b)]; None for any other predicate."""
    if not source_alias or not target_alias or source_alias == target_alias:
        return None
    pairs = []
    for part in _AND.split(predicate.strip()):
        found = _EQUALITY.match(part.strip())
        if found is None:
            return None
        left_alias, right_alias = found.group(1), found.group(5)
        left = next(g for g in found.groups()[1:4] if g)
        right = next(g for g in found.groups()[5:8] if g)
        if (left_alias, right_alias) == (source_alias, target_alias):
            pairs.append((left, right))
        elif (left_alias, right_alias) == (target_alias, source_alias):
            pairs.append((right, left))
        else:
            return None
    return pairs or None


def merge_by_clauses(
    target: LakeTable,
    rows: pa.Table,
    merge: ClauseMerge,
    *,
    scope: Sequence[Condition] = (),
    partition_by: Sequence[str] = (),
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Merge ``rows`` into the table by ``merge``'s clauses; no commit when nothing changes.

    ``scope`` is the output's partitions: it narrows the MERGE to them (and the "not
    matched by source" clauses to them). A missing table is created holding what the
    clauses would insert into an empty one, in one commit. ``commit.options``: the writer
    properties, and the table configuration of a table-creating write.
    """
    batch_fp = commit.fingerprint_of(rows)
    properties = commit.properties({"idem.fingerprint": str(batch_fp)})
    options, writer = commit.options, commit.options.writer()

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        if table is None:
            return _create(attempt, rows, merge, partition_by, properties, options, batch_fp)
        _check_columns(rows, table, merge)
        if merge.planned():
            return _planned(attempt, table, rows, merge, scope, properties, writer, batch_fp)
        crash_point(f"lake.merge_planned/{target.uri.rsplit('/', 1)[-1]}")
        before = table.version()
        stats = _execute(table, rows, merge, scope, properties, writer)
        return _result(attempt, before, stats, batch_fp)

    return commit_retried(target, STRATEGY, once)


def _create(
    attempt: Attempt,
    rows: pa.Table,
    merge: ClauseMerge,
    partition_by: Sequence[str],
    properties: CommitProperties,
    options: WriteOptions,
    batch_fp: Fingerprint,
) -> WriteResult:
    """A first merge: the rows an empty table would take, as its first version."""
    inserts = any(
        c.kind in ("when_not_matched_insert_all", "when_not_matched_insert") for c in merge.clauses
    )
    plain_insert = all(
        c.plain or c.kind not in ("when_not_matched_insert_all", "when_not_matched_insert")
        for c in merge.clauses
    )
    if inserts and plain_insert:
        first = rows
    else:
        # Conditional or computed inserts: let delta-rs evaluate them against an empty table.
        first = rows.schema.empty_table()
    create_table(attempt.target, first, properties, options, partition_by)
    if first.num_rows or not inserts:
        return attempt.inserted(
            0,
            first.num_rows,
            batch_fp,
            details={
                "merge_stats": {
                    "num_source_rows": rows.num_rows,
                    "num_target_rows_inserted": first.num_rows,
                }
            },
        )
    # The rest of this try merges into the (empty) table it just created.
    created = replace(attempt, table=attempt.target.open())
    assert created.table is not None
    stats = _execute(created.table, rows, merge, (), properties, options.writer())
    return _result(created, 0, stats, batch_fp)


def _check_columns(rows: pa.Table, table: DeltaTable, merge: ClauseMerge) -> None:
    stored = table_schema(table).names
    new = [name for name in rows.column_names if name not in stored]
    if new and not merge.merge_schema:
        raise MergeConfigError(
            f"the output has column(s) {new} that the table does not; set "
            "schema_mode='merge' to add them (rows already stored read null)"
        )
    for source, target in merge.key_pairs() or ():
        if source not in rows.column_names:
            raise MergeConfigError(
                f"merge predicate {merge.predicate!r} names {merge.source_alias}.{source}, "
                f"which the output does not have (columns: {rows.column_names})"
            )
        if target not in stored:
            raise MergeConfigError(
                f"merge predicate {merge.predicate!r} names {merge.target_alias}.{target}, "
                f"which the table does not have (columns: {stored})"
            )


def _planned(
    attempt: Attempt,
    table: DeltaTable,
    rows: pa.Table,
    merge: ClauseMerge,
    scope: Sequence[Condition],
    properties: CommitProperties,
    writer_properties: WriterProperties | None,
    batch_fp: Fingerprint,
) -> WriteResult:
    """Send the MERGE only the rows a clause changes, each marked with its clause."""
    pairs = merge.key_pairs()
    assert pairs is not None
    kinds = {c.kind for c in merge.clauses}
    changes = plan_changes(table, rows, pairs, kinds, scope)
    if changes.num_rows == 0:
        return attempt.unchanged(
            batch_fp,
            proof=Proof.CONTENT,
            details={
                "merge_stats": {"num_source_rows": rows.num_rows, "num_changed_rows": 0},
            },
        )
    crash_point(f"lake.merge_planned/{attempt.target.uri.rsplit('/', 1)[-1]}")
    s, t = merge.source_alias, merge.target_alias
    assert s is not None and t is not None
    keys = [f"{quote_identifier(a, s)} = {quote_identifier(b, t)}" for a, b in pairs]
    prune = _key_ranges(changes, pairs)
    on = all_of(*keys, conjunction(tuple(scope), t), *(r.sql(t) for r in prune))
    op = quote_identifier(_OP, s)
    merger = table.merge(
        changes,
        predicate=on,
        source_alias=s,
        target_alias=t,
        merge_schema=merge.merge_schema,
        error_on_type_mismatch=merge.error_on_type_mismatch,
        writer_properties=writer_properties,
        commit_properties=properties,
    )
    if "when_matched_update_all" in kinds:
        merger = merger.when_matched_update_all(predicate=f"{op} = '{_UPDATE}'", except_cols=[_OP])
    if kinds & {"when_matched_delete", "when_not_matched_by_source_delete"}:
        merger = merger.when_matched_delete(predicate=f"{op} = '{_DELETE}'")
    if "when_not_matched_insert_all" in kinds:
        merger = merger.when_not_matched_insert_all(
            predicate=f"{op} = '{_INSERT}'", except_cols=[_OP]
        )
    before = table.version()
    stats = merger.execute()
    stats["num_source_rows"] = rows.num_rows
    return _result(attempt, before, stats, batch_fp)


def plan_changes(
    table: DeltaTable,
    rows: pa.Table,
    pairs: Sequence[tuple[str, str]],
    kinds: set[str],
    scope: Sequence[Condition] = (),
) -> pa.Table:
    """The rows a merge must send: batch rows that change, and target keys to delete.

    Marked in ``__idem_op``: u (a matched row whose values differ), i (a row no target row
    matches), d (a matched row to delete, or the key of a target row no batch row matches).
    """
    source_keys = [a for a, _ in pairs]
    stored_schema = table_schema(table)
    by_source = "when_not_matched_by_source_delete" in kinds
    matched = kinds & {"when_matched_update_all", "when_matched_delete"}
    null_keys = rows.num_rows - rows.select(source_keys).drop_null().num_rows
    if null_keys:
        raise MergeConfigError(
            f"{null_keys} output row(s) "
            f"have a null in merge key column(s) {source_keys}: an equality never matches "
            "null, so every rerun would insert them again; fill or drop them before merging"
        )
    incoming = pl.from_arrow(_conformed(rows, stored_schema))
    assert isinstance(incoming, pl.DataFrame)
    if matched and incoming.select(source_keys).is_duplicated().any():
        repeated = incoming.filter(incoming.select(source_keys).is_duplicated()).height
        raise MergeConfigError(
            f"{repeated} output rows share a merge key {source_keys} with another row: a "
            "target row may be matched by one source row only (delta-rs refuses the MERGE); "
            "deduplicate the output first"
        )
    ranges: list[Condition] = list(scope)
    keys = None
    if not by_source:
        ranges += _key_ranges(rows, pairs)
        if len(pairs) == 1 and rows.num_rows:
            keys = (pairs[0][1], rows.column(pairs[0][0]).combine_chunks())
    stored = pl.from_arrow(read_rows(table, ranges=ranges, keys=keys))
    assert isinstance(stored, pl.DataFrame)
    stored = stored.rename({b: a for a, b in pairs if a != b})
    parts = []
    key_frame = stored.select(source_keys)
    if "when_not_matched_insert_all" in kinds:
        parts.append(
            incoming.join(key_frame, on=source_keys, how="anti", nulls_equal=False).with_columns(
                pl.lit(_INSERT).alias(_OP)
            )
        )
    if "when_matched_update_all" in kinds:
        # Matched rows whose every column already equals the stored one are not sent; a
        # column the table does not have yet (schema_mode merge) reads null there.
        new = [c for c in incoming.columns if c not in stored.columns]
        known = stored.with_columns(pl.lit(None, incoming.schema[c]).alias(c) for c in new)
        differing = incoming.join(
            known.select(incoming.columns), on=incoming.columns, how="anti", nulls_equal=True
        )
        parts.append(
            differing.join(key_frame, on=source_keys, how="semi").with_columns(
                pl.lit(_UPDATE).alias(_OP)
            )
        )
    elif "when_matched_delete" in kinds:
        parts.append(
            incoming.join(key_frame, on=source_keys, how="semi").with_columns(
                pl.lit(_DELETE).alias(_OP)
            )
        )
    if by_source:
        gone = key_frame.join(
            incoming.select(source_keys), on=source_keys, how="anti", nulls_equal=False
        )
        parts.append(gone.with_columns(pl.lit(_DELETE).alias(_OP)))
    if not parts:
        return pa.table({_OP: pa.array([], pa.string())})
    changes = pl.concat(parts, how="diagonal_relaxed")
    return changes.to_arrow()


def _conformed(rows: pa.Table, stored: pa.Schema) -> pa.Table:
    """The batch with the table's types for the columns it shares with the table."""
    columns = []
    for name in rows.column_names:
        column = rows.column(name)
        if name in stored.names and not column.type.equals(stored.field(name).type):
            column = column.cast(stored.field(name).type, safe=True)
        columns.append(column)
    return pa.Table.from_arrays(columns, names=rows.column_names)


def _key_ranges(rows: pa.Table, pairs: Sequence[tuple[str, str]]) -> list[Range]:
    """Literal [min, max] of each (integer or date) key over ``rows``, on the target's
    column, so files outside them are skipped."""
    ranges = []
    for source, stored in pairs:
        if source not in rows.column_names or rows.num_rows == 0:
            continue
        kind = rows.schema.field(source).type
        if not (pa.types.is_integer(kind) or pa.types.is_date(kind)):
            continue
        bounds = pc.min_max(rows.column(source))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and high is not None:
            ranges.append(Range(stored, low, high, inclusive=True))
    return ranges


def _execute(
    table: DeltaTable,
    rows: pa.Table,
    merge: ClauseMerge,
    scope: Sequence[Condition],
    properties: CommitProperties,
    writer_properties: WriterProperties | None,
) -> dict[str, Any]:
    """The configured MERGE as delta-rs runs it, narrowed to ``scope``."""
    t = merge.target_alias
    narrowed = conjunction(tuple(scope), t) if scope else ""
    if scope and not t:
        raise MergeConfigError(
            "a partitioned merge needs target_alias: the partition filter is added to the "
            "predicate on the target's columns"
        )
    merger = table.merge(
        rows,
        predicate=all_of(f"({merge.predicate})", narrowed) if narrowed else merge.predicate,
        source_alias=merge.source_alias,
        target_alias=t,
        merge_schema=merge.merge_schema,
        error_on_type_mismatch=merge.error_on_type_mismatch,
        writer_properties=writer_properties,
        commit_properties=properties,
    )
    for clause in merge.clauses:
        predicate = clause.predicate
        if clause.kind in _BY_SOURCE and narrowed:
            predicate = all_of(f"({predicate})", narrowed) if predicate else narrowed
        method = getattr(merger, clause.kind)
        arguments: dict[str, Any] = {"predicate": predicate}
        if clause.updates is not None:
            arguments["updates"] = dict(clause.updates)
        if clause.except_cols:
            arguments["except_cols"] = list(clause.except_cols)
        merger = method(**arguments)
    return merger.execute()


def _result(
    attempt: Attempt, before: int, stats: dict[str, Any], batch_fp: Fingerprint
) -> WriteResult:
    """What a MERGE on ``attempt.table`` did: committed when delta-rs made a new version."""
    assert attempt.table is not None
    inserted = int(stats.get("num_target_rows_inserted", 0))
    updated = int(stats.get("num_target_rows_updated", 0))
    deleted = int(stats.get("num_target_rows_deleted", 0))
    version = attempt.table.version()
    if version == before:
        return attempt.unchanged(batch_fp, proof=Proof.CONTENT, details={"merge_stats": stats})
    return attempt.written(
        version,
        inserted + updated + deleted,
        batch_fp,
        rows_inserted=inserted,
        rows_updated=updated,
        rows_deleted=deleted,
        details={"merge_stats": stats},
    )
