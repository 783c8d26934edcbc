"""Writes that keep a table's Change Data Feed exact: only rows that change appear in it.

What delta-rs (1.6.6) puts in the change feed of a table created with
``delta.enableChangeDataFeed=true``, seen on real tables through ``load_cdf``:

    write                    log actions          change rows
    -----------------------  -------------------  ---------------------------------------
    append                   add                  insert of every added row
    overwrite, predicate     remove + add         delete of every row of the slice, then
      (replaceWhere)           (no cdc files)       insert of every new row, changed or not
    full overwrite           remove + add         delete of every row of the table, insert
                               (no cdc files)       of every new row
    MERGE, DELETE            add + cdc + remove   the changed rows only: insert,
                                                    update_preimage + update_postimage,
                                                    delete
    staged commit (our raw   remove + add         as an overwrite (so staged writes refused
      add/remove actions)                           such tables)
    optimize, vacuum         dataChange=false     nothing

So every write here that replaces rows of a table keeping a change feed goes through
``merge_changed_rows``: the new rows are compared with the stored ones and only the rows
that differ are sent to one MERGE, whose cdc files then name exactly those rows.
``lake.overwrite.replace_rows`` takes that turn for the in-memory writes (partition overwrite,
full replace), ``lake.staging.commit_staged`` for the staged ones (streamed overwrite, Spark).
Merges (``lake.merge``, ``lake.clauses``) already send only the rows that change, appends
only add, and an unchanged rerun commits nothing. The feed after each of our writes:

    our write                               change rows of a rerun that changes rows
    --------------------------------------  ----------------------------------------------
    overwrite_slice, overwrite_partitions,  the changed rows: update_preimage +
      replace_table, overwrite_stream,        update_postimage of a row whose key
      staged commits that remove files        (WriteOptions.change_key) stays, else delete
                                              + insert; new rows insert, gone rows delete
    merge_upsert, merge_with_deletes,       insert, update_preimage + update_postimage,
      planned clause merges                   delete of the keys that change
    append_exactly_once                     insert of the batch (a replayed txn: nothing)
    any unchanged rerun                     nothing (no commit)

A write that changes the table's columns still replaces the slice as delta-rs does (every
row is then deleted and inserted again: each has changed shape).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from deltalake import CommitProperties, DeltaTable, WriterProperties

from idem_assets._lazy import lazy_module
from idem_assets.lake.frames import conform, to_polars
from idem_assets.lake.predicates import Condition, all_of, conjunction, quote_identifier
from idem_assets.lake.tables import table_schema

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    import pyarrow as pa
else:
    # imported on first use: see idem_assets._lazy
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")
    pl = lazy_module("polars")


CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
_OP = "__idem_change"
_INSERT, _UPDATE, _DELETE = "i", "u", "d"
_STORED, _NEW = "__idem_stored", "__idem_new"
_SOURCE, _TARGET = "s", "t"

# (stored rows, new rows) of each part of what a write replaces; called again when the
# rows turn out not to be named once by their key. (Text: Arrow loads on first use.)
Parts = Callable[[], Iterable[tuple["pa.Table", "pa.Table"]]]


def feeds_changes(table: DeltaTable | None) -> bool:
    """Whether ``table`` keeps a Change Data Feed (``delta.enableChangeDataFeed=true``)."""
    if table is None:
        return False
    return table.metadata().configuration.get(CHANGE_DATA_FEED, "").lower() == "true"


def keep_change_feed(table: DeltaTable | None, configuration: Mapping[str, str] | None) -> bool:
    """Give an existing table the change data feed ``configuration`` asks for (a write that
    creates the table takes it from the configuration itself); whether it was turned on now.
    The feed starts at the version that turns it on."""
    wanted = (configuration or {}).get(CHANGE_DATA_FEED, "").lower() == "true"
    if table is None or not wanted or feeds_changes(table):
        return False
    table.alter.set_table_properties({CHANGE_DATA_FEED: "true"})
    return True


def merge_changed_rows(
    table: DeltaTable,
    parts: Parts,
    *,
    key: Sequence[str] = (),
    prune: Sequence[Condition] = (),
    properties: CommitProperties,
    writer_properties: WriterProperties | None = None,
) -> int | None:
    """Make each part's stored rows be its new rows with one MERGE of only the rows that
    differ; the version made, or None when none differ (nothing is committed).

    A row is named by ``key`` with the partition and ``prune`` columns, when that names each
    row once on both sides: a changed row is then an update (pre- and post-image in the
    feed). Otherwise, or without a key, a row is named by all its columns: a changed row is
    a delete and an insert, and copies of a repeated row are counted. ``prune`` are the
    conditions the parts were read within; the MERGE reads only the files they select.
    """
    schema = table_schema(table)
    names = schema.names
    identity = list(
        dict.fromkeys([*key, *table.metadata().partition_columns, *(c.column for c in prune)])
    )
    changes = _differences(parts(), names, identity) if key else None
    if changes is None:
        identity = names
        changes = _differences(parts(), names, None)
    if changes.height == 0:
        return None
    rows = conform(changes.select(names).to_arrow(), schema)
    source = rows.append_column(_OP, changes.get_column(_OP).to_arrow().cast(pa.string()))
    op = quote_identifier(_OP, _SOURCE)
    on = all_of(
        # Rows to insert never match: a repeated row's new copy must not meet its old one.
        f"{op} <> '{_INSERT}'",
        *(
            f"{quote_identifier(c, _TARGET)} IS NOT DISTINCT FROM {quote_identifier(c, _SOURCE)}"
            for c in identity
        ),
        conjunction(tuple(prune), _TARGET),
    )
    (
        table.merge(
            source,
            predicate=on,
            source_alias=_SOURCE,
            target_alias=_TARGET,
            writer_properties=writer_properties,
            commit_properties=properties,
        )
        .when_matched_update_all(predicate=f"{op} = '{_UPDATE}'", except_cols=[_OP])
        .when_matched_delete(predicate=f"{op} = '{_DELETE}'")
        .when_not_matched_insert_all(predicate=f"{op} = '{_INSERT}'", except_cols=[_OP])
        .execute()
    )
    return table.version()


def _differences(
    parts: Iterable[tuple[pa.Table, pa.Table]], names: list[str], identity: list[str] | None
) -> pl.DataFrame | None:
    """The rows to send, marked in ``_OP``, over all parts; None when ``identity`` does not
    name each row once."""
    found = []
    for stored, new in parts:
        old = to_polars(stored.select(names))
        fresh = to_polars(new.select(names))
        if identity is None:
            found.append(_counted(old, fresh, names))
            continue
        changes = _keyed(old, fresh, names, identity)
        if changes is None:
            return None
        found.append(changes)
    if not found:
        return pl.DataFrame(schema={_OP: pl.String})
    return pl.concat(found, how="vertical_relaxed")


def _keyed(
    old: pl.DataFrame, new: pl.DataFrame, names: list[str], identity: list[str]
) -> pl.DataFrame | None:
    """Inserts, updates and deletes of rows named by ``identity`` (None: it repeats)."""
    if old.select(identity).is_duplicated().any() or new.select(identity).is_duplicated().any():
        return None
    keys_old, keys_new = old.select(identity), new.select(identity)
    inserts = new.join(keys_old, on=identity, how="anti", nulls_equal=True)
    deletes = old.join(keys_new, on=identity, how="anti", nulls_equal=True)
    updates = new.join(old, on=names, how="anti", nulls_equal=True).join(
        keys_old, on=identity, how="semi", nulls_equal=True
    )
    return pl.concat(
        [
            inserts.with_columns(pl.lit(_INSERT).alias(_OP)),
            updates.with_columns(pl.lit(_UPDATE).alias(_OP)),
            deletes.with_columns(pl.lit(_DELETE).alias(_OP)),
        ]
    )


def _counted(old: pl.DataFrame, new: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Rows named by all their columns, as multisets: a row held fewer times than before is
    deleted (every copy) and inserted as often as it is now held; one held more often gets
    the extra copies inserted."""
    stored = old.group_by(names).len(name=_STORED)
    wanted = new.group_by(names).len(name=_NEW)
    both = stored.join(wanted, on=names, how="full", nulls_equal=True, coalesce=True).with_columns(
        pl.col(_STORED).fill_null(0), pl.col(_NEW).fill_null(0)
    )
    fewer = pl.col(_NEW) < pl.col(_STORED)
    deletes = both.filter(fewer).select(names)
    copies = both.select(
        pl.when(fewer).then(pl.col(_NEW)).otherwise(pl.col(_NEW) - pl.col(_STORED))
    )
    repeats = np.repeat(np.arange(both.height), copies.to_series().to_numpy())
    inserts = both.select(names)[repeats]
    return pl.concat(
        [
            inserts.with_columns(pl.lit(_INSERT).alias(_OP)),
            deletes.with_columns(pl.lit(_DELETE).alias(_OP)),
        ]
    )
