"""The TPC-H layout: deterministic, complete, and TPC-H's data unchanged (real tpchgen-cli)."""

import datetime as dt
import gzip
import io
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from idem_assets.landing import day_signature, snapshot_signature
from idem_assets.sample.tpch import TPCH_FIRST_DAY, lay_out_tpch, tpchgen_executable
from idem_assets.sources import load_source
from idem_assets_tests.tpch.conftest import DAYS, SCALE

ROOT = Path(__file__).resolve().parents[2]
DEFS = ROOT / "idem_assets" / "defs" / "tpch"
WINDOW = [TPCH_FIRST_DAY + dt.timedelta(days=i) for i in range(DAYS)]
END = TPCH_FIRST_DAY + dt.timedelta(days=DAYS)


def landed_files(landing: Path) -> dict[str, bytes]:
    """relpath -> bytes of every file under ``landing/tpch``."""
    return {
        p.relative_to(landing).as_posix(): p.read_bytes()
        for p in sorted((landing / "tpch").rglob("*"))
        if p.is_file()
    }


def stamps(landing: Path) -> dict[str, tuple[int, int, int]]:
    """relpath -> (inode, mtime, ctime): moves whenever a file is written again."""
    out = {}
    for path in (landing / "tpch").rglob("*"):
        if path.is_file():
            st = path.stat()
            out[path.relative_to(landing).as_posix()] = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    return out


def signatures(landing: Path) -> dict[str, str | None]:
    """The reader's content signature of every TPC-H day and of the customer snapshot."""
    out: dict[str, str | None] = {}
    for table in ("orders", "lineitem"):
        contract = load_source(DEFS / table / "defs.yaml").contract()
        out |= {f"{table}/{day}": day_signature(landing, contract, day) for day in WINDOW}
    customer = load_source(DEFS / "customer" / "defs.yaml").contract()
    return out | {"customer": snapshot_signature(landing, customer)}


def test_two_layouts_are_byte_identical_and_a_rerun_writes_nothing(tpch_landing, tmp_path):
    first = tpch_landing.out_dir
    again = lay_out_tpch(tmp_path, SCALE, DAYS)
    assert landed_files(tmp_path) == landed_files(first)
    assert signatures(tmp_path) == signatures(first)
    assert again.as_dict() | {"out_dir": ""} == tpch_landing.as_dict() | {"out_dir": ""}
    before = stamps(tmp_path)
    rerun = lay_out_tpch(tmp_path, SCALE, DAYS)
    assert rerun.changed_files == 0
    assert stamps(tmp_path) == before  # not even rewritten with the same bytes
    hidden = [p for p in (tmp_path / "tpch").rglob(".*")]
    assert hidden == []  # no staged temp file is left behind


def test_layout_has_the_declared_folders_and_names(tpch_landing):
    files = landed_files(tpch_landing.out_dir)
    assert "tpch/customer/customer-0.01.csv" in files
    assert "tpch/orders/date=1992-01-01/orders.parquet" in files
    assert "tpch/lineitem/1992/01/04/lineitem.csv.gz" in files  # the first ship date
    for relpath in files:
        table = relpath.split("/")[1]
        assert relpath.endswith(
            {"orders": ".parquet", "lineitem": ".csv.gz", "customer": ".csv"}[table]
        ), relpath
    assert tpch_landing.files == {
        "orders": sum(r.startswith("tpch/orders/") for r in files),
        "lineitem": sum(r.startswith("tpch/lineitem/") for r in files),
        "customer": 1,
    }


def test_every_order_of_the_window_lands_once_in_its_day_unchanged(tpch_landing, tpchgen_output):
    schema = pq.read_schema(tpchgen_output.orders_parquet)
    expected = pl.read_parquet(tpchgen_output.orders_parquet).filter(
        pl.col("o_orderdate").is_between(TPCH_FIRST_DAY, END, closed="left")
    )
    parts = []
    for path in sorted((tpch_landing.out_dir / "tpch" / "orders").rglob("*.parquet")):
        assert pq.read_schema(path).equals(schema, check_metadata=True)  # tpchgen's types
        part = pl.read_parquet(path)
        day = dt.date.fromisoformat(path.parent.name.removeprefix("date="))
        assert part["o_orderdate"].unique().to_list() == [day]
        parts.append(part)
    landed = pl.concat(parts)
    assert landed.height == expected.height == tpch_landing.rows["orders"] > 0
    assert landed.sort("o_orderkey").equals(expected.sort("o_orderkey"))


def test_every_lineitem_of_the_window_lands_once_as_its_original_line(tpch_landing, tpchgen_output):
    header, *lines = io.BytesIO(tpchgen_output.lineitem_csv.read_bytes()).readlines()
    shipdates = pl.read_csv(
        tpchgen_output.lineitem_csv,
        columns=["l_shipdate"],
        schema_overrides={"l_shipdate": pl.String},
    )["l_shipdate"]
    window = {day.isoformat() for day in WINDOW}
    expected = sorted(line for line, day in zip(lines, shipdates, strict=True) if day in window)
    landed = []
    for path in sorted((tpch_landing.out_dir / "tpch" / "lineitem").rglob("*.csv.gz")):
        day = "-".join(path.parent.relative_to(path.parents[3]).parts)
        first, *rows = io.BytesIO(gzip.decompress(path.read_bytes())).readlines()
        assert first == header and rows
        assert set(pl.read_csv(path, schema_overrides={"l_shipdate": pl.String})["l_shipdate"]) == {
            day
        }
        landed.extend(rows)
    assert len(landed) == len(expected) == tpch_landing.rows["lineitem"] > 0
    assert sorted(landed) == expected  # byte for byte, each line exactly once


def test_customer_snapshot_is_tpchgens_file(tpch_landing, tpchgen_output):
    snapshot = tpch_landing.out_dir / "tpch" / "customer" / f"customer-{SCALE:g}.csv"
    assert snapshot.read_bytes() == tpchgen_output.customer_csv.read_bytes()
    assert tpch_landing.rows["customer"] == 1500  # TPC-H: 150,000 customers per unit of scale


def test_declared_columns_are_tpchs_own_names_and_types(tmp_path):
    out = tmp_path / "parquet"
    subprocess.run(
        [
            tpchgen_executable(),
            "parquet",
            "--scale-factor",
            f"{SCALE:g}",
            "--quiet",
            "--output-dir",
            str(out),
            "--tables",
            "orders",
            "--tables",
            "lineitem",
            "--tables",
            "customer",
        ],
        check=True,
    )
    for table in ("orders", "lineitem", "customer"):
        schema = pq.read_schema(out / f"{table}.parquet")
        declared = load_source(DEFS / table / "defs.yaml").table_schema()
        assert declared.names == schema.names, table
        for field in schema:
            kind = pa.string() if field.type == pa.string_view() else field.type
            assert declared.field(field.name).type == kind, (table, field.name)


def test_a_missing_tpchgen_cli_is_named_with_its_package(tmp_path):
    # A Python without tpchgen-cli beside it or on PATH: the base interpreter, given the
    # virtualenv's libraries and this project on PYTHONPATH.
    base = Path(getattr(sys, "_base_executable", sys.executable))
    if base.with_name("tpchgen-cli").exists():
        pytest.skip(f"tpchgen-cli is installed beside the base interpreter {base}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.symlink_to(base)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "PYTHONPATH": os.pathsep.join([sysconfig.get_paths()["purelib"], str(ROOT)]),
    }
    done = subprocess.run(
        [str(python), "-m", "idem_assets.sample", "tpch", "--out", str(tmp_path / "landing")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "install the PyPI package tpchgen-cli" in done.stderr
    assert not (tmp_path / "landing").exists()
