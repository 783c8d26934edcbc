"""An asset's rows from its landing source: read them, quarantine the bad ones, or skip."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import dagster as dg

from idem_assets._lazy import lazy_module
from idem_assets.checkpoint import Memo
from idem_assets.io_manager import TableOutput, Window
from idem_assets.io_manager.erasure import erased_for
from idem_assets.io_manager.noop import same_inputs
from idem_assets.io_manager.tracking import SettledWrite, last_settled
from idem_assets.lake.erasure import Erased
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.erasure import quarantine_without_erased
from idem_assets.landing.files import (
    Discovery,
    HashCache,
    discover_days,
    discover_snapshot,
)
from idem_assets.landing.quarantine import QUARANTINE_TABLE, QuarantineWrite, replace_quarantine
from idem_assets.landing.reader import LandingBatch, read_days, read_snapshot
from idem_assets.landing.store import LandingRoot
from idem_assets.lib.asset_def import LakeAssetDef
from idem_assets.lib.inputs import input_signatures, keep_hashes, known_hashes
from idem_assets.lib.landing_report import (
    add_asset_metadata,
    add_day_files,
    figures_metadata,
    landing_figures,
    listed,
    warn_unread,
)
from idem_assets.resources import CheckpointResource, LakeResource, SparkResource

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


@dataclasses.dataclass(frozen=True)
class WindowListing:
    """One listing of a window's landing folders: what is signed is exactly what is read."""

    root: LandingRoot
    days: dict[dt.date, Discovery]  # daily sources
    snapshot: Discovery | None = None  # snapshot sources

    @property
    def discoveries(self) -> list[Discovery]:
        """Every folder's discovery, in day order (or the snapshot's)."""
        return list(self.by_day.values())

    @property
    def by_day(self) -> dict[dt.date | None, Discovery]:
        """Each day's discovery in day order (a snapshot's under None)."""
        if self.snapshot is not None:
            return {None: self.snapshot}
        return dict(self.days)

    def empty(self) -> bool:
        """Whether no folder of the window holds a file to read."""
        return not any(found.files for found in self.discoveries)

    def ignored(self) -> dict[str, str]:
        """Files in the window's folders that the reader leaves alone, and why."""
        return {path: why for found in self.discoveries for path, why in found.ignored.items()}


def list_window(lake: LakeResource, contract: SourceContract, window: Window) -> WindowListing:
    """List the window's landing folders once (the root must exist)."""
    root = lake.landing()
    if contract.daily:
        if not window.partitioned:
            raise ValueError(f"{contract.name} is daily: it needs a partition window")
        return WindowListing(root, discover_days(root, contract, window.days()))
    return WindowListing(root, {}, discover_snapshot(root, contract))


# Where a window's landing figures are kept (by asset), stamped with its input signature.
FIGURES_SCOPE = "landing-figures"
MAX_LISTED_DAYS = 31

# Landing batches read within a step, by landing, source, window and the listing they read
# (every file's path and stamp): the write's read and the checks' recomputation of the same
# window share one read exactly when no file changed in between.
_SHARED_READS: ContextVar[dict[tuple[object, ...], LandingBatch] | None] = ContextVar(
    "idem_shared_landing_reads", default=None
)


@contextmanager
def shared_landing_reads() -> Iterator[None]:
    """Within this block, reading the same files of a source and window twice reads once."""
    if _SHARED_READS.get() is not None:  # already shared by an enclosing block
        yield
        return
    token = _SHARED_READS.set({})
    try:
        yield
    finally:
        _SHARED_READS.reset(token)


def read_landing(
    lake: LakeResource,
    contract: SourceContract,
    window: Window,
    listing: WindowListing | None = None,
) -> LandingBatch:
    """The landing batch of a source for a window (daily) or its newest snapshot."""
    listing = listing or list_window(lake, contract, window)
    shared = _SHARED_READS.get()
    key = (
        listing.root.uri,
        contract.name,
        window,
        tuple((item.relpath, item.stamp) for found in listing.discoveries for item in found.files),
    )
    if shared is not None and key in shared:
        return shared[key]
    if contract.daily:
        assert window.start is not None and window.end is not None
        batch = read_days(listing.root, contract, window.start, window.end, listing.days)
    else:
        batch = read_snapshot(listing.root, contract, listing.snapshot)
    if shared is not None:
        shared[key] = batch
    return batch


def write_quarantine(
    lake: LakeResource,
    contract: SourceContract,
    quarantine: pa.Table,
    window: Window,
    erased: Erased,
) -> QuarantineWrite:
    """Replace this source's quarantine rows for the window, leaving out those holding a key
    of ``erased`` (the erased keys of the source's erasable columns: ``ledger_erased``)."""
    kept, removed = quarantine_without_erased(
        quarantine, erased, {contract.name: tuple(erased.values)}
    )
    version = replace_quarantine(lake.table(QUARANTINE_TABLE), contract, kept, window)
    return QuarantineWrite(kept, version, removed)


def ledger_erased(checkpoint: CheckpointResource | None, columns: Sequence[str]) -> Erased:
    """The erased keys of ``columns`` as the ledger holds them now: read just before a write,
    so a key erased while the landing files were read is left out too (none without a
    checkpoint store or columns)."""
    if checkpoint is None or not columns:
        return Erased()
    with checkpoint.open() as store:
        return erased_for(columns, store)


def input_signature(
    definition: LakeAssetDef,
    listing: WindowListing,
    window: Window,
    cache: HashCache | None = None,
) -> str:
    """Digest of everything an asset's output depends on: landing bytes, code, window."""
    return input_signatures(definition, listing.root, listing.by_day, window, cache).window


def landing_output(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    checkpoint: CheckpointResource,
    definition: LakeAssetDef,
    window: Window,
    spark: SparkResource | None = None,
) -> TableOutput:
    """An asset's output from its landing source, or a skip when nothing it reads changed.

    The skip needs the last settled write of this window to carry the same input
    signature (landing bytes + code version + window) and the slice's data files to be
    the ones that write left; the IO manager checks the files again before accepting.
    """
    contract = definition.landing_source
    assert contract is not None
    listing = list_window(lake, contract, window)
    if listing.empty():
        _note_missing_source_folder(context, listing, contract)
    _note_days_without_files(context, listing, contract)
    scope = f"{FIGURES_SCOPE}/{definition.name}"
    with checkpoint.open() as store:
        settled = last_settled(store, definition.name, window)
        cache = (
            known_hashes(store, listing.root, listing.discoveries, lake.file_settle_seconds)
            if lake.reuse_file_hashes
            else HashCache()
        )
        signature = input_signature(definition, listing, window, cache)
        keep_hashes(store, listing.root, cache)
        # The figures of the run that read these very files: a rerun reports what it stands on.
        kept = store.memos(scope, [window.label()]).get(window.label())
    add_asset_metadata(
        context, {"input_files_hashed": cache.hashed, "input_files_hash_reused": cache.reused}
    )
    if _inputs_unchanged(context, lake, definition, listing, window, signature, settled):
        if kept is not None and kept.stamp == signature:
            # The listing's own unread files (reported by _inputs_unchanged) stay as listed now.
            figures = {k: v for k, v in kept.value.items() if k != "ignored_files"}
            read = {f["file"]: f["rows"] for f in figures.get("files", []) if "rows" in f}
            _report_figures(context, figures, listing, cache.known_sha256, read)
        return TableOutput.unchanged_inputs(signature)
    if spark is not None:
        return _spark_output(
            context, lake, checkpoint, spark, definition, window, signature, listing
        )
    erasable = definition.spec.erasable_keys
    rows, figures = _load_and_report(context, lake, contract, window, listing, checkpoint, erasable)
    with checkpoint.open() as store:
        try:
            store.remember(scope, [Memo(window.label(), signature, figures)])
        except ValueError:  # too many files to keep every listing: the counts alone
            plain = {k: v for k, v in figures.items() if not isinstance(v, dict | list)}
            store.remember(scope, [Memo(window.label(), signature, plain)])
    return TableOutput(definition.derive(rows) if definition.derive else rows, signature)


def _report_figures(
    context: dg.AssetExecutionContext,
    figures: dict[str, Any],
    listing: WindowListing,
    sha256: Callable[[str], str | None],
    read: dict[str, int],
) -> None:
    """A read's figures on the output; on a range of days, each day's own files on its own
    partition instead of on every one (``sha256``: a listed file's hash; ``read``: the rows
    of the files that were read)."""
    per_day = len(listing.days) > 1
    add_asset_metadata(context, figures_metadata(figures, per_day))
    if per_day:
        days = {
            day.isoformat(): [item.relpath for item in found.files]
            for day, found in listing.days.items()
        }
        add_day_files(context, days, sha256, read)


def _note_missing_source_folder(
    context: dg.AssetExecutionContext, listing: WindowListing, contract: SourceContract
) -> None:
    """Say so when a source's own folder is missing: nothing delivered yet, or a typo."""
    folder = contract.layout.root()
    present = listing.root.folder(folder) is not None
    add_asset_metadata(context, {"source_folder_exists": present})
    if not present:
        context.log.warning(
            f"{contract.name}: there is no {folder}/ under the landing root "
            f"{listing.root.uri}: nothing delivered for this source yet, or a typo in its "
            "layout; its days are empty"
        )


# Materialization metadata: how many of the run's days had no landing file, and which.
DAYS_WITHOUT_FILES = "days_without_files"
EMPTY_DAYS = "empty_days"


def _note_days_without_files(
    context: dg.AssetExecutionContext, listing: WindowListing, contract: SourceContract
) -> None:
    """Say which days of the run had no landing file: they materialize as empty days, and a
    green check on an empty day must not pass for a loaded one."""
    if listing.snapshot is not None:
        return
    empty = [day.isoformat() for day, found in listing.days.items() if not found.files]
    add_asset_metadata(
        context,
        {
            DAYS_WITHOUT_FILES: len(empty),
            EMPTY_DAYS: dg.MetadataValue.json(empty[:MAX_LISTED_DAYS]),
        },
    )
    if empty:
        shown = ", ".join(empty[:MAX_LISTED_DAYS]) + (" …" if len(empty) > MAX_LISTED_DAYS else "")
        context.log.warning(
            f"{contract.name}: {len(empty)} of {len(listing.days)} day(s) of this run have no "
            f"landing files ({shown}): they are stored as empty days; nothing delivered yet, "
            "or the wrong dates"
        )


def _inputs_unchanged(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    definition: LakeAssetDef,
    listing: WindowListing,
    window: Window,
    signature: str,
    settled: SettledWrite | None,
) -> bool:
    if not same_inputs(settled, signature, lake.table(definition.name).open):
        return False
    ignored = listing.ignored()
    add_asset_metadata(
        context,
        {
            "input_signature": signature,
            "ignored_files": listed(ignored),
        },
    )
    warn_unread(context, ignored)
    # The write's own line says it next ("unchanged, no commit ... proven by inputs").
    context.log.debug(
        f"{definition.name} {window.label()}: landing files and code unchanged "
        "since the last settled write; not recomputed"
    )
    return True


def _spark_output(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    checkpoint: CheckpointResource,
    spark: SparkResource,
    definition: LakeAssetDef,
    window: Window,
    signature: str,
    listing: WindowListing,
) -> TableOutput:
    """Landing rows read by Spark executors (the library's reader on each file); only the
    (small) quarantine and the files' summaries reach the driver."""
    from idem_assets.spark import read_landing_spark

    contract = definition.landing_source
    assert contract is not None and window.start is not None and window.end is not None
    batch = read_landing_spark(
        spark.session(), listing.root, contract, window.start, window.end, listing.days
    )
    valid, bad = batch.counts()
    quarantine = batch.quarantine.toArrow()
    erased = ledger_erased(checkpoint, definition.spec.erasable_keys)
    written = write_quarantine(lake, contract, quarantine, window, erased)
    add_asset_metadata(
        context,
        {
            "engine": "spark",
            "landing_files": len(batch.files),
            "raw_rows": valid + bad,
            "valid_rows": valid,
            "quarantined_rows": bad - written.erased,
            "quarantine_rows_erased": written.erased,
            "quarantine_table_version": written.version,
        },
    )
    rows = batch.rows
    if definition.derive_spark is not None:
        rows = definition.derive_spark(rows)
    return TableOutput(rows, signature, schema=definition.arrow_schema)


def _load_and_report(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    contract: SourceContract,
    window: Window,
    listing: WindowListing,
    checkpoint: CheckpointResource | None,
    erasable_keys: Sequence[str],
) -> tuple[pa.Table, dict[str, Any]]:
    """Read a source for an asset run: quarantine bad rows, record accounting; the valid
    rows and the figures reported. Quarantine rows holding an erased key of
    ``erasable_keys`` (in ``checkpoint``'s ledger) are left out of the quarantine table."""
    batch = read_landing(lake, contract, window, listing)
    erased = ledger_erased(checkpoint, erasable_keys)
    written = write_quarantine(lake, contract, batch.quarantine, window, erased)
    figures = landing_figures(batch, written)
    hashes = {f.relpath: f.sha256 for f in batch.files}
    _report_figures(context, figures, listing, hashes.get, {f.relpath: f.rows for f in batch.files})
    if written.rows.num_rows:
        context.log.warning(
            f"{written.rows.num_rows} {contract.name} row(s) of {window.label()} could not "
            f"be stored as declared: kept with their reasons in the {QUARANTINE_TABLE!r} table"
        )
    warn_unread(context, batch.ignored_files)
    return batch.rows, figures
