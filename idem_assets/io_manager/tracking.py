"""Lake writes as checkpoint records: claimed before the commit, settled after it.

Each write of an asset's window is one record (scope ``lake/<asset>``, id
``<window>/<run id>/<write id>``: a step retried inside one run is a new write). Its
lease token goes into the Delta commit metadata, so a run
that died between the commit and the tracker update is reconciled on the next run:
the token is found in the table history (succeeded, with the version) or not (the run
died before committing; the record is ignored with that reason). The last settled
record of a window also remembers the slice's files, which lets a rerun prove it is a
no-op from table metadata alone.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from deltalake import DeltaTable

from idem_assets.checkpoint import CheckpointStore, Claim, LeaseLost, Status
from idem_assets.checkpoint.heartbeat import lease_heartbeat
from idem_assets.checkpoint.leases import Clock, lease_live
from idem_assets.io_manager.output import UnsettledWriteError
from idem_assets.io_manager.window import Window
from idem_assets.lake.delta_log import commit_infos
from idem_assets.lake.predicates import Condition, In, Range

LEASE_TOKEN_KEY = "idem.lease_token"
RECORD_KEY = "idem.record"
# Lake writes are retried by reruns, not by the tracker; the budget only bounds bookkeeping.
_MAX_ATTEMPTS = 1000
_HISTORY_DEPTH = 200


@dataclass(frozen=True)
class SettledWrite:
    """What the last settled write of a window left behind."""

    record_id: str
    fingerprint: str
    files: str
    version: int
    rows: int = 0
    # Signature of the inputs the rows were computed from, when the asset gave one.
    input_signature: str | None = None
    # The slice conditions the files signature covers (serialized, see encode_conditions).
    conditions: tuple[Condition, ...] = ()
    duplicates_dropped: int = 0


@dataclass(frozen=True)
class Settlement:
    """What a write's record is settled with: its outcome, and what vouches for it."""

    fingerprint: str  # the record key of the rows (see ``WriteStrategy.record_key``)
    files: str  # the signature of the slice's data files after the write
    version: int
    committed: bool
    rows: int
    input_signature: str | None = None
    conditions: Sequence[Condition] = ()  # the slice the files signature covers
    duplicates_dropped: int = 0


def _kind(value: object) -> str:
    if isinstance(value, dt.datetime):
        return "timestamp"
    if isinstance(value, dt.date):
        return "date"
    return "text" if isinstance(value, str) else "int"


_PARSE: dict[str, Any] = {
    "date": dt.date.fromisoformat,
    "int": int,
    "text": str,
    "timestamp": dt.datetime.fromisoformat,
}


def encode_conditions(conditions: Sequence[Condition]) -> list[dict[str, Any]]:
    """JSON form of slice conditions (typed bounds and values: dates, datetimes, ints, text)."""
    encoded: list[dict[str, Any]] = []
    for c in conditions:
        if isinstance(c, In):
            encoded.append(
                {
                    "column": c.column,
                    "type": _kind(c.values[0]),
                    "in": True,
                    "values": [v.isoformat() if isinstance(v, dt.date) else v for v in c.values],
                }
            )
        elif isinstance(c, Range):
            encoded.append(
                {
                    "column": c.column,
                    "type": _kind(c.start),
                    "inclusive": c.inclusive,
                    "start": _text(c.start),
                    "end": _text(c.end),
                    "wall_clock": c.wall_clock,
                }
            )
        else:
            raise TypeError(f"only ranges and value sets describe a write slice, got {c!r}")
    return encoded


def _text(value: object) -> str:
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def decode_conditions(encoded: Sequence[Mapping[str, Any]]) -> tuple[Condition, ...]:
    """Slice conditions back from their JSON form (validated again by Range and In)."""
    out: list[Condition] = []
    for c in encoded:
        parse = _PARSE[c["type"]]
        if c.get("in"):
            out.append(In(str(c["column"]), tuple(parse(v) for v in c["values"])))
        else:
            out.append(
                Range(
                    str(c["column"]),
                    parse(c["start"]),
                    parse(c["end"]),
                    inclusive=bool(c["inclusive"]),
                    wall_clock=bool(c.get("wall_clock", False)),
                )
            )
    return tuple(out)


@dataclass(frozen=True)
class Reconciled:
    """How a stale in_progress record of an earlier, crashed run was resolved."""

    record_id: str
    landed_version: int | None


class LakeWriteLog:
    """The checkpoint records of one asset's writes to one window."""

    def __init__(
        self, store: CheckpointStore, asset: str, window: str, run_id: str, lease_seconds: float
    ) -> None:
        self.store = store
        self.scope = f"lake/{asset}"
        self.window = window
        self.record_id = f"{window}/{run_id}/{uuid.uuid4().hex[:12]}"
        self.lease_seconds = lease_seconds

    def reconcile(self, table: DeltaTable | None) -> list[Reconciled]:
        """Resolve records of stopped runs for this window from the Delta log.

        A record still in_progress past its lease (its run died) or failed (its run raised,
        possibly after its commit, e.g. while settling) is looked up by its lease token in
        the table's commit metadata: a commit that landed is recorded as that version
        (succeeded, reconciled); a record whose commit never landed is ignored.
        """
        now = self.store.now()
        stopped = [
            tracker
            for tracker in self.store.list(
                self.scope, [Status.IN_PROGRESS, Status.FAILED], prefix=f"{self.window}/"
            )
            if tracker.status is Status.FAILED or not lease_live(tracker, now)
        ]
        if not stopped:
            return []
        landed = _versions_by_token(table)
        resolved = []
        for tracker in stopped:
            version = landed.get(tracker.lease_token or "")
            if version is None:
                self.store.ignore(
                    self.scope,
                    tracker.record_id,
                    "run ended before its Delta commit; superseded by a later run",
                )
            else:
                for claim in self.store.claim(
                    self.scope, "reconciler", lease_seconds=30, record_ids=[tracker.record_id]
                ):
                    self.store.succeed(
                        claim, {"version": version, "reconciled": True, **(tracker.payload or {})}
                    )
            resolved.append(Reconciled(tracker.record_id, version))
        return resolved

    def last_settled(self) -> SettledWrite | None:
        """The newest succeeded write of this window, if any."""
        newest = None
        for tracker in self.store.list(self.scope, [Status.SUCCEEDED], prefix=f"{self.window}/"):
            # A reconciled record says where a crashed run's commit landed, not which files
            # it left: it vouches for nothing, and must not hide the last write that does.
            if not tracker.result or "files" not in tracker.result:
                continue
            if newest is None or tracker.updated_at > newest.updated_at:
                newest = tracker
        if newest is None:
            return None
        result = newest.result or {}
        return SettledWrite(
            newest.record_id,
            str(result.get("fingerprint")),
            str(result.get("files")),
            int(result.get("version", -1)),
            int(result.get("rows", 0)),
            result.get("input_signature"),
            decode_conditions(result.get("conditions") or ()),
            int(result.get("duplicates_dropped", 0)),
        )

    def begin(self, payload: Mapping[str, Any]) -> Claim:
        """Register and claim this run's record before anything is committed."""
        self.store.register(
            self.scope, [(self.record_id, dict(payload))], max_attempts=_MAX_ATTEMPTS
        )
        claims = self.store.claim(
            self.scope,
            self.record_id,
            lease_seconds=self.lease_seconds,
            record_ids=[self.record_id],
        )
        if not claims:
            raise RuntimeError(f"could not claim lake write record {self.scope}/{self.record_id}")
        return claims[0]

    def commit_metadata(self, claim: Claim) -> dict[str, str]:
        """Entries for the Delta commit that tie it to this record."""
        return {LEASE_TOKEN_KEY: claim.lease_token, RECORD_KEY: f"{self.scope}/{self.record_id}"}

    def succeed(self, claim: Claim, result: Mapping[str, Any]) -> None:
        """Settle the record with the write's outcome."""
        try:
            self.store.succeed(claim, dict(result))
        except LeaseLost:
            # Another run reconciled us while we were slow; keep the outcome on a new record.
            late = f"{self.record_id}/late"
            self.store.register(self.scope, [(late, None)], max_attempts=_MAX_ATTEMPTS)
            for again in self.store.claim(self.scope, late, lease_seconds=30, record_ids=[late]):
                self.store.succeed(again, dict(result))

    def settle(self, claim: Claim, settlement: Settlement) -> None:
        """Settle the record with what ``last_settled`` reads back for the next run."""
        self.succeed(
            claim,
            {
                "fingerprint": settlement.fingerprint,
                "files": settlement.files,
                "version": settlement.version,
                "committed": settlement.committed,
                "rows": settlement.rows,
                "input_signature": settlement.input_signature,
                "conditions": encode_conditions(settlement.conditions),
                "duplicates_dropped": settlement.duplicates_dropped,
            },
        )

    @contextmanager
    def holding(self, claim: Claim, url: str, clock: Clock | None) -> Iterator[None]:
        """Hold ``claim`` while the block writes: its lease renewed from another connection
        to the store at ``url`` (``lease_heartbeat``), its record failed if the block raises."""
        try:
            with lease_heartbeat(url, claim, self.lease_seconds, clock):
                yield
        except BaseException as error:
            self.fail(claim, error)
            raise

    @contextmanager
    def settling(self, claim: Claim, version: int, committed: bool) -> Iterator[None]:
        """Settle a write's record after its commit, within this block.

        An error here fails the record, which keeps its lease token, and is raised as
        ``UnsettledWriteError`` naming the committed version: the next run of the window
        finds the commit by that token and records it, so no table is left committed behind
        a failed run without a way back.
        """
        try:
            yield
        except Exception as error:
            self.fail(claim, error)
            if not committed:
                raise
            raise UnsettledWriteError(
                f"{self.scope} {self.window}: committed version {version}, but its write "
                f"record could not be settled ({type(error).__name__}: {error}); the next run "
                "of this window reconciles it from the Delta log and commits nothing if the "
                "table already holds its rows"
            ) from error

    def fail(self, claim: Claim, error: BaseException) -> None:
        """Record a failed write (nothing committed, or the error came after the commit)."""
        try:
            self.store.fail(claim, error, retry_in_seconds=0)
        except LeaseLost:
            pass  # already resolved by a reconciler; the error is raised to the run anyway


def _versions_by_token(table: DeltaTable | None) -> dict[str, int]:
    """The lease token of each recent commit that carries one, and its version."""
    if table is None:
        return {}
    return {
        str(info[LEASE_TOKEN_KEY]): version
        for version, info in commit_infos(table, _HISTORY_DEPTH)
        if info.get(LEASE_TOKEN_KEY)
    }


def last_settled(store: CheckpointStore, asset: str, window: Window) -> SettledWrite | None:
    """The newest settled write of an asset's window (None if there is none)."""
    log = LakeWriteLog(store, asset, window.record_key(), "-", 1.0)
    return log.last_settled()
