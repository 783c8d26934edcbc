"""Small pieces the package's command lines share."""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import ParamSpec

P = ParamSpec("P")


def day(text: str) -> dt.date:
    """An argparse type: a ``YYYY-MM-DD`` day, or a usage error naming the text."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from exc


def quiet_on_closed_pipe(main: Callable[P, int]) -> Callable[P, int]:
    """A command whose reader went away (``… | head``) stops quietly, as Unix tools do:
    exit status 141 (128 + SIGPIPE), no traceback."""

    @functools.wraps(main)
    def run(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            code = main(*args, **kwargs)
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            # Python flushes stdout again on exit: point it at /dev/null so that is silent too.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE

    return run
