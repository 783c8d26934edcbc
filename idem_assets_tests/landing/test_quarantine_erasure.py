"""Erased keys in the shared quarantine table: a customer's quarantined rows go with the
erase (``erase_from_quarantine``), a rerun of the day does not write them back, and every
check still passes, conservation counting them as erased."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.lake import LakeTable, erase_key, read_rows
from idem_assets.lake.erasure import Erased
from idem_assets.landing.erasure import erase_from_quarantine, quarantine_held
from idem_assets.landing.quarantine import QUARANTINE_TABLE
from idem_assets.landing.raw import RAW_VALUE_CHARS, raw_record_json
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sources.load import declaration_from_mapping
from idem_assets_tests.harness import check_results, declared_definitions, materialization_metadata
from idem_assets_tests.landing.builders import parquet_bytes, put

START = dt.date(2024, 3, 1)
DAYS = [START, START + dt.timedelta(days=1)]
CUSTOMER = "42"
COLUMNS = [
    {"name": "payment_id", "type": "int64"},
    {"name": "customer_id", "type": "int64"},
    {"name": "amount", "type": "decimal(12,2)"},
    {"name": "payment_date", "type": "date"},
]
PAYMENTS = {
    "name": "payments",
    "first_day": START.isoformat(),
    "columns": COLUMNS,
    "natural_key": ["payment_id"],
    "partition_date": "payment_date",
    "erasable_keys": ["customer_id"],
}
# The same rows, from a source that declares no erasable key: its quarantine rows stay.
REFUNDS = {**PAYMENTS, "name": "refunds", "erasable_keys": []}
SOURCES = {"payments": ("customer_id",), "refunds": ()}


def lay_out(landing: Path) -> None:
    """Each day: a CSV with good and malformed rows of customer 42 and others, and (day 1)
    a Parquet file whose customer_id is a number, with a malformed row of 42."""
    for source in ("payments", "refunds"):
        for index, day in enumerate(DAYS):
            first = index * 100
            lines = [
                "payment_id,customer_id,amount,payment_date",
                f"{first + 1},42,10.00,{day}",
                f"{first + 2},42,abc,{day}",  # quarantined: holds 42
                f"{first + 3},7,5.00,{day}",
                f"{first + 4},7,xyz,{day}",  # quarantined: customer 7
                f"{first + 5},142,3.00,{day}",
                f"{first + 6},142,n/a,{day}",  # quarantined: 142 is not 42
            ]
            put(landing, f"{source}/date={day}/payments.csv", "\n".join(lines) + "\n")
        typed = pa.table(
            {
                "payment_id": pa.array([50, 51], pa.int64()),
                "customer_id": pa.array([42, 8], pa.int64()),
                "amount": ["oops", "2.50"],  # 42's row is quarantined
                "payment_date": [DAYS[0].isoformat()] * 2,
            }
        )
        put(landing, f"{source}/date={DAYS[0]}/typed.parquet", parquet_bytes(typed))


def quarantined(lake: LakeResource) -> dict[str, list[str]]:
    """Source -> the customer_id of each of its quarantine rows (sorted)."""
    rows = read_rows(lake.table(QUARANTINE_TABLE).open())
    out: dict[str, list[str]] = {}
    for source, record in zip(
        rows.column("source").to_pylist(), rows.column("raw_record").to_pylist(), strict=True
    ):
        out.setdefault(source, []).append(str(json.loads(record)["customer_id"]))
    return {source: sorted(ids) for source, ids in out.items()}


def world(root: Path) -> tuple[dg.Definitions, LakeResource, CheckpointResource]:
    """Both sources laid out under ``root``, their definitions, lake and checkpoint store."""
    lay_out(root / "landing")
    sources = [declaration_from_mapping(d, "test") for d in (PAYMENTS, REFUNDS)]
    defs, lake = declared_definitions(sources, root / "landing", root)
    job = dg.define_asset_job("load", selection=dg.AssetSelection.assets("payments", "refunds"))
    return (
        dg.Definitions.merge(defs, dg.Definitions(jobs=[job])),
        lake,
        CheckpointResource(url=f"sqlite:///{root / 'state.db'}"),
    )


def load(
    defs: dg.Definitions, instance: dg.DagsterInstance, engine: str = "local"
) -> list[dg.ExecuteInProcessResult]:
    """Every day of both sources on ``engine``, with their checks (all must pass)."""
    config = {"ops": {name: {"config": {"engine": engine}} for name in ("payments", "refunds")}}
    results = []
    for day in DAYS:
        result = defs.resolve_job_def("load").execute_in_process(
            partition_key=day.isoformat(), instance=instance, run_config=config
        )
        checks = check_results(result)
        assert checks and all(checks.values()), checks
        results.append(result)
    return results


def erase(lake: LakeResource, checkpoint: CheckpointResource, value: str = CUSTOMER) -> dict:
    """What ``idem-assets erase --key customer_id=<value>`` does, at the lake's level: the
    ledger first, then the table and the quarantine table."""
    with checkpoint.open() as store:
        ledger = ErasureLedger(store)
        erasure = ledger.record("customer_id", value)
        done = {
            "payments": erase_key(lake.table("payments"), "customer_id", value),
            QUARANTINE_TABLE: erase_from_quarantine(
                lake.table(QUARANTINE_TABLE), "customer_id", value, SOURCES
            ),
        }
        ledger.note(erasure, done)
    return done


def _conservation(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    found = [
        {k: getattr(v, "value", v) for k, v in e.metadata.items()}
        for e in result.get_asset_check_evaluations()
        if e.asset_key.to_user_string() == asset and e.check_name == "conservation"
    ]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_erase_takes_a_customer_out_of_the_quarantine_and_a_rerun_keeps_it_out(
    tmp_path, engine, request
):
    if engine == "spark":
        request.getfixturevalue("spark")  # the suite's one session
    defs, lake, checkpoint = world(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    load(defs, instance)
    before = quarantined(lake)
    assert before["payments"] == before["refunds"] == ["142", "142", "42", "42", "42", "7", "7"]
    stored = read_rows(lake.table(QUARANTINE_TABLE).open())
    assert {json.loads(r)["customer_id"] for r in stored.column("raw_record").to_pylist()} >= {
        42,  # the Parquet file's number
        "42",  # the CSV's text
    }

    done = erase(lake, checkpoint)
    assert done[QUARANTINE_TABLE].rows_deleted == 3
    assert done[QUARANTINE_TABLE].version is not None and done[QUARANTINE_TABLE].files_removed
    newest = lake.table(QUARANTINE_TABLE).open().history(1)[0]
    assert newest["idem.asset"] == QUARANTINE_TABLE and newest["idem.erased"]
    after = quarantined(lake)
    assert after["payments"] == ["142", "142", "7", "7"]  # 42 gone; 142 is not 42
    assert after["refunds"] == before["refunds"]  # refunds declares no erasable key
    # Erasing again is a no-op: nothing committed.
    again = erase_from_quarantine(lake.table(QUARANTINE_TABLE), "customer_id", CUSTOMER, SOURCES)
    assert (again.version, again.rows_deleted) == (None, 0)

    # Every day read again from its landing files, as a rerun or backfill does.
    results = load(defs, instance, engine)
    assert quarantined(lake) == after
    written = [materialization_metadata(r)["payments"] for r in results]
    assert {m.get("engine", "local") for m in written} == {engine}
    assert [m["quarantine_rows_erased"] for m in written] == [2, 1]
    assert [m["quarantined_rows"] for m in written] == [2, 2]
    first = _conservation(results[0], "payments")
    # 42's valid rows (CSV) and its quarantined rows (CSV and Parquet) are counted as erased.
    assert (first["raw_rows"], first["erased"], first["quarantined"]) == (8, 3, 2)
    assert first["unaccounted"] == 0
    assert _conservation(results[0], "refunds")["erased"] == 0


def _record(**fields: object) -> str:
    return raw_record_json(fields)


def test_which_quarantine_rows_hold_a_key():
    long_key = "k" * (RAW_VALUE_CHARS + 40)
    rows = pa.table(
        {
            "source": ["a", "a", "a", "a", "a", "a", "b", "a"],
            "raw_record": [
                _record(customer_id="42", amount="x"),  # text
                _record(customer_id=42, amount="x"),  # a number: compared as text
                _record(customer_id="42", **{"customer_id#2": "7"}),  # the column twice
                _record(customer_id="7", **{"customer_id#2": "42"}),  # ... 42 in the second
                _record(customer_id=long_key),  # stored cut short: the cut key holds it
                _record(customer_id="420", note="42"),  # 42 elsewhere, not in the key
                _record(customer_id="42"),  # a source that does not declare the column
                json.dumps(["42", "x"]),  # fields that could not be named
            ],
        }
    )
    erased = Erased({"customer_id": frozenset({"42", long_key})})
    held = quarantine_held(rows, erased, {"a": ("customer_id",), "b": ()})
    assert held.to_pylist() == [True, True, True, True, True, False, False, False]
    assert quarantine_held(rows, Erased(), {"a": ("customer_id",)}).to_pylist() == [False] * 8


def test_erasing_from_a_missing_or_empty_quarantine_commits_nothing(tmp_path):
    target = LakeTable(str(tmp_path / "quarantine"))
    missing = erase_from_quarantine(target, "customer_id", CUSTOMER, SOURCES)
    assert (missing.version, missing.rows_deleted) == (None, 0)
    with pytest.raises(ValueError, match="not a plain column identifier"):
        erase_from_quarantine(target, "customer_id; drop", CUSTOMER, SOURCES)


def parquet_scan(root: Path, value: str = CUSTOMER) -> set[str]:
    """Every Parquet file under the quarantine folder holding ``value`` as the customer_id
    of a raw record of a source declaring it, by reading them all."""
    folder = root / "lake" / QUARANTINE_TABLE
    found = set()
    for path in folder.rglob("*.parquet"):
        relative = path.relative_to(folder)
        if relative.parts[0] == "_delta_log":
            continue
        source = next(p.split("=", 1)[1] for p in relative.parts if p.startswith("source="))
        if "customer_id" not in SOURCES.get(source, ()):
            continue
        for record in pq.read_table(path, columns=["raw_record"]).column(0).to_pylist():
            fields = json.loads(record)
            if isinstance(fields, dict) and str(fields.get("customer_id")) == value:
                found.add(str(relative))
    return found
