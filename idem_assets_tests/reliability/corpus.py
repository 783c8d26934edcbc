"""The bad-input corpus: malformed landing files built by code, each with its expected outcome.

Every case lands one good file for the day plus the case's file(s), and says what the
documented policy (docs/landing.md) makes of them:

- ``quarantine``: the listed (file, row) pairs go to the quarantine table with a reason
  containing the given text; every other row loads;
- ``error``: the run fails with a message naming the file and containing the given text,
  and no table changes;
- ``load``: every row loads (the file's oddity is reported, not fatal); a value breaking a
  business rule loads too, and the rule's check warns (``warns``).

Whenever rows are quarantined the ``quarantine_share`` check warns as well (a handful of
rows is more than 1% of these small days).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa

from idem_assets_tests.landing.builders import parquet_bytes

DAY = dt.date(2024, 3, 5)
MIB = 1024 * 1024
ORDER_COLUMNS = ("order_id", "customer_id", "amount", "status", "order_date", "updated_at")
EVENT_COLUMNS = ("event_id", "customer_id", "event_type", "event_time", "ingested_at", "payload")
Outcome = Literal["quarantine", "error", "load"]


def order(order_id: Any, **overrides: Any) -> dict[str, Any]:
    """One valid order of the day as text fields, with overrides."""
    row = {
        "order_id": order_id,
        "customer_id": 100 + int(order_id or 0) % 50,
        "amount": f"{order_id}.50",
        "status": "paid",
        "order_date": DAY.isoformat(),
        "updated_at": f"{DAY.isoformat()}T10:00:00Z",
    }
    return {**row, **overrides}


def event(n: int, **overrides: Any) -> dict[str, Any]:
    """One valid event of the day as text fields, with overrides."""
    row = {
        "event_id": f"evt-{n:04d}",
        "customer_id": 100 + n,
        "event_type": "page_view",
        "event_time": f"{DAY.isoformat()}T09:{n % 60:02d}:00Z",
        "ingested_at": f"{DAY.isoformat()}T11:00:00Z",
        "payload": json.dumps({"n": n}),
    }
    return {**row, **overrides}


def csv_bytes(rows: list[dict[str, Any]], columns: tuple[str, ...] = ORDER_COLUMNS) -> bytes:
    """CSV text with a header; values are written as given (no quoting needed here)."""
    lines = [",".join(columns)] + [",".join(str(r.get(c, "")) for c in columns) for r in rows]
    return ("\n".join(lines) + "\n").encode()


def jsonl_bytes(rows: list[Any]) -> bytes:
    """One JSON value per line."""
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def orders_parquet(rows: list[dict[str, Any]], **types: pa.DataType) -> bytes:
    """Orders as Parquet, typed like a producer would (override column types by name)."""
    kinds = {
        "order_id": pa.int64(),
        "customer_id": pa.int64(),
        "amount": pa.decimal128(18, 2),
        "status": pa.string(),
        "order_date": pa.date32(),
        "updated_at": pa.timestamp("us", tz="UTC"),
        **types,
    }
    columns = {}
    for name, kind in kinds.items():
        values = [_typed(r[name], kind) for r in rows]
        columns[name] = pa.array(values, type=kind)
    return parquet_bytes(pa.table(columns))


def _typed(value: Any, kind: pa.DataType) -> Any:
    if pa.types.is_decimal(kind):
        return Decimal(str(value))
    if pa.types.is_floating(kind):
        return float(value)
    if pa.types.is_integer(kind):
        return int(value)
    if pa.types.is_date(kind):
        return dt.date.fromisoformat(value)
    if pa.types.is_timestamp(kind):
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


GOOD_ORDERS = [order(i) for i in range(1, 5)]
GOOD_EVENTS = [event(i) for i in range(1, 4)]
GOOD_FILES = {
    "orders": ("part-000.csv", csv_bytes(GOOD_ORDERS)),
    "events": ("part-000.jsonl", jsonl_bytes(GOOD_EVENTS)),
}


@dataclass(frozen=True)
class BadInput:
    """One malformed input and what the policy says must come of it."""

    name: str
    problem: str
    files: dict[str, bytes]
    outcome: Outcome
    source: str = "orders"
    # quarantine: (file name, row number) -> text the reason must contain
    quarantined: dict[tuple[str, int], str] = field(default_factory=dict)
    # keys of rows in the case's files that must load (besides the good file's)
    loads: frozenset[Any] = frozenset()
    # error: text the run's error must contain (the file name is always required)
    error: str = ""
    # load: text the materialization metadata must mention (dropped columns, notes, ...)
    reported: str = ""
    # key -> column values the stored row must have (which duplicate won, how types drifted)
    values: dict[Any, dict[str, Any]] = field(default_factory=dict)
    # the value-rule check that warns about the case's rows (they load all the same)
    warns: str | None = None


def _truncated_parquet() -> bytes:
    whole = orders_parquet([order(i) for i in range(10, 20)])
    return whole[: len(whole) // 2]


def _non_utf8() -> bytes:
    good = csv_bytes([order(10), order(11)])
    return good + b"12,112,12.50,p\xffid,2024-03-05,2024-03-05T10:00:00Z\n"


def _duplicates_tied() -> bytes:
    return csv_bytes([order(10, amount="5.00"), order(10, amount="9.00"), order(11)])


CASES: tuple[BadInput, ...] = (
    BadInput(
        "missing_column",
        "a file without the amount column",
        {
            "bad.csv": csv_bytes(
                [order(10), order(11)], tuple(c for c in ORDER_COLUMNS if c != "amount")
            )
        },
        "quarantine",
        quarantined={
            ("bad.csv", 1): "lacks contract column(s) amount",
            ("bad.csv", 2): "lacks contract column(s) amount",
        },
    ),
    BadInput(
        "extra_column",
        "a file with an extra channel column",
        {"bad.csv": csv_bytes([{**order(10), "channel": "web"}], (*ORDER_COLUMNS, "channel"))},
        "load",
        loads=frozenset({10}),
        reported="channel",
    ),
    BadInput(
        "wrong_type",
        "customer_id 'abc'",
        {"bad.csv": csv_bytes([order(10), order(11, customer_id="abc")])},
        "quarantine",
        quarantined={("bad.csv", 2): "customer_id: value 'abc'"},
        loads=frozenset({10}),
    ),
    BadInput(
        "unparsable_date",
        "order_date '2024-13-45'",
        {"bad.csv": csv_bytes([order(10, order_date="2024-13-45"), order(11)])},
        "quarantine",
        quarantined={("bad.csv", 1): "order_date"},
        loads=frozenset({11}),
    ),
    BadInput(
        "null_natural_key",
        "an empty order_id",
        {"bad.csv": csv_bytes([order(10), order("", amount="3.50")])},
        "quarantine",
        quarantined={("bad.csv", 2): "order_id: natural key is null"},
        loads=frozenset({10}),
    ),
    BadInput(
        "duplicate_key_tied_version",
        "order 10 twice, same updated_at, other amount",
        {"bad.csv": _duplicates_tied()},
        "load",
        loads=frozenset({10, 11}),
        reported='"conflicting_keys": 1',
        # Same version: the content tie-break keeps the greatest row, whatever file order.
        values={10: {"amount": Decimal("9.00")}},
    ),
    BadInput(
        "date_outside_partition",
        "order_date 2024-03-06 in the 2024-03-05 folder",
        {"bad.csv": csv_bytes([order(10, order_date="2024-03-06"), order(11)])},
        "quarantine",
        quarantined={("bad.csv", 1): "outside the partition folder"},
        loads=frozenset({11}),
    ),
    BadInput(
        "header_only_csv", "a CSV with a header and no rows", {"bad.csv": csv_bytes([])}, "load"
    ),
    BadInput("zero_byte_file", "an empty file", {"bad.parquet": b""}, "load", reported="zero-byte"),
    BadInput(
        "truncated_parquet",
        "half of a Parquet file",
        {"bad.parquet": _truncated_parquet()},
        "error",
        error="parquet",
    ),
    BadInput(
        "csv_unterminated_quote",
        "a quote opened and never closed",
        {
            "bad.csv": csv_bytes([order(10)])
            + b'11,111,"11.50,paid,2024-03-05,x\n'
            + csv_bytes([order(12)]).split(b"\n", 1)[1]
        },
        "error",
        error="unterminated quoted field",
    ),
    BadInput(
        "csv_ragged_row",
        "a row with too few fields",
        {"bad.csv": csv_bytes([order(10)]) + b"11,111,11.50,paid,2024-03-05\n"},
        "quarantine",
        quarantined={("bad.csv", 2): "row has 5 fields but the header has 6"},
        loads=frozenset({10}),
    ),
    BadInput(
        "non_utf8_bytes",
        "a row with a \\xff byte",
        {"bad.csv": _non_utf8()},
        "quarantine",
        quarantined={("bad.csv", 3): "not valid UTF-8"},
        loads=frozenset({10, 11}),
    ),
    BadInput(
        "negative_amount",
        "amount -5.00 (a business rule: loaded, its check warns)",
        {"bad.csv": csv_bytes([order(10, amount="-5.00"), order(11)])},
        "load",
        loads=frozenset({10, 11}),
        warns="amount_non_negative",
        values={10: {"amount": Decimal("-5.00")}},
    ),
    BadInput(
        "money_too_precise",
        "amount 12.345 (money is never rounded)",
        {"bad.csv": csv_bytes([order(10, amount="12.345"), order(11)])},
        "quarantine",
        quarantined={("bad.csv", 1): "more than 2 decimal places"},
        loads=frozenset({11}),
    ),
    BadInput(
        "status_not_allowed",
        "status 'lost' (a business rule: loaded, its check warns)",
        {"bad.csv": csv_bytes([order(10, status="lost"), order(11)])},
        "load",
        loads=frozenset({10, 11}),
        warns="status_allowed",
        values={10: {"status": "lost"}},
    ),
    BadInput(
        "huge_string",
        "a 1.5 MiB event payload",
        source="events",
        files={"bad.jsonl": jsonl_bytes([event(10, payload="x" * (3 * MIB // 2)), event(11)])},
        outcome="quarantine",
        quarantined={("bad.jsonl", 1): "over the 1048576-byte bound"},
        loads=frozenset({"evt-0011"}),
    ),
    BadInput(
        "jsonl_not_an_object",
        "a JSON array line",
        source="events",
        files={"bad.jsonl": jsonl_bytes([event(10), [1, 2, 3]])},
        outcome="quarantine",
        quarantined={("bad.jsonl", 2): "is a JSON array, not an object"},
        loads=frozenset({"evt-0010"}),
    ),
    BadInput(
        "jsonl_broken_line",
        "a line cut in the middle",
        source="events",
        files={"bad.jsonl": jsonl_bytes([event(10)]) + b'{"event_id": "evt-0011", \n'},
        outcome="quarantine",
        quarantined={("bad.jsonl", 2): "is not valid JSON"},
        loads=frozenset({"evt-0010"}),
    ),
    BadInput(
        "schema_drift_types",
        "a second file typing amount as float, ids as int32, updated_at in Europe/Berlin",
        {
            "drift.parquet": orders_parquet(
                [order(10), order(11)],
                amount=pa.float64(),
                order_id=pa.int32(),
                updated_at=pa.timestamp("ms", tz="Europe/Berlin"),
            )
        },
        "load",
        loads=frozenset({10, 11}),
        values={
            10: {
                "amount": Decimal("10.50"),
                "updated_at": dt.datetime(2024, 3, 5, 10, tzinfo=dt.UTC),
            }
        },
    ),
    BadInput(
        "schema_drift_renamed_column",
        "a second file calling amount order_amount",
        {
            "drift.csv": csv_bytes(
                [{**order(10), "order_amount": "1.00"}],
                tuple("order_amount" if c == "amount" else c for c in ORDER_COLUMNS),
            )
        },
        "quarantine",
        quarantined={("drift.csv", 1): "lacks contract column(s) amount"},
    ),
    BadInput(
        "column_twice",
        "amount appears twice in the header",
        {"bad.csv": csv_bytes([{**order(10)}], (*ORDER_COLUMNS, "amount"))},
        "quarantine",
        quarantined={("bad.csv", 1): "appear more than once"},
    ),
    BadInput(
        "unreadable_suffix",
        "a .json file next to the .csv",
        {"bad.json": jsonl_bytes([order(10)])},
        "load",
        reported="bad.json",
    ),
)
