"""TPC-H data in the shop's column names: what once quarantined every row now loads.

The report that started the declarations: TPC-H orders and customers laid out with the
shop's column names lost every row (status 'F', segment 'AUTOMOBILE', offsets written
'+0000', days before the shop's first day). With a first day of its own, the same
declaration loads every row; the shop's vocabulary is a WARN check that says how many rows
use other values.
"""

import datetime as dt
from pathlib import Path

import dagster as dg
import polars as pl

from idem_assets.lake import read_rows
from idem_assets.lib import default_resources, source_definitions
from idem_assets.resources import CheckpointResource, LakeResource, NotificationResource
from idem_assets.sample import CUSTOMERS_SOURCE, ORDERS_SOURCE
from idem_assets.sample.tpch import TPCH_FIRST_DAY
from idem_assets.sources import SensorOptions

DAYS = 3
LAST = TPCH_FIRST_DAY + dt.timedelta(days=DAYS - 1)


def _shop_files(landing: Path, tpchgen_output) -> tuple[int, int]:
    """TPC-H orders and customers written as the shop's exports; (orders, customers)."""
    orders = pl.read_parquet(tpchgen_output.orders_parquet).filter(
        pl.col("o_orderdate").is_between(TPCH_FIRST_DAY, LAST)
    )
    stamp = pl.col("o_orderdate").dt.strftime("%Y-%m-%dT08:54:44+0000")  # Python's %z
    shop = orders.select(
        pl.col("o_orderkey").alias("order_id"),
        pl.col("o_custkey").alias("customer_id"),
        pl.col("o_totalprice").cast(pl.String).alias("amount"),
        pl.col("o_orderstatus").alias("status"),
        pl.col("o_orderdate").alias("order_date"),
        stamp.alias("updated_at"),
    )
    for (day,), rows in shop.group_by("order_date"):
        folder = landing / "orders" / f"date={day}"
        folder.mkdir(parents=True)
        rows.write_csv(folder / "orders.csv")
    customers = pl.read_csv(tpchgen_output.customer_csv).select(
        pl.col("c_custkey").alias("customer_id"),
        pl.col("c_name").alias("name"),
        pl.lit(None, pl.String).alias("email"),
        pl.col("c_mktsegment").alias("segment"),
        pl.lit(f"{TPCH_FIRST_DAY}T00:00:00+0000").alias("updated_at"),
    )
    folder = landing / "customers" / f"date={TPCH_FIRST_DAY}"
    folder.mkdir(parents=True)
    customers.write_csv(folder / "customers.csv")
    return shop.height, customers.height


def test_tpch_in_the_shops_columns_loads_every_row_and_warns_about_its_vocabulary(
    tmp_path, tpchgen_output
):
    landing = tmp_path / "landing"
    orders_landed, customers_landed = _shop_files(landing, tpchgen_output)
    # The shop's declarations, given TPC-H's first day (and no downstream to request).
    sources = [
        s.model_copy(update={"first_day": TPCH_FIRST_DAY, "sensor": SensorOptions()})
        for s in (ORDERS_SOURCE, CUSTOMERS_SOURCE)
    ]
    lake = LakeResource(landing_dir=str(landing), lake_dir=str(tmp_path / "lake"))
    resources = default_resources(
        lake,
        CheckpointResource(url=f"sqlite:///{tmp_path / 'state.db'}"),
        NotificationResource(base_url="http://127.0.0.1:9", token="unused"),
    )
    defs = dg.Definitions.merge(
        *(source_definitions(s) for s in sources), dg.Definitions(resources=resources)
    )
    keys = [dg.AssetKey("orders"), dg.AssetKey("customers")]
    job = defs.resolve_implicit_job_def_def_for_assets(keys)
    result = job.execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        asset_selection=keys,
        raise_on_error=False,
        tags={
            "dagster/asset_partition_range_start": TPCH_FIRST_DAY.isoformat(),
            "dagster/asset_partition_range_end": LAST.isoformat(),
        },
    )
    assert result.success
    assert read_rows(lake.table("orders").open()).num_rows == orders_landed > 0
    assert read_rows(lake.table("customers").open()).num_rows == customers_landed
    assert (
        lake.table("quarantine").open() is None
        or not read_rows(lake.table("quarantine").open()).num_rows
    )

    # One evaluation per check and day of the range.
    checks: dict[tuple[str, str], list] = {}
    for e in result.get_asset_check_evaluations():
        checks.setdefault((e.asset_key.to_user_string(), e.check_name), []).append(e)
    assert {len(days) for days in checks.values()} == {(LAST - TPCH_FIRST_DAY).days + 1}
    failed = {k for k, days in checks.items() if not all(e.passed for e in days)}
    assert failed == {("orders", "value_rules"), ("customers", "value_rules")}
    assert {e.severity for k in failed for e in checks[k] if not e.passed} == {
        dg.AssetCheckSeverity.WARN
    }
    for asset, rule in (("orders", "status_allowed"), ("customers", "segment_allowed")):
        assert {tuple(e.metadata["rules_broken"].value) for e in checks[asset, "value_rules"]} <= {
            (rule,),
            (),
        }
    status = [
        next(r for r in e.metadata["rules"].value if r["rule"] == "status_allowed")
        for e in checks["orders", "value_rules"]
    ]
    # F, O and P are all foreign here: every order of every day breaks the rule.
    assert sum(day["offending_rows"] for day in status) == orders_landed
    assert {v["value"] for day in status for v in day.get("top_values", [])} <= {"F", "O", "P"}
    assert all(e.passed for e in checks["orders", "quarantine_share"])
