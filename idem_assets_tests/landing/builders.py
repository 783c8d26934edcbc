"""Writing real landing files into a temp landing dir, and reading one day back."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from idem_assets.landing import QUARANTINE_SCHEMA, LandingBatch, read_days
from idem_assets.landing.contract import SourceContract
from idem_assets.sample.sources import ORDERS

DAY = dt.date(2024, 3, 1)
ORDER_HEADER = "order_id,customer_id,amount,status,order_date,updated_at"


def put(landing: Path, relpath: str, data: bytes | str) -> Path:
    """Write ``data`` at ``landing/relpath`` and return the path."""
    path = landing / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def day_file(name: str, source: str = "orders", day: dt.date = DAY) -> str:
    """The relpath of a file in a source's day folder."""
    return f"{source}/date={day.isoformat()}/{name}"


def orders_csv(*lines: str, header: str = ORDER_HEADER) -> str:
    """An orders CSV with a header and the given data lines."""
    return "".join(f"{line}\n" for line in (header, *lines))


def order(order_id: Any = 1, **overrides: Any) -> dict[str, Any]:
    """One valid orders record in JSON-friendly form, with overrides."""
    record = {
        "order_id": order_id,
        "customer_id": 7,
        "amount": "12.34",
        "status": "paid",
        "order_date": DAY.isoformat(),
        "updated_at": "2024-03-01T10:00:00Z",
    }
    record.update(overrides)
    return record


def jsonl(*records: Any) -> str:
    """JSON Lines text of the given values (objects or anything else)."""
    return "".join(json.dumps(r) + "\n" for r in records)


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as Parquet bytes."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def read_day(landing: Path, contract: SourceContract = ORDERS, day: dt.date = DAY) -> LandingBatch:
    """Read one day and check the conservation invariant on the way."""
    batch = read_days(landing, contract, day, day + dt.timedelta(days=1))
    assert_conserved(batch, contract)
    return batch


def assert_conserved(batch: LandingBatch, contract: SourceContract) -> None:
    """Every raw row is valid or quarantined, and both tables have their exact schemas."""
    assert batch.raw_rows == batch.rows.num_rows + batch.quarantine.num_rows
    assert batch.raw_rows == sum(f.rows for f in batch.files)
    assert batch.rows.schema == contract.schema
    assert batch.quarantine.schema == QUARANTINE_SCHEMA


def reasons(batch: LandingBatch) -> list[str]:
    """The quarantine reasons in row order."""
    return batch.quarantine.column("reason").to_pylist()


def column(batch: LandingBatch, name: str) -> list[Any]:
    """One column of the valid rows as Python values."""
    return batch.rows.column(name).to_pylist()
