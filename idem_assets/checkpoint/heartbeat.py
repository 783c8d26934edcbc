"""The heartbeat that renews a held lease while a long block runs: a write's claim, a change
feed consumer's range."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from idem_assets.checkpoint.errors import LeaseLost
from idem_assets.checkpoint.leases import Clock
from idem_assets.checkpoint.model import Claim
from idem_assets.checkpoint.store import open_store

# Opens what a heartbeat's thread renews through (its own connection) and gives the renewal:
# a call that extends the lease, False once the lease is no longer held.
Renewal = Callable[[], AbstractContextManager[Callable[[], bool]]]


@contextmanager
def renewing(connect: Renewal, lease_seconds: float, name: str) -> Iterator[None]:
    """Renew a lease from a thread every third of ``lease_seconds`` while the block runs; a
    lost lease stops the beat (the holder's next change then finds out)."""
    stop = threading.Event()

    def beat() -> None:
        # Most blocks end before the first beat is due: connect only if one is.
        if stop.wait(lease_seconds / 3):
            return
        with connect() as renew:
            while renew() and not stop.wait(lease_seconds / 3):
                pass

    thread = threading.Thread(target=beat, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def lease_heartbeat(
    url: str, claim: Claim, lease_seconds: float, clock: Clock | None = None
) -> AbstractContextManager[None]:
    """Keep extending ``claim`` (own connection, the same ``clock``) while the block runs."""

    @contextmanager
    def connect() -> Iterator[Callable[[], bool]]:
        with open_store(url, clock=clock) as store:
            current = claim

            def extend() -> bool:
                nonlocal current
                try:
                    current = store.extend(current, lease_seconds)
                except LeaseLost:
                    return False
                return True

            yield extend

    return renewing(connect, lease_seconds, "lake-write-lease")
