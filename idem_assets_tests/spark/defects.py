"""A landing day full of the defects the Spark reader covers, one or more per file format."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa

from idem_assets_tests.landing.builders import (
    DAY,
    day_file,
    jsonl,
    order,
    orders_csv,
    parquet_bytes,
    put,
)

TS = "2024-03-01T10:00:00Z"


def _orders_table(rows: list[dict], types: dict[str, pa.DataType]) -> pa.Table:
    names = list(rows[0])
    return pa.table({n: pa.array([r[n] for r in rows], types[n]) for n in names})


def write_defects(landing: Path) -> None:
    """Orders files for DAY that exercise every covered rule (see docs/spark.md)."""
    put(
        landing,
        day_file("a.csv"),
        orders_csv(
            f"1,7,12.34,paid,2024-03-01,{TS}",
            "2, 7 , 12.340 ,paid,2024-03-01,2024-03-01 12:00:00.123456000+02:00",
            "3,7,1.00,paid,2024-03-01,2024-03-01T10:00:00.1234567Z",  # sub-microsecond
            f"4,7,1.00,paid,2024-02-30,{TS}",  # impossible date
            f"5,7,1.00,paid,2024-03-02,{TS}",  # outside the folder's day
            f" ,7,1.00,paid,2024-03-01,{TS}",  # blank key
            "7,7,1.00,paid,2024-03-01,",  # null version
            f"8,7,1.005,paid,2024-03-01,{TS}",  # money with 3 decimals
            f"9,7.5,1.00,paid,2024-03-01,{TS}",  # integer with a fraction
            f"10,7,1.00,PAID,2024-03-01,{TS}",  # status not allowed (case-sensitive)
            f"11,7,-1.00,paid,2024-03-01,{TS}",  # negative amount
            "12,7,1.00,paid",  # too few fields
            f'13,7,1.00,"pa\nid",2024-03-01,{TS}',  # quoted newline, then not allowed
            f"14.0,7,1.00,paid,2024-03-01,{TS}",
            f"+15,7,1.00,paid,2024-03-01,{TS}",
            f"16,,1.00,paid,2024-03-01,{TS}",
            "17,7,1.00,paid,2024-03-01,2024-03-01T25:00:00Z",  # impossible time
            f"18,7,12345678901234567.00,paid,2024-03-01,{TS}",  # over 16 integer digits
            "",
            f'19,7,"1,000.00",paid,2024-03-01,{TS}',  # not a number
            "20,7,1.00,paid,2024-03-01,2024-03-01T10:00:00.5-05:30",
        ),
    )
    put(
        landing,
        day_file("b.csv"),
        orders_csv(f"21,7,1.00,paid,2024-03-01,{TS}", f"22,7,2,shipped,2024-03-01,{TS}").replace(
            "\n", "\r\n"
        ),
    )
    put(
        landing,
        day_file("c.csv"),
        orders_csv(
            f"23,7,paid,2024-03-01,{TS}",
            f"24,7,paid,2024-03-01,{TS}",
            header="order_id,customer_id,status,order_date,updated_at",
        ),
    )
    put(
        landing,
        day_file("d.csv"),
        orders_csv(
            f"25,7,1.00,paid,2024-03-01,{TS},web",
            header="order_id,customer_id,amount,status,order_date,updated_at,channel",
        ),
    )
    put(
        landing,
        day_file("e.jsonl"),
        jsonl(
            order("26", customer_id="7"),
            order(27, amount=12.5),
            [1, 2],
            order(28, amount={"a": 1}),
            order(29, customer_id=True),
            {k: v for k, v in order(30).items() if k != "status"},
            order(31, updated_at="2024-03-01T10:00:00.999999+02:00"),
            order(32, order_date=" 2024-03-01 "),
        )
        + "\n   \nnot json\n",
    )
    put(
        landing,
        day_file("f.jsonl"),
        jsonl(*({k: v for k, v in order(i).items() if k != "amount"} for i in (33, 34))),
    )
    naive = dt.datetime(2024, 3, 1, 9, 30)
    put(
        landing,
        day_file("g.parquet"),
        parquet_bytes(
            _orders_table(
                [
                    {
                        "order_id": 35,
                        "customer_id": 7,
                        "amount": 1.25,
                        "status": "paid",
                        "order_date": DAY,
                        "updated_at": naive,
                    },
                    {
                        "order_id": 36,
                        "customer_id": 7,
                        "amount": 1.005,
                        "status": "paid",
                        "order_date": DAY,
                        "updated_at": naive,
                    },
                    {
                        "order_id": 37,
                        "customer_id": None,
                        "amount": 3.0,
                        "status": "placed",
                        "order_date": dt.date(2024, 2, 29),
                        "updated_at": naive,
                    },
                    {
                        "order_id": None,
                        "customer_id": 7,
                        "amount": 3.0,
                        "status": "placed",
                        "order_date": DAY,
                        "updated_at": naive,
                    },
                ],
                {
                    "order_id": pa.int32(),
                    "customer_id": pa.int32(),
                    "amount": pa.float64(),
                    "status": pa.string(),
                    "order_date": pa.date32(),
                    "updated_at": pa.timestamp("us"),
                },
            )
        ),
    )
    berlin = dt.datetime(2024, 3, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    put(
        landing,
        day_file("h.parquet"),
        parquet_bytes(
            _orders_table(
                [
                    {
                        "order_id": 38,
                        "customer_id": 7,
                        "amount": decimal.Decimal("1.2000"),
                        "status": "paid",
                        "order_date": DAY,
                        "updated_at": berlin,
                    },
                    {
                        "order_id": 39,
                        "customer_id": 7,
                        "amount": decimal.Decimal("1.2345"),
                        "status": "paid",
                        "order_date": DAY,
                        "updated_at": berlin,
                    },
                ],
                {
                    "order_id": pa.int64(),
                    "customer_id": pa.int64(),
                    "amount": pa.decimal128(10, 4),
                    "status": pa.string(),
                    "order_date": pa.date32(),
                    "updated_at": pa.timestamp("ms", "Europe/Berlin"),
                },
            )
        ),
    )
    put(
        landing,
        day_file("i.parquet"),
        parquet_bytes(
            pa.table(
                {
                    "order_id": [40],
                    "customer_id": [7],
                    "amount": [1.0],
                    "order_date": [DAY],
                    "updated_at": pa.array([naive], pa.timestamp("us")),
                }
            )
        ),
    )
    put(landing, day_file("z.csv"), b"")
    put(landing, day_file(".in-progress.csv"), orders_csv(f"41,7,1.00,paid,2024-03-01,{TS}"))
