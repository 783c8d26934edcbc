"""Erased values in Dagster's event log: check samples show erasable columns by digest, and
``erased_values_in_event_log`` finds the events written before that which hold an erased
key, on a real (SQLite) Dagster instance, until a person deletes their runs."""

import datetime as dt
import re

import dagster as dg
import polars as pl
import pyarrow as pa

from idem_assets import (
    CheckpointResource,
    LakeAssetDef,
    LakeResource,
    Window,
    WriteSpec,
    daily_partitions,
    default_resources,
    lake_asset,
    partition_dates,
)
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.cli.erase import erase
from idem_assets.cli.event_log_erasure import erased_values_in_event_log, event_log_report
from idem_assets.io_manager.erasure import erasable_tables
from idem_assets.lake.erasure import Erased, key_digest
from idem_assets.landing.rules import ValueRule
from idem_assets.lib.checks.results import top_reasons, value_rules_result
from idem_assets.lib.checks.samples import shown_rows

START = dt.date(2024, 3, 1)
KEY = "customer_id"
SCHEMA = pa.schema([(KEY, pa.int64()), ("day", pa.date32()), ("segment", pa.string())])
# Customer 42 on the first two days (a duplicated key the check samples), 7 on the first
# and the third.
CUSTOMERS = ((42, 7), (42, 8), (7, 9))


def _rows(lake: LakeResource, window: Window) -> pa.Table:
    assert window.start is not None
    index = (window.start - START).days
    rows = [{KEY: c, "day": window.start, "segment": "smb"} for c in CUSTOMERS[index]]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _accounts(erasable: tuple[str, ...]) -> dg.AssetsDefinition:
    """A table keyed by customer, whose unique_natural_key check samples repeated keys; as
    declared before it listed ``erasable_keys`` (``()``) and after."""
    definition = LakeAssetDef(
        name="accounts",
        spec=WriteSpec(
            strategy="overwrite",
            natural_key=(KEY,),
            partition_column="day",
            erasable_keys=erasable,
        ),
        schema=SCHEMA,
        compute=_rows,
        column_descriptions={},
        partitions_def=daily_partitions(START),
    )

    @lake_asset(definition, description="Accounts per day.")
    def accounts(context: dg.AssetExecutionContext, lake: LakeResource) -> pa.Table:
        return _rows(lake, Window(*partition_dates(context)))

    return accounts


@dg.asset
def top_customer(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """An asset of a team's own that shows a customer in its metadata."""
    context.log_event(
        dg.AssetObservation(
            asset_key="top_customer",
            metadata={"top": dg.MetadataValue.json([{KEY: 42, "orders": 3}])},
        )
    )
    return dg.MaterializeResult(metadata={KEY: 42, "orders": 3})


def _run(instance, assets, resources, day=None):
    key = (START + dt.timedelta(days=day)).isoformat() if day is not None else None
    done = dg.materialize(assets, instance=instance, resources=resources, partition_key=key)
    assert done.success
    return done


def _samples(done: dg.ExecuteInProcessResult) -> list:
    return [
        e.metadata["sample"].value
        for e in done.get_asset_check_evaluations()
        if e.check_name == "unique_natural_key"
    ]


def test_the_finder_reports_events_holding_an_erased_key_and_none_written_since(tmp_path):
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    lake = LakeResource(landing_dir=str(tmp_path), lake_dir=str(tmp_path / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{tmp_path / 'state.db'}")
    resources = default_resources(lake, checkpoint)
    # Before the table declared erasable_keys: its sample shows the customer as it is.
    before = [_run(instance, [_accounts(())], resources, day) for day in (0, 1)]
    assert _samples(before[1]) == [[{KEY: 42, "len": 2}]]
    own = _run(instance, [top_customer], {})

    declared = _accounts((KEY,))
    with checkpoint.open() as store:
        erase(lake, store, erasable_tables(dg.Definitions(assets=[declared])), KEY, "42")
        found = erased_values_in_event_log(instance, ErasureLedger(store).erased())
    digest = key_digest(KEY, "42")
    assert {(h.run_id, h.event_type, h.asset_key, h.check_name, h.entries) for h in found} == {
        (before[1].run_id, "ASSET_CHECK_EVALUATION", "accounts", "unique_natural_key", ("sample",)),
        (own.run_id, "ASSET_MATERIALIZATION", "top_customer", None, (KEY,)),
        (own.run_id, "ASSET_OBSERVATION", "top_customer", None, ("top",)),
    }
    assert all(h.digests == (digest,) for h in found)
    report = event_log_report(found)
    # The value never shows as a value (run ids and digests are hex: "8428ff86-..." is not it).
    assert digest in report and "delete" in report
    assert re.search(r"(?<![0-9a-f])42(?![0-9a-f])", report.replace(digest, "")) is None

    # After it: the sample of a repeated customer (7) shows the digest only, and erasing
    # that customer too finds nothing new.
    after = _run(instance, [declared], resources, 2)
    assert _samples(after) == [[{KEY: {"digest": key_digest(KEY, "7")}, "len": 2}]]
    with checkpoint.open() as store:
        erase(lake, store, erasable_tables(dg.Definitions(assets=[declared])), KEY, "7")
        again = erased_values_in_event_log(instance, ErasureLedger(store).erased())
    assert again == found

    # What the module says a person does: delete the runs, and their events are gone.
    for run_id in {h.run_id for h in found}:
        instance.delete_run(run_id)
    assert erased_values_in_event_log(instance, Erased({KEY: frozenset({"42", "7"})})) == []
    assert event_log_report([]).startswith("no event")


def test_samples_and_rule_results_show_erasable_columns_by_digest():
    rows = [{KEY: 42, "day": START, "segment": None}]
    assert shown_rows(rows, (KEY,)) == [
        {KEY: {"digest": key_digest(KEY, "42")}, "day": "2024-03-01", "segment": None}
    ]
    broken = pl.DataFrame({"order_id": [1, 2], KEY: [42, 42]})
    rule = ValueRule(KEY, "allowed", allowed=(1,))
    result = value_rules_result(
        [("customer_id_allowed", rule, broken)], 2, ["order_id"], "d", (KEY,)
    )
    [entry] = result.metadata["rules"].value
    shown = {"digest": key_digest(KEY, "42")}
    assert entry["top_values"] == [{"value": shown, "rows": 2}]
    assert entry["sample"] == [{"order_id": 1, KEY: shown}, {"order_id": 2, KEY: shown}]
    # Without the declaration the values show as they are, and the finder's rule sees them.
    plain = value_rules_result([("customer_id_allowed", rule, broken)], 2, ["order_id"], "d")
    assert plain.metadata["rules"].value[0]["top_values"] == [{"value": 42, "rows": 2}]


def test_quarantine_reasons_never_show_a_value_even_with_quotes_or_separators():
    reasons = [
        f"{KEY}: value 'O'Brien' is not int64 like 42",
        f"{KEY}: value 'a; b' is not int64; segment: value 'x' does not fit int8",
    ]
    masked = top_reasons(reasons)
    assert masked == {
        f"{KEY}: value '…' is not int64 like 42": 1,
        f"{KEY}: value '…' is not int64": 1,
        "segment: value '…' does not fit int8": 1,
    }


@dg.asset
def counts_only() -> dg.MaterializeResult:
    """Metadata naming the erasable column and holding the number 42, but no customer 42."""
    return dg.MaterializeResult(
        metadata={
            "rows_checked": 42,
            "columns": dg.MetadataValue.json([KEY, "segment"]),
            "rules": dg.MetadataValue.json(
                [
                    {"rule": "customer_id_allowed", "offending_rows": 42, "top_values": []},
                    {"rule": "amount_range", "top_values": [{"value": 42, "rows": 1}]},
                    {"rule": "customer_id_range", "top_values": [{"value": 7, "rows": 42}]},
                ]
            ),
            "sample": dg.MetadataValue.json([{KEY: {"digest": key_digest(KEY, "42")}}]),
            "note": "42 rows checked",
        }
    )


def test_the_finder_reports_only_values_of_the_erased_column():
    instance = dg.DagsterInstance.ephemeral()
    done = _run(instance, [counts_only], {})
    assert erased_values_in_event_log(instance, Erased({KEY: frozenset({"42"})})) == []
    # The same value of a text naming the column, and a rule's top value, are held.
    [held] = erased_values_in_event_log(instance, Erased({KEY: frozenset({"7"})}))
    assert (held.run_id, held.entries) == (done.run_id, ("rules",))
    assert held.describe() == (
        f"run {done.run_id}: ASSET_MATERIALIZATION counts_only (rules) holds erased key(s) "
        f"{key_digest(KEY, '7')}"
    )
