"""Small pieces the package's command lines share."""

from __future__ import annotations

import argparse
import datetime as dt


def day(text: str) -> dt.date:
    """An argparse type: a ``YYYY-MM-DD`` day, or a usage error naming the text."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from exc
