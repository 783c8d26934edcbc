"""The erasure ledger as the checks of one step see it: read once (``erasures_known``) and
reached from each check through a context variable, as the step's shared landing reads
are."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasures import ErasureLedger
from idem_assets.lake.erasure import Erased

if TYPE_CHECKING:
    from idem_assets.lib.asset_def import LakeAssetDef

_KNOWN: contextvars.ContextVar[Erased | None] = contextvars.ContextVar("erased", default=None)


@contextmanager
def erasures_known(store: CheckpointStore) -> Iterator[None]:
    """Read the erasure ledger once for the checks evaluated inside."""
    token = _KNOWN.set(ErasureLedger(store).erased())
    try:
        yield
    finally:
        _KNOWN.reset(token)


def erased_of(definition: LakeAssetDef) -> Erased:
    """The erased keys of the definition's erasable columns (none outside a checks step)."""
    known = _KNOWN.get()
    if known is None or not definition.spec.erasable_keys:
        return Erased()
    return known.of(definition.spec.erasable_keys)
