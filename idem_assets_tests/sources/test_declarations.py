"""Declarations: every mistake fails at load time, naming the file, field and what is allowed."""

from __future__ import annotations

import datetime as dt
import sys
import textwrap
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
import yaml

from idem_assets.lib import source_definitions
from idem_assets.partitions import daily_partitions
from idem_assets.sample.sources import DEFS_DIR, EVENTS_SOURCE, ORDERS, ORDERS_SOURCE
from idem_assets.sources import (
    AllowedRule,
    Column,
    DailySource,
    DeclarationError,
    LandingSource,
    NonNegativeRule,
    SnapshotSource,
    load_source,
)
from idem_assets.sources.__main__ import main

GOOD: dict[str, Any] = {
    "name": "feed",
    "first_day": "2024-03-01",
    "columns": [
        {"name": "id", "type": "int64"},
        {"name": "day", "type": "date"},
        {"name": "at", "type": "timestamp"},
        {"name": "label", "type": "string"},
    ],
    "natural_key": ["id"],
    "version": "at",
    "partition_date": "day",
}


def write(folder: Path, attributes: dict[str, Any]) -> Path:
    path = folder / "defs.yaml"
    path.write_text(
        yaml.safe_dump(
            {"type": "idem_assets.lib.LandingSourceComponent", "attributes": attributes},
            sort_keys=False,
        )
    )
    return path


def with_(**changes: Any) -> dict[str, Any]:
    """GOOD with top-level fields replaced (None removes one)."""
    out = {**GOOD, **changes}
    return {k: v for k, v in out.items() if v is not None}


def column(name: str, **fields: Any) -> dict[str, Any]:
    """GOOD with one column's fields changed."""
    columns = [{**c, **fields} if c["name"] == name else c for c in GOOD["columns"]]
    return with_(columns=columns)


def test_a_good_declaration_loads_with_defaults(tmp_path):
    source = load_source(write(tmp_path, GOOD))
    assert source.resolved_strategy == "overwrite"
    assert source.resolved_partition_column == "day"
    contract = source.contract()
    assert contract.layout.folder(dt.date(2024, 3, 1)) == "feed/date=2024-03-01"
    assert contract.schema.field("id").nullable is False
    assert contract.schema.field("at").type == pa.timestamp("us", tz="UTC")


CASES = [
    (
        with_(colums=[]),
        "colums: unknown field; allowed: asset, backfill, change_data_feed, checks, code_version",
    ),
    (
        column("at", type="datetime"),
        "columns[2].type: 'datetime' is not a column type; allowed: "
        "int64, int32, float64, bool, string, date, timestamp, decimal(P,S)",
    ),
    (column("at", type="decimal(40,2)"), "decimal(40,2) needs 1 <= P <= 38 and S <= P"),
    (column("id", nullable="sometimes"), "columns[0].nullable: Input should be a valid boolean"),
    (
        with_(natural_key=["order_id"]),
        "natural_key: 'order_id' is not a declared column (declared: id, day, at, label)",
    ),
    (
        with_(version="label"),
        "version: 'label' has type string; it must be a timestamp or date "
        "or integer or decimal column",
    ),
    (
        with_(partition_date="at"),
        "partition_date: 'at' has type timestamp; it must be a date column",
    ),
    (with_(first_day=None), "first_day: a daily source needs its first partition day"),
    (with_(first_day="2024-02-30"), "first_day: Input should be a valid date"),
    (
        with_(last_day="2024-02-29"),
        "last_day: 2024-02-29 is before first_day 2024-03-01; the partitions run from "
        "first_day through last_day (both included), so last_day is first_day or later",
    ),
    (with_(last_day="2024-03-32"), "last_day: Input should be a valid date"),
    (
        with_(last_day={"env": "IDEM_TEST_LAST_DAY", "days": 3}),
        "last_day: a day from the environment is {env: VARIABLE, default: YYYY-MM-DD}; "
        "unknown key(s): days",
    ),
    (
        with_(partition_date=None, strategy="overwrite"),
        "strategy overwrite replaces the run's days, so it needs partition_date",
    ),
    (
        with_(strategy="upsert"),
        "strategy: Input should be 'overwrite', 'merge', 'replace' or 'history'",
    ),
    (with_(strategy="replace"), "strategy: replace is for snapshot sources"),
    (with_(snapshot=True), "first_day: a snapshot source has no partitions; remove it"),
    (
        with_(snapshot=True, first_day=None, last_day="2024-03-03"),
        "last_day: a snapshot source has no partitions; remove it",
    ),
    (with_(layout="{source}/latest"), "layout '{source}/latest' names no day"),
    (
        with_(layout="{source}/{day}"),
        "layout '{source}/{day}' has unknown placeholder(s) day; "
        "allowed: {source}, {date}, {yyyy}, {mm}, {dd}",
    ),
    (with_(layout="{source}/{yyyy}/{mm}"), "names part of a day: add {dd}"),
    (with_(layout="../{source}/{date}"), "segment '..' may hold only letters"),
    (with_(layout="/abs/{date}"), "must be a relative folder path"),
    (with_(formats=["xlsx"]), "formats[0]: Input should be 'parquet', 'csv' or 'jsonl'"),
    (
        with_(timezone="CEST"),
        "timezone: 'CEST' is not an IANA time zone such as UTC or Europe/Berlin",
    ),
    (with_(csv={"delimiter": ";;"}), "csv.delimiter: delimiter ';;' must be one character"),
    (
        with_(numbers={"decimal": ",", "thousands": ","}),
        "the thousands separator cannot also be the decimal separator ','",
    ),
    (with_(numbers={"decimal": ";"}), "decimal separator ';' is not one of '.', ','"),
    (with_(name="Orders"), "name: 'Orders' must be lower case letters, digits and _"),
    (
        column("label", rules=[{"allowed": ["a"], "pattern": "b"}]),
        "a rule sets exactly one of "
        "allowed, pattern, non_negative, or min and/or max (this one sets allowed, pattern)",
    ),
    (
        column("label", rules=[{"pattern": "(?<=x)y"}]),
        "is not a regular expression the reader accepts",
    ),
    (
        column("label", rules=[{"min": 3}]),
        "label: min applies to numbers, dates and timestamps, not string",
    ),
    (
        column("day", rules=[{"allowed": ["x"]}]),
        "day: allowed applies to string and integer columns, not date",
    ),
    (column("id", rules=[{"min": 10, "max": 1}]), "id: min 10 is above max 1"),
    (column("id", rules=[{"max": "ten"}]), "id: max 'ten' is not a int64 value"),
    (
        column("id", rules=[{"allowed": [1], "severity": "fatal"}]),
        "severity: Input should be 'warn', 'error' or 'quarantine'",
    ),
    (column("label", epoch="seconds"), "label: epoch applies to timestamp columns, not string"),
    (
        with_(columns=[*GOOD["columns"], {"name": "id", "type": "int32"}]),
        "columns: id declared more than once",
    ),
    (
        with_(columns=[*GOOD["columns"], {"name": "other", "type": "string", "from": "label"}]),
        "columns: file column(s) label read more than once",
    ),
    (
        with_(columns=[*GOOD["columns"], {"name": "d2", "type": "date", "date_of": "label"}]),
        "d2: date_of: 'label' has type string; it must be a timestamp column",
    ),
    (with_(prune_columns=["id"]), "prune_columns applies to the merge and history strategies only"),
    (
        with_(checks={"quarantine_share": 2}),
        "checks.quarantine_share: Input should be less than or equal to 1",
    ),
]


@pytest.mark.parametrize(("attributes", "message"), CASES)
def test_every_bad_declaration_names_file_field_and_what_is_allowed(tmp_path, attributes, message):
    path = write(tmp_path, attributes)
    with pytest.raises(DeclarationError) as raised:
        load_source(path)
    text = str(raised.value)
    assert text.startswith(f"{path}: invalid source declaration:")
    assert message in text, text


def test_a_file_that_is_not_a_declaration(tmp_path):
    path = tmp_path / "defs.yaml"
    path.write_text("type: dagster.SomethingElse\nattributes: {}\n")
    with pytest.raises(
        DeclarationError,
        match="a source declaration has type idem_assets.lib.LandingSourceComponent",
    ):
        load_source(path)
    path.write_text("name: [unclosed\n")
    with pytest.raises(DeclarationError, match="cannot read the declaration"):
        load_source(path)


def test_python_and_yaml_declarations_are_the_same_thing():
    python = DailySource(
        name="orders",
        description=ORDERS_SOURCE.description,
        first_day=dt.date(2024, 3, 1),
        owners=("team:data-platform",),
        columns=(
            Column(name="order_id", type="int64", description="Natural key; one row per order."),
            Column(name="customer_id", type="int64"),
            Column(
                name="amount",
                type="decimal(18,2)",
                description="Order value, decimal(18,2).",
                rules=(NonNegativeRule(),),
            ),
            Column(
                name="status",
                type="string",
                description=ORDERS_SOURCE.columns[3].description,
                rules=(
                    AllowedRule(
                        allowed=("placed", "paid", "shipped", "delivered", "cancelled", "refunded")
                    ),
                ),
            ),
            Column(
                name="order_date",
                type="date",
                description="Delta partition column and Dagster daily partition.",
            ),
            Column(
                name="updated_at",
                type="timestamp",
                description="Version: the newest updated_at of an order wins.",
            ),
        ),
        natural_key=("order_id",),
        erasable_keys=("customer_id",),
        version="updated_at",
        partition_date="order_date",
        strategy="overwrite",
        checks={"blocking": True},
        sensor={"also_request": ["daily_sales"]},
    )
    assert python == ORDERS_SOURCE
    assert python.contract() == ORDERS


def test_a_derived_date_column_is_part_of_the_table_not_of_the_files():
    assert "event_date" not in EVENTS_SOURCE.contract().columns
    assert EVENTS_SOURCE.table_schema().names[-1] == "event_date"


def test_cli_check_reports_every_declaration(tmp_path, capsys):
    good = tmp_path / "good"
    bad = tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    write(good, GOOD)
    write(bad, with_(version="label"))
    assert main(["check", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert f"{good / 'defs.yaml'}: ok (feed: 4 columns, overwrite)" in out
    assert f"{bad / 'defs.yaml'}: invalid source declaration" in err
    assert main(["check", str(DEFS_DIR)]) == 0


def test_dagster_refuses_a_bad_declaration_naming_the_file_and_field(tmp_path):
    """The code location fails to load, as `dg check defs` and the UI would show it."""
    project = tmp_path / "project"
    package = project / "demo_defs"
    source = package / "defs" / "feed"
    source.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [tool.dg]
        directory_type = "project"
        [tool.dg.project]
        root_module = "demo_defs"
        defs_module = "demo_defs.defs"
        """)
    )
    path = write(source, column("at", type="datetime"))
    sys.path.insert(0, str(project))
    try:
        with pytest.raises(Exception) as raised:
            dg.load_from_defs_folder(path_within_project=project)
    finally:
        sys.path.remove(str(project))
        for name in [m for m in sys.modules if m.startswith("demo_defs")]:
            del sys.modules[name]
    text = "\n".join(str(e) for e in _chain(raised.value))
    assert f"attributes.columns.2.type at {path}:" in text, text
    assert "'datetime' is not a column type; allowed: int64" in text, text


def _chain(error: BaseException):
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def test_each_rule_kind_is_chosen_by_its_key_and_compiled_once_against_its_column(tmp_path):
    """A rule's key picks its kind (``min: 0`` is a range, not a missing rule); its values are
    typed when the declaration loads, and the contract carries exactly those compiled rules."""
    with pytest.raises(DeclarationError, match="this one sets none"):
        load_source(
            write(
                tmp_path,
                with_(
                    columns=[
                        *GOOD["columns"][:3],
                        {"name": "label", "type": "string", "rules": [{"non_negative": False}]},
                    ]
                ),
            )
        )
    source = load_source(
        write(
            tmp_path,
            with_(
                columns=[
                    {"name": "id", "type": "bigint", "rules": [{"min": 0, "max": 10}]},
                    {"name": "day", "type": "date", "rules": [{"max": "2030-01-01"}]},
                    {"name": "at", "type": "timestamp"},
                    {"name": "label", "type": "string", "rules": [{"allowed": ["a", 1]}]},
                ]
            ),
        )
    )
    id_, day, _, label = source.columns
    assert str(id_.type) == "int64" and id_.type.arrow() == pa.int64()
    assert [(r.kind, r.low, r.high) for r in id_.value_rules] == [("range", 0, 10)]
    assert [(r.kind, r.high) for r in day.value_rules] == [("range", dt.date(2030, 1, 1))]
    assert [(r.kind, r.allowed) for r in label.value_rules] == [("allowed", ("a", "1"))]
    assert source.contract().rules == (*id_.value_rules, *day.value_rules, *label.value_rules)


def test_a_source_is_of_one_kind_and_has_only_that_kinds_fields(tmp_path):
    daily = load_source(write(tmp_path, GOOD))
    assert isinstance(daily, DailySource) and daily.first_day == dt.date(2024, 3, 1)
    snapshot = load_source(
        write(tmp_path, with_(snapshot=True, first_day=None, partition_date=None, version=None))
    )
    assert isinstance(snapshot, SnapshotSource) and snapshot.resolved_strategy == "replace"
    assert not hasattr(snapshot, "first_day") and snapshot.contract().daily is False
    with pytest.raises(TypeError, match="declare a DailySource"):
        LandingSource(**GOOD)


def partition_keys(source: LandingSource) -> list[str]:
    """The partition keys of the asset a declared source yields."""
    (asset,) = source_definitions(source).assets or ()
    assert isinstance(asset, dg.AssetsDefinition) and asset.partitions_def is not None
    return asset.partitions_def.get_partition_keys()


def test_last_day_ends_the_partitions_it_includes(tmp_path):
    source = load_source(write(tmp_path, with_(last_day="2024-03-03")))
    assert isinstance(source, DailySource) and source.last_day == dt.date(2024, 3, 3)
    assert partition_keys(source) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert source.contract().last_day == dt.date(2024, 3, 3)
    # Dagster's end_date is exclusive: the day after the last partition.
    partitions = daily_partitions(source.first_day, source.last_day)
    assert partitions.end is not None and partitions.end.date() == dt.date(2024, 3, 4)
    # first_day == last_day is one partition.
    one = load_source(write(tmp_path, with_(last_day="2024-03-01")))
    assert partition_keys(one) == ["2024-03-01"]


def test_without_last_day_the_partitions_run_up_to_today(tmp_path):
    source = load_source(write(tmp_path, GOOD))
    assert isinstance(source, DailySource) and source.last_day is None
    assert source.contract().last_day is None
    keys = partition_keys(source)
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    assert keys[0] == "2024-03-01" and keys[-1] >= yesterday.isoformat()


def test_last_day_may_come_from_the_environment(tmp_path, monkeypatch):
    attributes = with_(last_day={"env": "IDEM_TEST_LAST_DAY", "default": "2024-03-03"})
    monkeypatch.delenv("IDEM_TEST_LAST_DAY", raising=False)
    unset = load_source(write(tmp_path, attributes))
    assert isinstance(unset, DailySource) and unset.last_day == dt.date(2024, 3, 3)
    assert partition_keys(unset) == ["2024-03-01", "2024-03-02", "2024-03-03"]

    monkeypatch.setenv("IDEM_TEST_LAST_DAY", "2024-03-05")
    set_ = load_source(write(tmp_path, attributes))
    assert isinstance(set_, DailySource) and set_.last_day == dt.date(2024, 3, 5)
    assert partition_keys(set_)[-1] == "2024-03-05" and len(partition_keys(set_)) == 5

    # A day from the environment is judged like a written one.
    monkeypatch.setenv("IDEM_TEST_LAST_DAY", "2024-02-01")
    path = write(tmp_path, attributes)
    with pytest.raises(DeclarationError) as raised:
        load_source(path)
    assert "last_day: 2024-02-01 is before first_day 2024-03-01" in str(raised.value)

    # Without the variable and without a default there is no day to read.
    monkeypatch.delenv("IDEM_TEST_LAST_DAY")
    path = write(tmp_path, with_(last_day={"env": "IDEM_TEST_LAST_DAY"}))
    with pytest.raises(DeclarationError, match="IDEM_TEST_LAST_DAY is not set and no default"):
        load_source(path)


def test_last_day_in_python_and_in_daily_partitions():
    source = DailySource.model_validate({**GOOD, "last_day": dt.date(2024, 3, 2)})
    assert partition_keys(source) == ["2024-03-01", "2024-03-02"]
    with pytest.raises(ValueError, match="2024-02-01 is before first_day 2024-03-01"):
        DailySource.model_validate({**GOOD, "last_day": "2024-02-01"})
    with pytest.raises(ValueError, match="last_day 2024-02-01 is before first_day 2024-03-01"):
        daily_partitions(dt.date(2024, 3, 1), dt.date(2024, 2, 1))
    # Equal first and last days, equal definitions: their assets share jobs and backfills.
    assert daily_partitions(dt.date(2024, 3, 1), dt.date(2024, 3, 2)) == daily_partitions(
        dt.date(2024, 3, 1), dt.date(2024, 3, 2)
    )
