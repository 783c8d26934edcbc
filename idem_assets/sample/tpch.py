"""TPC-H landing files from ``tpchgen-cli``, laid out the way real exports arrive.

The data is TPC-H's own (column names, values and dates from 1992-01-01 on), never
rewritten; only its files are cut into the landing shapes the ``tpch`` declarations read:

- ``tpch/orders/date=YYYY-MM-DD/orders.parquet``: tpchgen's Parquet, rows of one
  ``o_orderdate`` each (filtered with pyarrow, schema kept);
- ``tpch/lineitem/YYYY/MM/DD/lineitem.csv.gz``: tpchgen's CSV split by ``l_shipdate``
  as text (the header line and the original lines, byte for byte), gzip-compressed;
- ``tpch/customer/customer-<scale>.csv``: tpchgen's customer CSV as one snapshot.

Both daily sources cover the same window of days from 1992-01-01. TPC-H ships a line item
1 to 121 days after its order, so every line item shipped in the window belongs to an
order of the window (most of a window's orders ship after it). Files are written
atomically and only when their bytes change, so laying out the same arguments again is a
no-op.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from idem_assets.sample.writers import write_atomically

TPCH_FIRST_DAY = dt.date(1992, 1, 1)
DEFAULT_SCALE = 0.01
DEFAULT_DAYS = 31
TPCHGEN_PACKAGE = "tpchgen-cli"
TPCH_ROOT = "tpch"
TABLES = ("orders", "lineitem", "customer")


class TpchgenError(RuntimeError):
    """tpchgen-cli is missing, failed, or wrote something this layout cannot split."""


@dataclass(frozen=True)
class TpchgenOutput:
    """The files one tpchgen-cli run wrote (in a temporary folder)."""

    orders_parquet: Path
    lineitem_csv: Path
    customer_csv: Path


@dataclass(frozen=True)
class TpchLayoutSummary:
    """What ``lay_out_tpch`` landed: files and rows per table, and how many files changed."""

    out_dir: Path
    scale: float
    first_day: dt.date
    days: int
    files: dict[str, int]
    rows: dict[str, int]
    changed_files: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, for the CLI."""
        return {
            "out_dir": str(self.out_dir),
            "scale": self.scale,
            "first_day": self.first_day.isoformat(),
            "days": self.days,
            "files": self.files,
            "rows": self.rows,
            "changed_files": self.changed_files,
        }


def tpchgen_executable() -> str:
    """The tpchgen-cli program: beside this Python (a virtualenv), else on PATH."""
    beside = Path(sys.executable).with_name(TPCHGEN_PACKAGE)
    if beside.is_file():
        return str(beside)
    found = shutil.which(TPCHGEN_PACKAGE)
    if found is None:
        raise TpchgenError(
            f"{TPCHGEN_PACKAGE} is not installed: install the PyPI package {TPCHGEN_PACKAGE} "
            f"(pip install {TPCHGEN_PACKAGE}, or the project's bench extra: "
            "pip install 'idem_assets[bench]')"
        )
    return found


def scale_text(scale: float) -> str:
    """The scale factor as tpchgen-cli and the snapshot file name spell it (``0.01``)."""
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    return f"{scale:g}"


def run_tpchgen(scale: float, folder: Path) -> TpchgenOutput:
    """Generate orders (Parquet), lineitem and customer (CSV) into ``folder``."""
    program = tpchgen_executable()
    runs = {"parquet": ("orders",), "csv": ("lineitem", "customer")}
    commands = [
        [
            program,
            fmt,
            "--scale-factor",
            scale_text(scale),
            "--output-dir",
            str(folder / fmt),
            "--quiet",
            *(a for t in tables for a in ("--tables", t)),
        ]
        for fmt, tables in runs.items()
    ]
    # Each run spends most of its time on fixed start-up work, so both run at once.
    running = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command in commands
    ]
    for command, process in zip(commands, running, strict=True):
        output, _ = process.communicate()
        if process.returncode != 0:
            raise TpchgenError(
                f"{' '.join(command)} failed ({process.returncode}): {output.strip()}"
            )
    return TpchgenOutput(
        orders_parquet=folder / "parquet" / "orders.parquet",
        lineitem_csv=folder / "csv" / "lineitem.csv",
        customer_csv=folder / "csv" / "customer.csv",
    )


def window_days(days: int) -> list[dt.date]:
    """The ``days`` consecutive days from TPC-H's first order date."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    return [TPCH_FIRST_DAY + dt.timedelta(days=i) for i in range(days)]


def orders_by_day(orders: pa.Table, days: list[dt.date]) -> dict[dt.date, pa.Table]:
    """The orders of each day of ``days`` that has any, in tpchgen's row order and schema."""
    # pyarrow cannot filter or take string_view columns (tpchgen writes its text as
    # string_view), so rows are picked as plain strings and cast back to tpchgen's schema.
    plain = pa.schema(
        [f.with_type(pa.string()) if f.type == pa.string_view() else f for f in orders.schema],
        metadata=orders.schema.metadata,
    )
    pickable = orders.cast(plain)
    dates = pickable.column("o_orderdate")
    first, end = (pa.scalar(d, pa.date32()) for d in (days[0], days[-1] + dt.timedelta(1)))
    window = pickable.filter(pc.and_(pc.greater_equal(dates, first), pc.less(dates, end)))
    # A stable sort by date keeps tpchgen's order within each day.
    by_date = window.take(pc.sort_indices(window, [("o_orderdate", "ascending")]))
    out, offset = {}, 0
    for count in pc.value_counts(by_date.column("o_orderdate")).to_pylist():
        # Taken, not sliced: a slice cast to string_view would keep the whole window's text
        # alive (views into one buffer), about 5 MB a day at scale 0.1, 12 GiB for 6.5 years.
        rows = pa.array(range(offset, offset + count["counts"]), pa.int64())
        out[count["values"]] = by_date.take(rows).cast(orders.schema)
        offset += count["counts"]
    return out


def parquet_bytes(rows: pa.Table) -> bytes:
    """A Parquet file of ``rows`` (same bytes for the same rows and library versions)."""
    sink = io.BytesIO()
    pq.write_table(rows, sink, compression="snappy")
    return sink.getvalue()


def split_csv_lines(data: bytes, column: str, days: list[dt.date]) -> dict[dt.date, bytes]:
    """Per day of ``days``: the header line and the original lines whose ``column`` is it.

    A CSV whose records span lines cannot be split as text, so that is refused.
    """
    lines = io.BytesIO(data).readlines()
    if not lines:
        raise TpchgenError(f"empty CSV: no header line naming {column}")
    values = pl.read_csv(io.BytesIO(data), columns=[column], schema_overrides={column: pl.String})[
        column
    ].to_list()
    if len(values) != len(lines) - 1:
        raise TpchgenError(
            f"{len(values)} CSV records on {len(lines) - 1} lines: records "
            "span lines, so the file cannot be split line by line"
        )
    wanted = {day.isoformat(): day for day in days}
    picked: dict[dt.date, list[bytes]] = defaultdict(list)
    for value, line in zip(values, lines[1:], strict=True):
        day = wanted.get(value)
        if day is not None:
            picked[day].append(line)
    return {day: b"".join([lines[0], *picked[day]]) for day in days if picked[day]}


def data_lines(data: bytes) -> int:
    """The lines of a CSV after its header (one record each in tpchgen's CSV)."""
    return max(len(io.BytesIO(data).readlines()) - 1, 0)


def gzip_bytes(data: bytes) -> bytes:
    """gzip of ``data`` with no name and no time in its header, so reruns match."""
    return gzip.compress(data, mtime=0)


def land(path: Path, data: bytes) -> bool:
    """Write ``data`` atomically unless ``path`` holds those bytes already; True if written."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return False
    write_atomically(path, data)
    return True


def lay_out_tpch(
    out_dir: str | Path, scale: float = DEFAULT_SCALE, days: int = DEFAULT_DAYS
) -> TpchLayoutSummary:
    """Generate TPC-H at ``scale`` and land ``days`` days of it under ``out_dir/tpch``.

    Args:
        out_dir: the landing directory.
        scale: the TPC-H scale factor (0.01: 15,000 orders over 1992-1998).
        days: days from 1992-01-01 laid out for orders (by o_orderdate) and lineitem
            (by l_shipdate); customer is always the whole snapshot.
    """
    root = Path(out_dir) / TPCH_ROOT
    window = window_days(days)
    snapshot_name = f"customer-{scale_text(scale)}.csv"
    planned: dict[str, dict[Path, bytes]] = {table: {} for table in TABLES}
    rows = dict.fromkeys(TABLES, 0)
    with tempfile.TemporaryDirectory(prefix="tpchgen-") as scratch:
        generated = run_tpchgen(scale, Path(scratch))
        for day, part in orders_by_day(pq.read_table(generated.orders_parquet), window).items():
            path = root / "orders" / f"date={day.isoformat()}" / "orders.parquet"
            planned["orders"][path] = parquet_bytes(part)
            rows["orders"] += part.num_rows
        lineitem = split_csv_lines(generated.lineitem_csv.read_bytes(), "l_shipdate", window)
        for day, text in lineitem.items():
            path = root / "lineitem" / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}" / "lineitem.csv.gz"
            planned["lineitem"][path] = gzip_bytes(text)
            rows["lineitem"] += data_lines(text)
        customer = generated.customer_csv.read_bytes()
        planned["customer"][root / "customer" / snapshot_name] = customer
        rows["customer"] = data_lines(customer)
    changed = sum(land(path, data) for files in planned.values() for path, data in files.items())
    return TpchLayoutSummary(
        out_dir=Path(out_dir),
        scale=scale,
        first_day=TPCH_FIRST_DAY,
        days=days,
        files={t: len(f) for t, f in planned.items()},
        rows=rows,
        changed_files=changed,
    )
