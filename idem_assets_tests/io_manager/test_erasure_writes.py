"""An erased key stays out of every write the IO manager makes: each ``idem/strategy``
(overwrite, merge with its tombstones, replace, history with its deletes, a deduplicated
batch) and each of dagster-delta's modes (merge, append, overwrite) declaring the key in
``idem/erasable_keys``, with and without a change data feed.

Every case loads three days, erases a customer with ``idem-assets erase``'s own function
(so the command finds the table and deletes its rows), then reruns and backfills days that
hold the customer again. The lake must end as a lake whose ledger held the key from the
start (same fingerprint, table by table), no table holds the key, and no change row written
after the erase names it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from idem_assets import IdempotentDeltaIOManager, MergeConfig, MergeType, TableOutput
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.cli.erase import erase
from idem_assets.io_manager.erasure import erasable_tables
from idem_assets.lake import fingerprint, read_rows
from idem_assets.lake.change_data import CHANGE_DATA_FEED
from idem_assets.resources import CheckpointResource, LakeResource

START = dt.date(2024, 3, 1)
PARTITIONS = dg.DailyPartitionsDefinition(
    start_date=START.isoformat(), end_date=(START + dt.timedelta(days=4)).isoformat()
)
KEY = "customer_id"
ERASED = 42
CUSTOMERS = (ERASED, 7, 8, 9)
TABLE = "items"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        (KEY, pa.int64()),
        ("day", pa.date32()),
        ("version", pa.int64()),
        ("amount", pa.float64()),
        ("op", pa.string()),
    ]
)


def day_rows(index: int, generation: int, *, repeats: bool, deletes: bool) -> list[dict]:
    """One day's rows: a row per customer (the erased one first); ``repeats`` adds an older
    delivery of a row (deduplicated away), ``deletes`` a delete of two of the day before."""
    day = START + dt.timedelta(days=index)
    version = generation * 10 + index
    rows = [
        {
            "id": index * 10 + i,
            KEY: customer,
            "day": day,
            "version": version,
            "amount": float(index * 100 + i + generation),
            "op": "U",
        }
        for i, customer in enumerate(CUSTOMERS)
    ]
    if repeats:
        rows += [{**row, "version": version - 1, "amount": -1.0} for row in rows[:2]]
    if deletes and index:
        rows += [{**row, "id": (index - 1) * 10 + i, "op": "D"} for i, row in enumerate(rows[:2])]
    return rows


@dataclasses.dataclass(frozen=True)
class Case:
    """One write path: the asset's metadata and how its rows are made."""

    metadata: dict[str, Any]
    partitioned: bool = True
    repeats: bool = False
    deletes: bool = False
    # An append cannot change a day it appended: its reruns give the same rows.
    changes_on_rerun: bool = True
    backfill: bool = True
    change_feed: bool = False


def _spec(**fields: Any) -> dict[str, Any]:
    from idem_assets.io_manager import WriteSpec

    return WriteSpec(erasable_keys=(KEY,), **fields).to_metadata()


_KEYED = {"natural_key": (KEY, "id"), "version_column": "version"}
_DELETES = {"delete_column": "op", "delete_value": "D"}
_MODE_ERASABLE = {"idem/erasable_keys": [KEY]}
CASES = {
    "overwrite": Case(_spec(strategy="overwrite", partition_column="day", **_KEYED)),
    "overwrite_deduplicated": Case(
        _spec(strategy="overwrite", partition_column="day", **_KEYED), repeats=True
    ),
    "merge_with_tombstones": Case(
        _spec(strategy="merge", **_KEYED, **_DELETES), repeats=True, deletes=True
    ),
    "replace": Case(_spec(strategy="replace", **_KEYED), partitioned=False, repeats=True),
    "history_with_deletes": Case(
        _spec(strategy="history", **_KEYED, **_DELETES), repeats=True, deletes=True
    ),
    "overwrite_change_feed": Case(
        _spec(strategy="overwrite", partition_column="day", **_KEYED), change_feed=True
    ),
    "merge_change_feed": Case(_spec(strategy="merge", **_KEYED), change_feed=True),
    "mode_merge": Case({"mode": "merge", "partition_expr": "day", **_MODE_ERASABLE}),
    "mode_merge_change_feed": Case(
        {"mode": "merge", "partition_expr": "day", **_MODE_ERASABLE}, change_feed=True
    ),
    "mode_append": Case(
        {"mode": "append", "partition_expr": "day", **_MODE_ERASABLE},
        changes_on_rerun=False,
        backfill=False,
    ),
    # Named by its content: the same output after the erase must not append its rows again.
    "mode_append_unpartitioned": Case(
        {"mode": "append", **_MODE_ERASABLE}, partitioned=False, changes_on_rerun=False
    ),
    "mode_overwrite": Case({"mode": "overwrite", "partition_expr": "day", **_MODE_ERASABLE}),
}


@dataclasses.dataclass
class Lake:
    """A lake, its checkpoint store and the case's asset, written run by run."""

    root: Path
    case: Case
    # How the asset hands its rows over (a Spark DataFrame, say); Arrow when None.
    frame: Callable[[pa.Table], Any] | None = None
    generation: int = 0
    days: int = 3  # the days an unpartitioned output holds

    @property
    def lake(self) -> LakeResource:
        return LakeResource(
            landing_dir=str(self.root / "landing"), lake_dir=str(self.root / "lake")
        )

    @property
    def checkpoint(self) -> CheckpointResource:
        return CheckpointResource(url=f"sqlite:///{self.root / 'state.db'}")

    def asset(self) -> dg.AssetsDefinition:
        case, lake = self.case, self
        metadata = dict(case.metadata)
        if case.change_feed:
            metadata["table_configuration"] = {CHANGE_DATA_FEED: "true"}

        def rows(indexes: range) -> Any:
            made = [
                row
                for index in indexes
                for row in day_rows(
                    index, lake.generation, repeats=case.repeats, deletes=case.deletes
                )
            ]
            table = pa.Table.from_pylist(made, schema=SCHEMA)
            return table if lake.frame is None else TableOutput(lake.frame(table), schema=SCHEMA)

        @dg.asset(
            name=TABLE,
            metadata=metadata,
            partitions_def=PARTITIONS if case.partitioned else None,
            backfill_policy=dg.BackfillPolicy.single_run() if case.partitioned else None,
        )
        def items(context) -> Any:  # noqa: ANN001 (Dagster reads the hint unresolved)
            if not case.partitioned:
                return rows(range(lake.days))
            window = context.partition_time_window
            first = (window.start.date() - START).days
            return rows(range(first, (window.end.date() - START).days))

        return items

    def run(self, first: int | None = None, last: int | None = None) -> dict[str, Any]:
        """Materialize a day (or an inclusive range of days); the output's metadata."""
        manager = IdempotentDeltaIOManager(
            lake=self.lake,
            checkpoint=self.checkpoint,
            merge_config=MergeConfig(
                merge_type=MergeType.upsert,
                predicate="s.id = t.id",
                source_alias="s",
                target_alias="t",
            ),
        )
        kwargs: dict[str, Any] = {}
        if first is not None:
            keys = [(START + dt.timedelta(days=i)).isoformat() for i in (first, last or first)]
            kwargs["tags"] = {
                "dagster/asset_partition_range_start": keys[0],
                "dagster/asset_partition_range_end": keys[1],
            }
        done = dg.materialize([self.asset()], resources={"io_manager": manager}, **kwargs)
        assert done.success
        # A range reports its write on each of its partitions: the first says it.
        event = done.get_asset_materialization_events()[0]
        metadata = event.materialization.metadata
        return {k: getattr(v, "value", v) for k, v in metadata.items()}

    def tables(self) -> dict[str, DeltaTable]:
        """Every Delta table of the lake (the asset's and those kept beside it), by name."""
        root = self.root / "lake"
        return {
            path.parent.relative_to(root).as_posix(): DeltaTable(str(path.parent))
            for path in sorted(root.rglob("_delta_log"))
        }


def holding(tables: dict[str, DeltaTable], value: int = ERASED) -> dict[str, int]:
    """Rows holding ``value`` in the key column, per table that has the column."""
    out = {}
    for name, table in tables.items():
        rows = read_rows(table)
        if KEY in rows.column_names:
            out[name] = rows.column(KEY).to_pylist().count(value)
    return out


def load(lake: Lake, erase_midway: Callable[[], None]) -> list[dict[str, Any]]:
    """Three days, ``erase_midway``, then reruns of days holding the key, a new day and a
    backfill of all of them; the metadata of the runs after the erase."""
    case = lake.case
    if case.partitioned:
        for index in range(3):
            lake.run(index)
    else:
        lake.run()
    erase_midway()
    lake.generation = 1 if case.changes_on_rerun else 0
    after = []
    if case.partitioned:
        after += [lake.run(0), lake.run(1), lake.run(3)]
        if case.backfill:
            after.append(lake.run(0, 3))
    else:
        after.append(lake.run())
        lake.days = 4
        after += [lake.run(), lake.run()]
    return after


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_erased_key_never_comes_back_on_any_write(tmp_path, name):
    assert_erased_key_stays_out(tmp_path, CASES[name])


def assert_erased_key_stays_out(
    tmp_path: Path, case: Case, frame: Callable[[pa.Table], Any] | None = None
) -> None:
    """Load, erase, load again: the lake equals one whose ledger held the key from the
    start, and nothing written after the erase holds it (``frame``: how rows are handed
    over)."""
    erased = Lake(tmp_path / "erased", case, frame)
    clean = Lake(tmp_path / "clean", case, frame)
    outcome: dict[str, Any] = {}

    def erase_now() -> None:
        assert holding(erased.tables())[TABLE] > 0
        declared = erasable_tables(dg.Definitions(assets=[erased.asset()]))
        assert declared == {TABLE: (KEY,)}  # `idem-assets erase` finds the table
        with erased.checkpoint.open() as store:
            outcome["done"] = erase(erased.lake, store, declared, KEY, str(ERASED)).done
        outcome["version"] = erased.tables()[TABLE].version()

    def erased_from_the_start() -> None:
        pass

    with clean.checkpoint.open() as store:
        ErasureLedger(store).record(KEY, str(ERASED))
    load(clean, erased_from_the_start)
    after = load(erased, erase_now)

    # The erase deleted the key's rows from the table (and from those beside it).
    assert outcome["done"][TABLE].rows_deleted > 0
    # The runs after it read the key again and left it out (Spark does not count them).
    filtered = [m["erased_rows_filtered"] for m in after]
    assert sum(filtered) > 0 if frame is None else set(filtered) == {"n/a"}
    tables = erased.tables()
    assert set(holding(tables).values()) == {0}, holding(tables)
    assert holding(tables, CUSTOMERS[1])[TABLE] > 0
    # As if the key had been erased before the first write.
    reference = clean.tables()
    assert set(tables) == set(reference)
    for table_name, table in tables.items():
        assert fingerprint(read_rows(table)) == fingerprint(read_rows(reference[table_name]))
    if case.change_feed:
        changes = tables[TABLE].load_cdf(starting_version=outcome["version"] + 1).read_all()
        assert changes.num_rows > 0  # the reruns changed rows
        assert ERASED not in changes.column(KEY).to_pylist()
