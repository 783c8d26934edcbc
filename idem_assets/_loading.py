"""Loading the code location without the cyclic garbage collector running through it.

Loading the definitions allocates a few hundred thousand long-lived objects (modules,
classes, pydantic models, asset and check definitions). Each time the allocation count
passes a threshold, Python's cyclic collector traverses them; it finds no garbage, and in a
fresh process those passes were about a fifth of the load (0.1-0.3 s here). So the collector
is paused while the definitions are built and restored right after: a collection then runs
as usual on the next threshold.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (restored as it was found)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
