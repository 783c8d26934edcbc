"""The heartbeat that renews a held lease while a long write runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from idem_assets.checkpoint.errors import LeaseLost
from idem_assets.checkpoint.leases import Clock
from idem_assets.checkpoint.model import Claim
from idem_assets.checkpoint.store import open_store


@contextmanager
def lease_heartbeat(
    url: str, claim: Claim, lease_seconds: float, clock: Clock | None = None
) -> Iterator[None]:
    """Keep extending ``claim`` from a thread (own connection, the same ``clock``) while the
    block runs; a lost lease stops the beat (the holder's next change then fails)."""
    stop = threading.Event()

    def beat() -> None:
        # Most writes finish before the first beat is due: connect only if one is.
        if stop.wait(lease_seconds / 3):
            return
        with open_store(url, clock=clock) as store:
            current = claim
            while True:
                try:
                    current = store.extend(current, lease_seconds)
                except LeaseLost:
                    return
                if stop.wait(lease_seconds / 3):
                    return

    thread = threading.Thread(target=beat, name="lake-write-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
