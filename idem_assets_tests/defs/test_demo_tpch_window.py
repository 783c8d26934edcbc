"""`make demo`'s TPC-H range: the laid-out days that are partitions of the TPC-H assets."""

import datetime as dt

from idem_assets import demo
from idem_assets.resources import LakeResource


def lay_out_orders(landing, first: dt.date, days: int) -> None:
    """A (content-free) order file in each of ``days`` day folders from ``first``."""
    for i in range(days):
        folder = landing / "tpch" / "orders" / f"date={first + dt.timedelta(days=i)}"
        folder.mkdir(parents=True)
        (folder / "orders.parquet").write_bytes(b"PAR1")


def test_the_tpch_window_ends_at_the_last_partition_day(tmp_path, monkeypatch):
    landing = tmp_path / "landing"
    landing.mkdir()
    lake = LakeResource(landing_dir=str(landing), lake_dir=str(tmp_path / "lake"))
    assert demo.tpch_window(lake) is None
    # More days than the partitions hold (an earlier, longer TPCH_DAYS): the range stops
    # at the last partition day, which Dagster would otherwise refuse.
    lay_out_orders(landing, dt.date(1992, 1, 1), 40)
    monkeypatch.delenv("IDEM_TPCH_LAST_DAY", raising=False)
    assert demo.tpch_window(lake) == ("1992-01-01", "1992-01-31")
    monkeypatch.setenv("IDEM_TPCH_LAST_DAY", "1992-02-09")
    assert demo.tpch_window(lake) == ("1992-01-01", "1992-02-09")
    monkeypatch.setenv("IDEM_TPCH_LAST_DAY", "1998-08-02")
    assert demo.tpch_window(lake) == ("1992-01-01", "1992-02-09")
