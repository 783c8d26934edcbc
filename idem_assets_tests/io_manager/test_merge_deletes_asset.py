"""Deletes declared on a merge asset: days materialized in any
order, and again, give the newest-event table; an unchanged rerun commits nothing."""

import datetime as dt
import random

import dagster as dg
import pyarrow as pa

from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.io_manager import WriteSpec
from idem_assets.lake import LakeTable, fingerprint, read_rows
from idem_assets.lake.erasure import erase_key, satellites
from idem_assets.lake.merge import merge_with_deletes
from idem_assets.resources import CheckpointResource
from idem_assets_tests.io_manager.dropin import committed, manager, table
from idem_assets_tests.lake.test_merge_deletes import DAYS, KEY, OP, VERSION, change_days, reference

START = dt.date(2024, 3, 1)
PARTITIONS = dg.DailyPartitionsDefinition(start_date=START.isoformat())
CHANGES = change_days(7)
SPEC = WriteSpec(
    strategy="merge",
    natural_key=(KEY,),
    version_column=VERSION,
    delete_column=OP,
    delete_value="D",
    table="crm/customers",
)


@dg.asset(partitions_def=PARTITIONS, metadata=SPEC.to_metadata())
def customers(context: dg.AssetExecutionContext) -> pa.Table:
    index = (dt.date.fromisoformat(context.partition_key) - START).days
    return CHANGES[index]


def test_days_in_any_order_and_again_give_the_newest_events(tmp_path):
    rng = random.Random(7)
    order = [i for i in range(DAYS) for _ in range(rng.randint(1, 2))]
    rng.shuffle(order)
    resources = {"io_manager": manager(tmp_path)}
    for index in order:
        key = (START + dt.timedelta(days=index)).isoformat()
        assert dg.materialize([customers], partition_key=key, resources=resources).success
    stored = read_rows(table(tmp_path, "crm/customers")).to_pylist()
    assert stored and OP not in stored[0]  # the marker is not stored
    assert {row[KEY]: row for row in stored} == reference(CHANGES)
    version = table(tmp_path, "crm/customers").version()
    again = dg.materialize([customers], partition_key=START.isoformat(), resources=resources)
    assert committed(again) == [False]
    assert table(tmp_path, "crm/customers").version() == version


def test_the_rerun_comparison_counts_a_deleted_key_stored_again(tmp_path):
    from deltalake import write_deltalake

    from idem_assets.io_manager.batch import prepare
    from idem_assets.io_manager.window import Window
    from idem_assets.io_manager.writes import Merge

    resources = {"io_manager": manager(tmp_path)}
    for index in range(DAYS):
        key = (START + dt.timedelta(days=index)).isoformat()
        assert dg.materialize([customers], partition_key=key, resources=resources).success
    target = LakeTable(str(tmp_path / "crm" / "customers"))
    # A key whose newest event is a delete, and a day that deletes it.
    gone = {r[KEY] for t in CHANGES for r in t.to_pylist()} - set(reference(CHANGES))
    day, deleted = next(
        (i, r)
        for i, t in enumerate(CHANGES)
        for r in t.to_pylist()
        if r[OP] == "D" and r[KEY] in gone
    )
    batch = prepare(SPEC, CHANGES[day])
    assert Merge(SPEC).compare(target, batch, Window()).passed
    # That key written back behind the lake: the rerun would delete it again.
    back = pa.table(
        {KEY: [deleted[KEY]], VERSION: [deleted[VERSION] - 1], "segment": ["smb"]},
        schema=read_rows(target.open()).schema,
    )
    write_deltalake(target.uri, back, mode="append")
    compared = Merge(SPEC).compare(target, batch, Window())
    assert not compared.passed and compared.rows_differing == 1
    assert "delete 1 row(s)" in compared.detail


def test_a_deleted_key_written_back_is_counted_on_the_day_of_its_delete_only(tmp_path):
    from deltalake import write_deltalake

    from idem_assets.io_manager.batch import prepare
    from idem_assets.io_manager.writes import compare_days

    spec = SPEC.model_copy(update={"partition_column": "day"})
    days = [START + dt.timedelta(days=i) for i in range(DAYS)]
    dated = [
        t.append_column("day", pa.array([days[i]] * t.num_rows, pa.date32()))
        for i, t in enumerate(CHANGES)
    ]
    target = LakeTable(str(tmp_path / "customers"))
    for rows in dated:
        merge_with_deletes(target, rows, [KEY], version_column=VERSION, delete_column=(OP, "D"))
    batch = prepare(spec, pa.concat_tables(dated))
    assert all(c.passed for c in compare_days(spec, target, batch, days))
    # The newest delete of a key that stays deleted, and that key written back.
    gone = {r[KEY] for t in CHANGES for r in t.to_pylist()} - set(reference(CHANGES))
    day, deleted = max(
        ((i, r) for i, t in enumerate(CHANGES) for r in t.to_pylist() if r[KEY] in gone),
        key=lambda pair: (pair[1][KEY], pair[1][VERSION], pair[1][OP] == "D"),
    )
    assert deleted[OP] == "D"
    stored = read_rows(target.open())
    back = {name: [None] for name in stored.column_names}
    back.update({KEY: [deleted[KEY]], VERSION: [deleted[VERSION] - 1], "day": [days[day]]})
    write_deltalake(target.uri, pa.table(back, schema=stored.schema), mode="append")
    compared = compare_days(spec, target, batch, days)
    red = [d for d, c in zip(days, compared, strict=True) if not c.passed]
    assert red == [days[day]]
    assert compared[day].rows_differing == 1 and "delete 1 row(s)" in compared[day].detail


ERASABLE = SPEC.model_copy(update={"erasable_keys": (KEY,)})


@dg.asset(name="customers", partitions_def=PARTITIONS, metadata=ERASABLE.to_metadata())
def erasable_customers(context: dg.AssetExecutionContext) -> pa.Table:
    index = (dt.date.fromisoformat(context.partition_key) - START).days
    return CHANGES[index]


def _erase_midway(root, key: int) -> None:
    """What ``idem-assets erase`` does: the ledger first, then the table and its tombstones."""
    target = LakeTable(str(root / "crm" / "customers"))
    with CheckpointResource.beside(str(root)).open() as store:
        ledger = ErasureLedger(store)
        erasure = ledger.record(KEY, str(key))
        ledger.note(
            erasure,
            {t.uri: erase_key(t, KEY, str(key)) for t in (target, *satellites(target))},
        )


def test_a_key_erased_at_any_point_of_any_order_of_loads_stays_out(tmp_path):
    """Random orders of loads and reloads with the erase at a random point: one table, the
    reference without the erased key, whatever was loaded before or after the erase."""
    expected = {k: v for k, v in reference(CHANGES).items()}
    erased = next(iter(expected))
    del expected[erased]
    fingerprints = set()
    for seed in range(2):
        root = tmp_path / str(seed)
        rng = random.Random(seed)
        order = rng.sample(range(DAYS), DAYS)
        order += rng.sample(range(DAYS), 5)  # a replay of some history after everything
        cut = rng.randrange(len(order))
        resources = {"io_manager": manager(root)}
        filtered = 0
        for position, index in enumerate(order):
            if position == cut:
                _erase_midway(root, erased)
            key = (START + dt.timedelta(days=index)).isoformat()
            done = dg.materialize([erasable_customers], partition_key=key, resources=resources)
            assert done.success
            if position > cut:
                filtered += next(
                    m["erased_rows_filtered"].value
                    for m in (
                        e.materialization.metadata for e in done.get_asset_materialization_events()
                    )
                )
        stored = read_rows(table(root, "crm/customers"))
        assert {row[KEY]: row for row in stored.to_pylist()} == expected
        assert filtered > 0  # the replay after the erase read the key again and left it out
        fingerprints.add(str(fingerprint(stored)))
    assert len(fingerprints) == 1
