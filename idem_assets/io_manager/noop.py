"""When a lake write may be skipped: the one rule every no-op path applies.

A write is skipped, without reading any data, when the slice's last settled write (its
checkpoint record) vouches for the outcome and nothing has touched the slice since: the
record holds the same content fingerprint as the new rows (``same_content``: they were
computed and are equal) or the same input signature (``same_inputs``: they need not be
computed at all), and the slice's data files are still exactly the ones that write left
(``unchanged_since``: Delta data files are immutable and uniquely named, so an equal
``slice_signature`` means no commit changed the slice). Anything else goes to the writer,
which may still find the stored rows equal by reading them (proof ``content``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deltalake import DeltaTable

from idem_assets.io_manager.tracking import SettledWrite
from idem_assets.lake import Fingerprint, slice_signature
from idem_assets.lake.predicates import Condition


def unchanged_since(
    settled: SettledWrite, table: DeltaTable | None, conditions: Sequence[Condition] | None = None
) -> bool:
    """Whether the slice's data files are still those ``settled`` left (metadata only).

    ``conditions`` name the slice; by default the one the settled write signed.
    """
    covered = settled.conditions if conditions is None else conditions
    return settled.files == slice_signature(table, covered)


def same_content(
    settled: SettledWrite | None,
    table: DeltaTable | None,
    key: Fingerprint | str,
    conditions: Sequence[Condition],
) -> bool:
    """Whether rows whose record key (their fingerprint, see ``WriteStrategy.record_key``)
    is ``key`` are what the settled write left, still in place."""
    return (
        settled is not None
        and settled.fingerprint == str(key)
        and unchanged_since(settled, table, conditions)
    )


def same_inputs(
    settled: SettledWrite | None,
    input_signature: str | None,
    open_table: Callable[[], DeltaTable | None],
) -> bool:
    """Whether the settled write was computed from these inputs and its files still stand.

    The table is opened (its log read) only when the signatures agree.
    """
    return (
        settled is not None
        and settled.input_signature == input_signature
        and unchanged_since(settled, open_table())
    )
