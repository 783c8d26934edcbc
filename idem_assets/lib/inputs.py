"""What a landing asset's inputs are, proven from metadata: signatures per day and per window.

A landing file's content hash is kept in the checkpoint store as a memo stamped with the
file's listed stamp (size and modification time, or ETag), one row per file: a later run
whose listing shows the same stamp reuses the hash instead of reading the file, however
many files a range covers (a write record keeps only the window's digest).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from idem_assets._version import __version__
from idem_assets.checkpoint import CheckpointStore, Memo
from idem_assets.io_manager import Window
from idem_assets.landing.files import Discovery, HashCache, signature_of
from idem_assets.landing.store import SETTLE_SECONDS, LandingRoot
from idem_assets.lib.asset_def import LakeAssetDef


def hash_scope(root: LandingRoot) -> str:
    """The memo scope of a landing root's file hashes (its URI, digested: no long keys)."""
    return "landing/" + hashlib.sha256(root.uri.encode()).hexdigest()[:24]


def known_hashes(
    store: CheckpointStore,
    root: LandingRoot,
    discoveries: list[Discovery],
    settle_seconds: float = SETTLE_SECONDS,
) -> HashCache:
    """A hash cache holding the kept hashes of the listed files (stamps compared on use);
    a hash it computes is kept once its file has been still for ``settle_seconds``."""
    relpaths = [item.relpath for found in discoveries for item in found.files]
    memos = store.memos(hash_scope(root), relpaths)
    known = {rel: [*json.loads(memo.stamp), memo.value] for rel, memo in memos.items()}
    return HashCache(known, settle_seconds)


def keep_hashes(store: CheckpointStore, root: LandingRoot, cache: HashCache) -> int:
    """Keep the hashes ``cache`` computed (of settled files) for later runs."""
    return store.remember(
        hash_scope(root),
        [Memo(rel, json.dumps(list(stamp)), sha) for rel, (stamp, sha) in cache.fresh().items()],
    )


@dataclass(frozen=True)
class InputSignatures:
    """The digest of an asset's inputs for a window, and of each day's landing files."""

    window: str
    days: Mapping[dt.date | None, str | None]


def input_signatures(
    definition: LakeAssetDef,
    root: LandingRoot,
    discoveries: Mapping[dt.date | None, Discovery],
    window: Window,
    cache: HashCache | None = None,
) -> InputSignatures:
    """Digest of everything an asset's output depends on (landing bytes, code, window), and
    the signature of each day's files (None for a day without files)."""
    days = {day: signature_of(root, found, cache) for day, found in discoveries.items()}
    described = json.dumps(
        {
            "asset": definition.name,
            "code_version": definition.code_version,
            "library": __version__,
            "window": window.label(),
            "inputs": list(days.values()),
        },
        sort_keys=True,
    )
    return InputSignatures(hashlib.sha256(described.encode()).hexdigest(), days)
