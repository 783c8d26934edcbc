"""Deletes declared on a merge asset (issue 33, work in progress): days materialized in any
order, and again, give the newest-event table; an unchanged rerun commits nothing."""

import datetime as dt
import random

import dagster as dg
import pyarrow as pa

from idem_assets.io_manager import WriteSpec
from idem_assets.lake import read_rows
from idem_assets.lake.merge import merge_with_deletes
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
    from idem_assets.io_manager.strategies import Merge
    from idem_assets.io_manager.window import Window
    from idem_assets.lake import LakeTable

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
    assert Merge().compare(SPEC, target, batch, Window()).passed
    # That key written back behind the lake: the rerun would delete it again.
    back = pa.table(
        {KEY: [deleted[KEY]], VERSION: [deleted[VERSION] - 1], "segment": ["smb"]},
        schema=read_rows(target.open()).schema,
    )
    write_deltalake(target.uri, back, mode="append")
    compared = Merge().compare(SPEC, target, batch, Window())
    assert not compared.passed and compared.rows_differing == 1
    assert "delete 1 row(s)" in compared.detail


def test_a_deleted_key_written_back_is_counted_on_the_day_of_its_delete_only(tmp_path):
    from deltalake import write_deltalake

    from idem_assets.io_manager.batch import prepare
    from idem_assets.io_manager.strategies import compare_days
    from idem_assets.lake import LakeTable

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
