"""Deterministic fault injection for the notification service."""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

_RATES = ("error_rate", "error_after_delivery_rate", "hang_rate")
_DURATIONS = ("latency_ms", "latency_jitter_ms", "hang_seconds")


@dataclass(frozen=True)
class Faults:
    """Which failures the service injects, and how often.

    Rates are probabilities in [0, 1] drawn per request. ``error_rate`` answers 503 before
    anything is recorded; ``error_after_delivery_rate`` delivers, stores the response and then
    answers 502 (the ambiguous case); latency and hangs happen while the key is in flight.
    ``hold_in_flight`` keeps every request that claimed its key in flight until the faults
    are replaced by ones without it (a test's gate: nothing depends on how long it takes);
    ``hold_after`` (> 0) lets that many requests claim and deliver first, counted from when
    these faults were put in force, and holds every later one the same way.
    """

    error_rate: float = 0.0
    error_after_delivery_rate: float = 0.0
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0
    hang_rate: float = 0.0
    hang_seconds: float = 30.0
    hold_in_flight: bool = False
    hold_after: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in _RATES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"fault {name} must be a number, got {type(value).__name__}")
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault {name} must be between 0 and 1, got {value}")
        for name in _DURATIONS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"fault {name} must be a number, got {type(value).__name__}")
            if not 0.0 <= value <= 86_400_000:
                raise ValueError(f"fault {name} must be >= 0 and finite, got {value}")
        if not isinstance(self.hold_in_flight, bool):
            raise ValueError(
                f"fault hold_in_flight must be true or false, got {self.hold_in_flight!r}"
            )
        if isinstance(self.hold_after, bool) or not isinstance(self.hold_after, int):
            raise ValueError(
                f"fault hold_after must be an integer, got {type(self.hold_after).__name__}"
            )
        if self.hold_after < 0:
            raise ValueError(f"fault hold_after must be >= 0, got {self.hold_after}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"fault seed must be an integer, got {type(self.seed).__name__}")

    @property
    def holds(self) -> bool:
        """Whether some request is held in flight under these faults."""
        return self.hold_in_flight or self.hold_after > 0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], base: Faults | None = None) -> Faults:
        """Faults from a JSON object; unknown fields are an error, missing ones keep ``base``."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown fault field(s) {unknown}; known: {sorted(known)}")
        merged = asdict(base or cls())
        merged.update(values)
        return cls(**merged)

    def to_dict(self) -> dict[str, Any]:
        """The faults as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class FaultPlan:
    """What happens to one request: decided up front so every draw is reproducible."""

    error_before: bool
    delay_seconds: float
    hang_seconds: float
    error_after: bool


class FaultInjector:
    """Draws a FaultPlan per request from (seed, idempotency key, nth request for that key).

    Seeding per key rather than from one shared stream keeps outcomes reproducible when
    requests for different keys interleave across threads in any order.
    """

    def __init__(self, faults: Faults | None = None) -> None:
        self._lock = threading.Lock()
        self._faults = faults or Faults()
        self._requests_per_key: dict[str, int] = {}
        self._released = threading.Event()
        self._passed = 0  # requests at the gate since the faults in force were put in force
        if not self._faults.holds:
            self._released.set()

    @property
    def faults(self) -> Faults:
        """The faults currently in force."""
        return self._faults

    def replace(self, faults: Faults) -> None:
        """Swap the faults in force; the per-key request counters keep counting."""
        with self._lock:
            self._faults = faults
            self._passed = 0
            if faults.holds:
                self._released.clear()
            else:
                self._released.set()

    def wait_released(self, stopping: threading.Event) -> None:
        """Wait while this request is held (``hold_in_flight``, or past ``hold_after``) and
        the faults holding it are in force, or until the service stops."""
        with self._lock:
            self._passed += 1
            faults = self._faults
            if not faults.hold_in_flight and self._passed <= faults.hold_after:
                return
        while not self._released.wait(0.05) and not stopping.is_set():
            pass

    def plan(self, key: str) -> FaultPlan:
        """The fault plan for the next request carrying ``key``."""
        with self._lock:
            faults = self._faults
            nth = self._requests_per_key.get(key, 0)
            self._requests_per_key[key] = nth + 1
        rng = random.Random(f"{faults.seed}:{key}:{nth}")
        # Always draw all four values in the same order so changing one rate does not shift
        # the stream the other decisions come from.
        error_draw, hang_draw, jitter_draw, after_draw = (rng.random() for _ in range(4))
        delay_ms = faults.latency_ms + jitter_draw * faults.latency_jitter_ms
        return FaultPlan(
            error_before=error_draw < faults.error_rate,
            delay_seconds=delay_ms / 1000.0,
            hang_seconds=faults.hang_seconds if hang_draw < faults.hang_rate else 0.0,
            error_after=after_draw < faults.error_after_delivery_rate,
        )
