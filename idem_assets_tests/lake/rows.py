"""Small typed row builders for lake tests."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa

from idem_assets.sample.sources import CUSTOMERS, ORDERS

UTC = dt.UTC


def ts(text: str) -> dt.datetime:
    """A UTC timestamp from ISO text."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def order(
    order_id: int,
    day: str,
    status: str = "placed",
    amount: str = "10.00",
    updated: str | None = None,
    customer_id: int = 1,
) -> dict:
    """One order row."""
    return {
        "order_id": order_id,
        "customer_id": customer_id,
        "amount": decimal.Decimal(amount),
        "status": status,
        "order_date": dt.date.fromisoformat(day),
        "updated_at": ts(updated or f"{day}T08:00:00"),
    }


def orders_table(rows: list[dict]) -> pa.Table:
    """Rows as an orders table of the contract schema."""
    return pa.Table.from_pylist(rows, schema=ORDERS.schema)


def customer(customer_id: int, name: str, updated: str, segment: str = "smb") -> dict:
    """One customer change row."""
    return {
        "customer_id": customer_id,
        "name": name,
        "email": f"c{customer_id}@example.com",
        "segment": segment,
        "updated_at": ts(updated),
    }


def customers_table(rows: list[dict]) -> pa.Table:
    """Rows as a customers table of the contract schema."""
    return pa.Table.from_pylist(rows, schema=CUSTOMERS.schema)


def day(text: str) -> dt.date:
    """A date from ISO text."""
    return dt.date.fromisoformat(text)
