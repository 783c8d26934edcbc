"""Reads that a broken connection cut short are tried again: one rule for the landing
zone and the lake, on every engine.

object_store (the Rust crate under delta-rs and obstore) retries a request that fails to
connect, is dropped before its answer, or is answered 5xx, within its retry settings
(``max_retries``, ``retry_timeout``, ``backoff_config.*`` in the storage options). An
answer cut *after* it started (the status and headers arrived, then the connection died
in the body) is not retried there: it surfaces as ``request or response body error`` or
``error decoding response body`` (apache/arrow-rs-object-store#15, #386), and from
pyarrow's S3 filesystem as a curl "partial file". Every read that is safe to repeat
(listings, GETs, log and checkpoint reads, ``DeltaTable`` loads, scans) goes through
``retrying``, which repeats it under the same settings, so one set of numbers bounds both
layers. Writes are not repeated here: a commit is decided again from the Delta log by the
writer's own retry (``lake.tables.with_commit_retries``).
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Budget", "Retries", "is_transient", "resuming", "retrying"]

T = TypeVar("T")

_log = logging.getLogger(__name__)

# How a connection that died mid-answer reads, in the errors of object_store (reqwest and
# hyper underneath), of pyarrow's S3 filesystem (curl) and of Python's own sockets.
_CUT_MARKERS = (
    "request or response body error",
    "error reading a body from connection",
    "end of file before message length reached",
    "error decoding response body",
    "error getting list response body",
    "incomplete message",
    "connection reset",
    "connection closed before message completed",
    "broken pipe",
    "unexpected eof",
    "transferred a partial file",
    "failure when receiving data from the peer",
    "network_connection",
)
_DURATION = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(ms|msec|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)?\s*$",
    re.IGNORECASE,
)


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) is an answer cut mid-body."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).lower()
        if any(marker in text for marker in _CUT_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


@dataclass(frozen=True)
class Retries:
    """How often and for how long a cut read is tried again: object_store's own retry
    settings and defaults (10 retries within 3 minutes, backoff from 100 ms doubling to at
    most 15 s, with jitter)."""

    max_retries: int = 10
    retry_timeout: float = 180.0  # seconds from the first try
    init_backoff: float = 0.1
    max_backoff: float = 15.0
    base: float = 2.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.retry_timeout < 0 or self.init_backoff < 0:
            raise ValueError("max_retries, retry_timeout and init_backoff must be >= 0")
        if self.max_backoff < self.init_backoff or self.base < 1:
            raise ValueError("max_backoff must be >= init_backoff and base >= 1")

    @classmethod
    def from_options(cls, options: Mapping[str, str] | None) -> Retries:
        """The settings named in delta-rs storage options (``max_retries``,
        ``retry_timeout``, ``backoff_config.init_backoff|max_backoff|base``); defaults
        for the rest. A value that does not parse is an error naming the key."""
        found = {str(k).lower(): str(v) for k, v in (options or {}).items()}
        fields: dict[str, float | int] = {}
        if "max_retries" in found:
            fields["max_retries"] = _parsed("max_retries", found["max_retries"], int)
        for key, field in (
            ("retry_timeout", "retry_timeout"),
            ("backoff_config.init_backoff", "init_backoff"),
            ("backoff_config.max_backoff", "max_backoff"),
        ):
            if key in found:
                fields[field] = duration_seconds(key, found[key])
        if "backoff_config.base" in found:
            fields["base"] = _parsed("backoff_config.base", found["backoff_config.base"], float)
        return cls(**fields)  # type: ignore[arg-type]

    def delays(self) -> Iterator[float]:
        """The wait before each retry: exponential, capped, with jitter (half to full)."""
        for number in range(self.max_retries):
            ceiling = min(self.max_backoff, self.init_backoff * self.base**number)
            yield ceiling * (0.5 + random.random() / 2)


class Budget:
    """The retries left to one read: how long to wait before the next, or none left."""

    def __init__(self, what: str, retries: Retries | None, clock: Callable[[], float]) -> None:
        self.what = what
        self.policy = retries or DEFAULT_RETRIES
        self.clock = clock
        self.started = clock()
        self.delays = self.policy.delays()
        self.used = 0

    def wait(self, error: Exception) -> float | None:
        """The wait before trying again after ``error``; None when it must be raised."""
        if not is_transient(error):
            return None
        delay = next(self.delays, None)
        if delay is None or self.clock() - self.started + delay > self.policy.retry_timeout:
            return None
        self.used += 1
        _log.warning(
            "%s: the answer was cut mid-body; reading again in %.2f s (retry %d of %d)",
            self.what,
            delay,
            self.used,
            self.policy.max_retries,
        )
        return delay


def retrying(
    read: Callable[[], T],
    what: str,
    retries: Retries | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``read()``, tried again while its error is a cut answer (``is_transient``), at most
    ``max_retries`` more times and not after ``retry_timeout``; any other error, or the
    last cut one, is raised as it came. ``read`` must be safe to repeat whole. ``what``
    names it in the log line of each retry (a location, never a credential)."""
    budget = Budget(what, retries, clock)
    while True:
        try:
            return read()
        except Exception as error:
            delay = budget.wait(error)
            if delay is None:
                raise
            sleep(delay)


def resuming(
    open_at: Callable[[int], Iterable[T]],
    what: str,
    retries: Retries | None = None,
    *,
    size: Callable[[T], int] = lambda item: 1,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[T]:
    """The items of ``open_at(0)``; when the stream is cut mid-body, it is opened again at
    the position reached (the sum of ``size`` of the items yielded: bytes for a byte
    stream, items by default) and goes on from there, under the same budget as
    ``retrying``. ``open_at(n)`` must give what ``open_at(0)`` gives from position n on
    (a ranged GET of the same ETag; the same immutable file's batches after the nth, e.g.
    ``itertools.islice(batches, n, None)``)."""
    budget = Budget(what, retries, clock)
    position = 0
    while True:
        try:
            for item in open_at(position):
                position += size(item)
                yield item
            return
        except Exception as error:
            delay = budget.wait(error)
            if delay is None:
                raise
            sleep(delay)


def duration_seconds(key: str, value: str) -> float:
    """Seconds in a duration as object_store's settings spell it ("30s", "3 minutes",
    "500ms", or a bare number of seconds)."""
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"storage option {key}={value!r} is not a duration such as 30s or 3m")
    number, unit = float(match.group(1)), (match.group(2) or "s").lower()
    if unit in ("ms", "msec"):
        factor = 0.001
    else:  # s..., m..., h...
        factor = {"s": 1.0, "m": 60.0, "h": 3600.0}[unit[0]]
    return number * factor


def _parsed(key: str, value: str, kind: type[int] | type[float]) -> float | int:
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"storage option {key}={value!r} is not a number") from None


DEFAULT_RETRIES = Retries()
