"""Row values as check metadata shows them: a column the table declares erasable by digest.

Check results carry samples of rows (duplicated keys, broken rules, history problems) into
Dagster's event log, which keeps them for as long as the run is kept: an erase of the
lake cannot reach them. So the values of every erasable column are shown by
``key_digest(column, value)`` in every sample, erased or not: a key erased later was never
written to the event log, the results do not depend on the ledger (no result changes, or
must be recomputed, when a key is erased), and a person looking for one key computes its
digest (``idem-assets erase --status`` prints the digests of the erased ones). Other
columns are shown as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from idem_assets.lake.erasure import key_digest

# The key under which a sample shows a digest instead of a value: {"customer_id": {"digest": …}}.
DIGEST = "digest"


def shown_value(column: str, value: Any, erasable: Collection[str]) -> Any:
    """A value of ``column`` as metadata shows it: by digest when the column is erasable
    (a null stays null), else as plain JSON (anything but a number, text or bool as text)."""
    if value is None:
        return None
    if column in erasable:
        # As text, as an erase compares it (see ``lake.erasure``): 42 and "42" are one key.
        return {DIGEST: key_digest(column, str(value))}
    return value if isinstance(value, bool | int | float | str) else str(value)


def shown_rows(rows: Iterable[Mapping[str, Any]], erasable: Collection[str]) -> list[dict]:
    """Sample rows as metadata shows them (``shown_value`` on every column)."""
    return [{column: shown_value(column, v, erasable) for column, v in row.items()} for row in rows]
