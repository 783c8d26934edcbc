"""Erased values still held by Dagster's event log: which runs' events show them.

``idem-assets erase`` deletes a key's rows from the lake, but an event written before the
erase keeps whatever its metadata showed: a check's sample of duplicated keys, a broken
rule's top values, an asset's own metadata. Since this library shows the values of every
erasable column by digest (``lib.checks.samples``), only events written before a table
declared its ``erasable_keys`` (or by an older release, or by code of its own) can hold
one. ``erased_values_in_event_log`` finds them and names each by run, asset, event type
and the erased keys' digests, never by value. Nothing is deleted here: deleting is a
person's decision.

A person removes the events of a reported run by deleting the run, with its whole event
log (every event of every step of that run, its log lines too):

- in the Dagster UI: the run's page, then "Delete";
- on the command line: ``dagster run delete <run_id>`` (with ``DAGSTER_HOME`` set);
- in Python: ``DagsterInstance.get().delete_run(run_id)``.

The asset's materialization history then no longer lists that run; the lake is unchanged.
Captured stdout/stderr of the run (the compute log manager's files) are kept elsewhere and
are not deleted with it. An event reported with run id "" was reported outside any run
(``report_runless_asset_event``): ``DagsterInstance.wipe_asset_partitions`` removes it.

What counts as holding an erased value of column ``c`` (a value compared as text, as an
erase compares it), per metadata entry of an event:

- the value under the key ``c``: the entry's own label, or a key of its JSON (the shape of
  a sample row, ``{"c": 42, ...}``);
- the value under the key ``value`` or ``values`` inside JSON that names ``c`` (a text
  equal to ``c`` or starting with ``c_``, such as a rule named ``c_allowed``): the shape of
  a rule's top values;
- a text entry, or a check's description, naming both ``c`` and the value as words.

A digest (``{"c": {"digest": ...}}``) holds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from idem_assets.lake.erasure import Erased, key_digest

# The events whose metadata the finder reads.
ASSET_EVENTS = frozenset(
    {
        dg.DagsterEventType.ASSET_MATERIALIZATION,
        dg.DagsterEventType.ASSET_OBSERVATION,
        dg.DagsterEventType.ASSET_CHECK_EVALUATION,
    }
)
# Events reported outside any run are stored under this run id.
RUNLESS_RUN_ID = ""
_PAGE = 500
_VALUE_KEYS = ("value", "values")


@dataclass(frozen=True)
class EventHolding:
    """An event-log entry whose metadata holds an erased value (named by digest only)."""

    run_id: str  # "" for an event reported outside any run
    event_type: str  # ASSET_MATERIALIZATION, ASSET_OBSERVATION or ASSET_CHECK_EVALUATION
    asset_key: str | None
    check_name: str | None  # for a check evaluation
    partition: str | None
    storage_id: int
    timestamp: float
    entries: tuple[str, ...]  # the metadata entries holding erased values ("description" too)
    digests: tuple[str, ...]  # the erased keys held, by ``key_digest``

    def describe(self) -> str:
        """One line: where the event is and which erased keys it holds (by digest)."""
        what = self.asset_key or "-"
        if self.check_name:
            what += f" check {self.check_name}"
        if self.partition:
            what += f" [{self.partition}]"
        return (
            f"run {self.run_id or '(runless)'}: {self.event_type} {what} "
            f"({', '.join(self.entries)}) holds erased key(s) {', '.join(self.digests)}"
        )


def erased_values_in_event_log(instance: dg.DagsterInstance, erased: Erased) -> list[EventHolding]:
    """Every materialization, observation and check evaluation in ``instance``'s event log
    whose metadata holds a value of ``erased`` (the ledger's erased keys), oldest first.

    Args:
        instance: the Dagster instance whose event log is read (every run, and the events
            reported outside runs).
        erased: the erased values by column, e.g. ``ErasureLedger(store).erased()``.
    """
    if not erased:
        return []
    found = []
    for run_id in (*_run_ids(instance), RUNLESS_RUN_ID):
        for record in _asset_records(instance, run_id):
            holding = _holding(record, erased)
            if holding is not None:
                found.append(holding)
    return sorted(found, key=lambda h: h.storage_id)


def event_log_report(holdings: Sequence[EventHolding]) -> str:
    """The finder's outcome as text: each event, then how a person removes them."""
    if not holdings:
        return "no event in the Dagster event log holds an erased value"
    runs = sorted({h.run_id for h in holdings})
    lines = [h.describe() for h in holdings]
    lines.append(
        f"{len(holdings)} event(s) of {len(runs)} run(s) hold erased values: delete those "
        "runs (UI: the run's page, Delete; `dagster run delete <run_id>`; or "
        "DagsterInstance.delete_run(run_id)), which deletes every event of the run"
    )
    return "\n".join(lines)


def _run_ids(instance: dg.DagsterInstance) -> Iterator[str]:
    cursor = None
    while True:
        records = instance.get_run_records(limit=_PAGE, cursor=cursor)
        yield from (record.dagster_run.run_id for record in records)
        if len(records) < _PAGE:
            return
        cursor = records[-1].dagster_run.run_id


def _asset_records(instance: dg.DagsterInstance, run_id: str) -> Iterator[dg.EventLogRecord]:
    cursor = None
    while True:
        page = instance.get_records_for_run(
            run_id, cursor=cursor, of_type=set(ASSET_EVENTS), limit=_PAGE
        )
        yield from page.records
        if not page.has_more:
            return
        cursor = page.cursor


def _holding(record: dg.EventLogRecord, erased: Erased) -> EventHolding | None:
    event = record.event_log_entry.dagster_event
    if event is None:
        return None
    data: Any = event.event_specific_data
    if event.event_type is dg.DagsterEventType.ASSET_MATERIALIZATION:
        item, check_name = data.materialization, None
    elif event.event_type is dg.DagsterEventType.ASSET_OBSERVATION:
        item, check_name = data.asset_observation, None
    else:
        item, check_name = data, data.check_name
    texts = {"description": item.description} if getattr(item, "description", None) else {}
    held: dict[str, set[str]] = {}
    for label, value in {**dict(item.metadata or {}), **texts}.items():
        for column, values in erased.values.items():
            for hit in _held_in_entry(label, _plain(value), column, values):
                held.setdefault(label, set()).add(key_digest(column, hit))
    if not held:
        return None
    key = getattr(item, "asset_key", None)
    return EventHolding(
        run_id=record.event_log_entry.run_id,
        event_type=event.event_type.value,
        asset_key=key.to_user_string() if key is not None else None,
        check_name=check_name,
        partition=getattr(item, "partition", None),
        storage_id=record.storage_id,
        timestamp=record.timestamp,
        entries=tuple(sorted(held)),
        digests=tuple(sorted(set().union(*held.values()))),
    )


def _plain(value: Any) -> Any:
    """A metadata value as plain Python (JSON, text, numbers; table records as dicts)."""
    value = value.value if isinstance(value, dg.MetadataValue) else value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    data = getattr(value, "data", None)  # a TableRecord
    return _plain(data) if isinstance(data, Mapping) else value


def _held_in_entry(label: str, value: Any, column: str, values: frozenset[str]) -> set[str]:
    """The erased ``values`` of ``column`` one metadata entry holds (see the module doc)."""
    if isinstance(value, str):
        if label == column and value.strip() in values:
            return {value.strip()}
        if not _names(value, column, word=True):
            return set()
        return {v for v in values if re.search(rf"(?<![\w.-]){re.escape(v)}(?![\w.-])", value)}
    return _held_in_json(value, label, False, column, values)


def _held_in_json(
    node: Any, key: str, named: bool, column: str, values: frozenset[str]
) -> set[str]:
    if isinstance(node, Mapping):
        named = named or any(_names(v, column) for v in node.values() if isinstance(v, str))
        return set().union(*(_held_in_json(v, k, named, column, values) for k, v in node.items()))
    if isinstance(node, list):
        return set().union(*(_held_in_json(v, key, named, column, values) for v in node))
    text = _text(node)
    if text is None or text not in values:
        return set()
    return {text} if key == column or (named and key in _VALUE_KEYS) else set()


def _names(text: str, column: str, word: bool = False) -> bool:
    """Whether ``text`` names ``column``: equal to it or starting with ``<column>_`` (a rule's
    name), or (``word``) holding it as a word."""
    if text == column or text.startswith(f"{column}_"):
        return True
    return word and re.search(rf"(?<![\w]){re.escape(column)}(?![\w])", text) is not None


def _text(value: Any) -> str | None:
    """A scalar as an erase compares it (text); None for what is no key (bools, nulls)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value).strip()
    return None
