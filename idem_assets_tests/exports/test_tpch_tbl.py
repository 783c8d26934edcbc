"""TPC-H in its native form, ``tpchgen-cli tbl``: headerless, ``|``-delimited, a trailing
``|`` on every line, named ``.tbl``. Declared with ``csv.header: false``,
``trailing_delimiter`` and ``suffixes: [.tbl]``, the customer snapshot and the orders days
read exactly what the generator's own Parquet holds, on both engines; reruns commit
nothing.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from idem_assets.lake import fingerprint, read_rows
from idem_assets.landing import read_snapshot
from idem_assets.sample.tpch import scale_text, tpchgen_executable
from idem_assets.sources import declaration_from_mapping
from idem_assets_tests.harness import declared_definitions

pytestmark = pytest.mark.slow

SCALE = 0.01
FIRST = dt.date(1992, 1, 1)
DAYS = 31
TBL = {"delimiter": "|", "header": False, "trailing_delimiter": True, "suffixes": [".tbl"]}
CUSTOMER = {
    "name": "tbl_customer",
    "snapshot": True,
    "layout": "tbl/customer",
    "formats": ["csv"],
    "csv": TBL,
    "natural_key": ["c_custkey"],
    "columns": [
        {"name": "c_custkey", "type": "int64"},
        {"name": "c_name", "type": "string"},
        {"name": "c_address", "type": "string"},
        {"name": "c_nationkey", "type": "int64"},
        {"name": "c_phone", "type": "string"},
        {"name": "c_acctbal", "type": "decimal(15,2)"},
        {"name": "c_mktsegment", "type": "string"},
        {"name": "c_comment", "type": "string"},
    ],
}
ORDERS = {
    "name": "tbl_orders",
    "first_day": FIRST.isoformat(),
    "layout": "tbl/orders/date={date}",
    "formats": ["csv"],
    "csv": TBL,
    "natural_key": ["o_orderkey"],
    "partition_date": "o_orderdate",
    "columns": [
        {"name": "o_orderkey", "type": "int64"},
        {"name": "o_custkey", "type": "int64"},
        {"name": "o_orderstatus", "type": "string"},
        {"name": "o_totalprice", "type": "decimal(15,2)"},
        {"name": "o_orderdate", "type": "date"},
        {"name": "o_orderpriority", "type": "string"},
        {"name": "o_clerk", "type": "string"},
        {"name": "o_shippriority", "type": "int32"},
        {"name": "o_comment", "type": "string"},
    ],
}


def _tpchgen(fmt: str, folder: Path) -> None:
    subprocess.run(
        [
            tpchgen_executable(),
            fmt,
            "--scale-factor",
            scale_text(SCALE),
            "--tables",
            "customer",
            "--tables",
            "orders",
            "--output-dir",
            str(folder),
            "--quiet",
        ],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """tpchgen's .tbl files laid out as landing files (lines untouched), and its Parquet."""
    root = tmp_path_factory.mktemp("tbl")
    _tpchgen("tbl", root / "tbl-out")
    _tpchgen("parquet", root / "parquet")
    landing = root / "landing"
    (landing / "tbl" / "customer").mkdir(parents=True)
    (landing / "tbl" / "customer" / "customer.tbl").write_bytes(
        (root / "tbl-out" / "customer.tbl").read_bytes()
    )
    by_day: dict[str, list[bytes]] = {}
    for line in (root / "tbl-out" / "orders.tbl").read_bytes().splitlines(keepends=True):
        day = line.split(b"|")[4].decode()
        if FIRST.isoformat() <= day < (FIRST + dt.timedelta(days=DAYS)).isoformat():
            by_day.setdefault(day, []).append(line)
    for day, lines in by_day.items():
        folder = landing / "tbl" / "orders" / f"date={day}"
        folder.mkdir(parents=True)
        (folder / "orders.tbl").write_bytes(b"".join(lines))
    return landing, root / "parquet"


def _generator_rows(path: Path, schema: pa.Schema) -> pa.Table:
    return pq.read_table(path).cast(schema)


def test_the_tbl_snapshot_and_days_read_exactly_what_tpchgen_generated(generated, engine_read_days):
    landing, parquet = generated
    customer = declaration_from_mapping(CUSTOMER, "customer").contract()
    batch = read_snapshot(landing, customer)
    assert batch.quarantine.num_rows == 0
    want = _generator_rows(parquet / "customer.parquet", customer.schema)
    assert batch.rows.sort_by("c_custkey").equals(want.sort_by("c_custkey"))

    orders = declaration_from_mapping(ORDERS, "orders").contract()
    end = FIRST + dt.timedelta(days=DAYS)
    days = engine_read_days(landing, orders, FIRST, end)  # on both engines
    assert days.quarantine.num_rows == 0 and days.rows.num_rows > 0
    generated_orders = _generator_rows(parquet / "orders.parquet", orders.schema)
    window = pc.and_(
        pc.greater_equal(generated_orders["o_orderdate"], pa.scalar(FIRST)),
        pc.less(generated_orders["o_orderdate"], pa.scalar(end)),
    )
    want = generated_orders.filter(window).sort_by("o_orderkey")
    assert days.rows.cast(orders.schema).sort_by("o_orderkey").equals(want)
    # Trailing spaces of comments are kept: the text is stored as delivered.
    assert any(c.endswith(" ") for c in want.column("o_comment").to_pylist())


def test_the_tbl_sources_through_dagster_rerun_without_a_commit(generated, tmp_path):
    landing, _ = generated
    sources = [declaration_from_mapping(d, d["name"]) for d in (CUSTOMER, ORDERS)]
    defs, lake = declared_definitions(sources, landing, tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    customer_job = defs.resolve_implicit_job_def_def_for_assets([dg.AssetKey("tbl_customer")])
    orders_job = defs.resolve_implicit_job_def_def_for_assets([dg.AssetKey("tbl_orders")])
    tags = {
        "dagster/asset_partition_range_start": FIRST.isoformat(),
        "dagster/asset_partition_range_end": (FIRST + dt.timedelta(days=DAYS - 1)).isoformat(),
    }

    def run_all() -> list[dg.ExecuteInProcessResult]:
        return [
            customer_job.execute_in_process(
                instance=instance,
                asset_selection=[dg.AssetKey("tbl_customer")],
                raise_on_error=False,
            ),
            orders_job.execute_in_process(
                instance=instance,
                tags=tags,
                asset_selection=[dg.AssetKey("tbl_orders")],
                raise_on_error=False,
            ),
        ]

    first = run_all()
    assert all(r.success for r in first)
    for result in first:
        failed = [e.check_name for e in result.get_asset_check_evaluations() if not e.passed]
        assert not failed, failed
    versions = {t: lake.table(t).open().version() for t in ("tbl_customer", "tbl_orders")}
    prints = {t: fingerprint(read_rows(lake.table(t).open())) for t in versions}
    assert all(r.success for r in run_all())
    assert {t: lake.table(t).open().version() for t in versions} == versions
    assert {t: fingerprint(read_rows(lake.table(t).open())) for t in versions} == prints
