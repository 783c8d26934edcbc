"""Where landing files live: a local folder or an object-storage prefix, behind one interface.

This module alone knows whether a landing file's bytes come from a disk or a bucket. Every
other landing module works on posix paths relative to the landing root and on the
``LandingObject`` entries a listing returns, so layouts, hidden files, the newest-snapshot
rule, gzip, every format, signatures and the sensors behave the same on both.

Object stores are reached through obstore, the Python binding of the Rust ``object_store``
crate that delta-rs itself is built on: the lake's storage options (dagster-deltalake's
``S3Config`` fields, ``AWS_*`` variables) mean the same thing here, listings carry each
object's ETag, size and last-modified time, and a read can be made conditional on the
ETag listed (so an object replaced between listing and reading is refused, never mixed in).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from idem_assets.landing.errors import LandingFileError, LandingRootError
from idem_assets.transient import Retries, resuming, retrying

T = TypeVar("T")

_HASH_CHUNK = 1 << 20
# Listing pages of this many objects (S3 returns at most 1,000 per request).
_LIST_CHUNK = 1000
# A local file changed this recently may change again within the same clock tick without
# its stamp moving, so its hash is not kept for reuse (git's "racy timestamp" rule).
SETTLE_SECONDS = 2.0
# URI schemes read through obstore (each store's own settings and environment variables).
OBJECT_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure")
# delta-rs options that only its log store understands (locking, renames, its own pools):
# meaningless for reading landing files, so they are not passed to the object store.
_LAKE_ONLY_OPTIONS = re.compile(
    r"^(aws_)?(s3_allow_unsafe_rename|allow_unsafe_rename|s3_locking_provider|"
    r"dynamo\w*|delta_dynamo\w*|s3_pool_idle_timeout_seconds|sts_pool_idle_timeout_seconds|"
    r"s3_get_internal_server_error_retries|force_credential_load|copy_if_not_exists|"
    r"conditional_put)$",
    re.IGNORECASE,
)

# HTTP client settings (obstore's ClientConfig); delta-rs takes them mixed with the store's
# own, with or without a provider prefix (allow_http, AWS_ALLOW_HTTP).
_CLIENT_OPTIONS = frozenset(
    "allow_http allow_invalid_certificates connect_timeout default_content_type "
    "http1_only http2_keep_alive_interval http2_keep_alive_timeout http2_keep_alive_while_idle "
    "http2_only pool_idle_timeout pool_max_idle_per_host proxy_url proxy_ca_certificate "
    "proxy_excludes root_certificate randomize_addresses read_timeout timeout user_agent".split()
)
# object_store's retry settings, as delta-rs names them in storage options.
_RETRY_OPTIONS = re.compile(r"^(max_retries|retry_timeout|backoff_config\.\w+)$", re.IGNORECASE)
_PROVIDER_PREFIX = re.compile(r"^(aws|google|azure)_", re.IGNORECASE)

Stamp = tuple[int | str, ...]


@dataclass(frozen=True)
class LandingObject:
    """One file as a listing saw it: where it is and what the store says about its bytes.

    ``stamp`` changes whenever the bytes are rewritten (local: size, mtime, ctime, inode,
    device; object stores: size, ETag, last-modified, version), so an equal stamp vouches
    for a hash computed earlier.
    """

    relpath: str  # posix, relative to the landing root
    size: int
    stamp: Stamp
    modified_ns: int

    @property
    def name(self) -> str:
        """The file name (last path segment)."""
        return PurePosixPath(self.relpath).name


@dataclass(frozen=True)
class Folder:
    """What one folder directly holds: files (by name), sub-folders and anything else."""

    relpath: str
    files: tuple[LandingObject, ...]
    folders: tuple[str, ...] = ()  # names of sub-folders
    others: tuple[str, ...] = ()  # names of entries that are neither (sockets, fifos, ...)


def join(*parts: str) -> str:
    """Relative posix path from parts, skipping empty ones."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


class LandingRoot(ABC):
    """The root of a landing zone; relative posix paths name everything under it."""

    uri: str
    # Whether a listing's hint (size and ETag) already names the bytes: then sensors can
    # tell changed content from a listing alone, without reading a byte.
    hints_name_content: bool = False

    def __init__(self) -> None:
        self._exists = False

    def location(self, relpath: str) -> str:
        """The full location of a relative path, for messages."""
        return f"{self.uri.rstrip('/')}/{relpath}" if relpath else self.uri

    def require(self) -> None:
        """Raise ``LandingRootError`` unless the root exists (checked once per instance)."""
        if not self._exists:
            self._check_exists()
            self._exists = True

    def folder(self, relpath: str) -> Folder | None:
        """The folder's entries, or None when it does not exist (the root must exist)."""
        found = self._folder(relpath)
        if found is None:
            self.require()
        return found

    def tree(self, relpath: str, depth: int) -> dict[str, Folder]:
        """Every folder exactly ``depth`` levels below ``relpath``, with its entries."""
        found = self._tree(relpath, depth)
        if not found:
            self.require()
        return found

    @abstractmethod
    def _check_exists(self) -> None: ...

    @abstractmethod
    def _folder(self, relpath: str) -> Folder | None: ...

    @abstractmethod
    def _tree(self, relpath: str, depth: int) -> dict[str, Folder]: ...

    @abstractmethod
    def chunks(self, item: LandingObject) -> Iterator[bytes]:
        """The listed object's bytes, in chunks.

        Raises ``LandingFileError`` naming the file when it was deleted or replaced after
        it was listed, or changed while it was read: the bytes yielded are always the
        listed object's.
        """

    @abstractmethod
    def fetch(self, relpath: str) -> bytes | None:
        """The bytes at ``relpath`` now, without a listing; None when nothing is there."""

    def sha256(self, item: LandingObject) -> str:
        """The hex sha256 of the listed object's bytes, streamed."""
        digest = hashlib.sha256()
        for chunk in self.chunks(item):
            digest.update(chunk)
        return digest.hexdigest()

    @abstractmethod
    def hint(self, item: LandingObject) -> Stamp:
        """What a listing says about the bytes, cheaply (the sensors' change hint)."""

    def settled(self, item: LandingObject, seconds: float = SETTLE_SECONDS) -> bool:
        """Whether the object's stamp can vouch for a hash taken now."""
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"


class LocalRoot(LandingRoot):
    """A landing zone in a local (or mounted) folder."""

    def __init__(self, path: str | Path, where: str = "the landing URI") -> None:
        super().__init__()
        self.path = Path(path).resolve()
        self.uri = str(self.path)
        self.where = where

    def _check_exists(self) -> None:
        if not self.path.is_dir():
            problem = "is not a folder" if self.path.exists() else "does not exist"
            raise LandingRootError(
                self.uri,
                f"{problem}: a typo or a missing mount? Set {self.where} to the folder "
                "producers write to (an empty day is valid only inside a root that exists)",
            )

    def _entry(self, relpath: str, entry: os.DirEntry[str]) -> LandingObject:
        st = entry.stat()
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        return LandingObject(
            join(relpath, entry.name), st.st_size, stamp, max(st.st_mtime_ns, st.st_ctime_ns)
        )

    def _folder(self, relpath: str) -> Folder | None:
        base = self.path / relpath
        files: list[LandingObject] = []
        folders: list[str] = []
        others: list[str] = []
        try:
            with os.scandir(base) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    try:
                        if entry.is_dir():
                            folders.append(entry.name)
                        elif entry.is_file():
                            files.append(self._entry(relpath, entry))
                        else:
                            others.append(entry.name)
                    except FileNotFoundError:
                        continue  # removed while listed: not there
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise LandingRootError(self.location(relpath), f"cannot be listed: {exc}") from exc
        return Folder(relpath, tuple(files), tuple(folders), tuple(others))

    def _tree(self, relpath: str, depth: int) -> dict[str, Folder]:
        level = [relpath]
        for _ in range(depth):
            nxt = []
            for folder in level:
                found = self._folder(folder)
                nxt.extend(join(folder, name) for name in (found.folders if found else ()))
            level = nxt
        out = {}
        for folder in level:
            found = self._folder(folder)
            if found is not None:
                out[folder] = found
        return out

    def _stamp_now(self, item: LandingObject) -> Stamp | None:
        try:
            st = os.stat(self.path / item.relpath)
        except FileNotFoundError:
            return None
        return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)

    def _same(self, item: LandingObject, when: str) -> None:
        now = self._stamp_now(item)
        if now is None:
            raise LandingFileError(item.relpath, f"was deleted {when}; rerun to read what is there")
        if now != item.stamp:
            raise LandingFileError(
                item.relpath,
                f"was rewritten {when} (size, mtime or inode moved); rerun once the producer "
                "has finished writing it",
            )

    def chunks(self, item: LandingObject) -> Iterator[bytes]:
        """The listed file's bytes in chunks, refused if it changed since it was listed."""
        self._same(item, "after it was listed")
        left = item.size
        try:
            with (self.path / item.relpath).open("rb") as handle:
                while left > 0 and (chunk := handle.read(min(_HASH_CHUNK, left))):
                    left -= len(chunk)
                    yield chunk
        except FileNotFoundError:
            raise LandingFileError(item.relpath, "was deleted while it was read") from None
        self._same(item, "while it was read")

    def fetch(self, relpath: str) -> bytes | None:
        """The file's bytes now; None when it does not exist."""
        try:
            return (self.path / relpath).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def hint(self, item: LandingObject) -> Stamp:
        """Size and mtime: a touch moves it, so content is confirmed by hashing."""
        return (item.size, item.stamp[1])

    def settled(self, item: LandingObject, seconds: float = SETTLE_SECONDS) -> bool:
        """Whether the file has been still for ``seconds``, so its stamp can be trusted."""
        return time.time_ns() - item.modified_ns > seconds * 1e9


class ObjectRoot(LandingRoot):
    """A landing zone under an object-storage prefix (``s3://bucket/prefix``, gs://, az://)."""

    hints_name_content = True

    def __init__(
        self, uri: str, options: Mapping[str, str] | None = None, where: str = "the landing URI"
    ) -> None:
        super().__init__()
        self.uri = uri.rstrip("/")
        self.where = where
        self._config, self._client = object_store_options(options or {})
        self._retries = Retries.from_options(options)
        self._store: Any = None

    @property
    def store(self) -> Any:
        """The obstore store, built on first use (building it reads no network)."""
        if self._store is None:
            from obstore.exceptions import BaseError
            from obstore.store import from_url

            try:
                self._store = from_url(
                    self.uri,
                    config=self._config or None,
                    client_options=self._client or None,
                    retry_config=_retry_config(self._retries),
                )
            except (BaseError, ValueError) as exc:
                raise LandingRootError(self.uri, _explain(exc, self.where)) from None
            except BaseException as exc:  # obstore's Rust panics surface as BaseException
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                raise LandingRootError(
                    self.uri, f"the storage options cannot configure this store: {exc}"
                ) from None
        return self._store

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_store": None}

    def _retrying(self, read: Callable[[], T], relpath: str) -> T:
        return retrying(read, self.location(relpath), self._retries)

    def _fail(self, exc: BaseException) -> LandingRootError:
        return LandingRootError(self.uri, _explain(exc, self.where))

    def _check_exists(self) -> None:
        import obstore

        try:
            first = self._retrying(
                lambda: next(iter(obstore.list(self.store, None, chunk_size=1)), []), ""
            )
        except Exception as exc:  # obstore raises its own error types, all explained here
            raise self._fail(exc) from None
        if not first:
            raise LandingRootError(
                self.uri,
                f"holds no objects: a typo in {self.where}, or nothing uploaded yet? Producers' "
                "files make the prefix exist; put a marker such as _SUCCESS there to run on an "
                "empty landing zone",
            )

    def _object(self, meta: Mapping[str, Any]) -> LandingObject:
        modified: dt.datetime = meta["last_modified"]
        modified_ns = int(modified.timestamp() * 1e9)
        etag = str(meta.get("e_tag") or "")
        stamp = (int(meta["size"]), etag, modified_ns, str(meta.get("version") or ""))
        return LandingObject(str(meta["path"]), int(meta["size"]), stamp, modified_ns)

    def _folder(self, relpath: str) -> Folder | None:
        import obstore

        try:
            listed = self._retrying(
                lambda: obstore.list_with_delimiter(self.store, f"{relpath}/" if relpath else None),
                relpath,
            )
        except Exception as exc:
            raise self._fail(exc) from None
        files = [self._object(meta) for meta in listed["objects"] if _is_object(meta)]
        folders = [PurePosixPath(p.rstrip("/")).name for p in listed["common_prefixes"]]
        if not files and not folders:
            return None
        return Folder(relpath, tuple(sorted(files, key=lambda f: f.name)), tuple(sorted(folders)))

    def _tree(self, relpath: str, depth: int) -> dict[str, Folder]:
        # A listing cut mid-page is listed again from its start.
        return self._retrying(lambda: self._listed_tree(relpath, depth), relpath)

    def _listed_tree(self, relpath: str, depth: int) -> dict[str, Folder]:
        import obstore

        files: dict[str, list[LandingObject]] = {}
        folders: dict[str, set[str]] = {}
        skip = len(PurePosixPath(relpath).parts) if relpath else 0
        try:
            stream = obstore.list(
                self.store, f"{relpath}/" if relpath else None, chunk_size=_LIST_CHUNK
            )
            for chunk in stream:
                for meta in chunk:
                    if not _is_object(meta):
                        continue
                    parts = PurePosixPath(str(meta["path"])).parts[skip:]
                    if len(parts) <= depth:
                        continue  # a file above the folders asked for
                    leaf = join(relpath, *parts[:depth])
                    if len(parts) == depth + 1:
                        files.setdefault(leaf, []).append(self._object(meta))
                    else:
                        folders.setdefault(leaf, set()).add(parts[depth])
        except Exception as exc:
            raise self._fail(exc) from None
        return {
            leaf: Folder(
                leaf,
                tuple(sorted(files.get(leaf, ()), key=lambda f: f.name)),
                tuple(sorted(folders.get(leaf, ()))),
            )
            for leaf in sorted(set(files) | set(folders))
        }

    def chunks(self, item: LandingObject) -> Iterator[bytes]:
        """The listed object's bytes, fetched only if its ETag is still the one listed."""
        import obstore
        from obstore.exceptions import NotFoundError, PreconditionError

        options: dict[str, Any] = {}
        etag = str(item.stamp[1])
        if etag:
            options["if_match"] = etag
        else:  # stores without ETags: the listed time must still hold
            options["if_unmodified_since"] = dt.datetime.fromtimestamp(
                item.modified_ns / 1e9, dt.UTC
            )

        def from_offset(offset: int) -> Iterator[bytes]:
            # The same ETag (or time) condition holds on a resumed read: never mixed bytes.
            ranged = {**options, "range": {"offset": offset}} if offset else options
            result = obstore.get(self.store, item.relpath, options=ranged)
            for chunk in result.stream(min_chunk_size=_HASH_CHUNK):
                yield bytes(chunk)

        try:
            # A read cut mid-body goes on from the last byte received.
            yield from resuming(from_offset, self.location(item.relpath), self._retries, size=len)
        except (FileNotFoundError, NotFoundError):
            raise LandingFileError(
                item.relpath, "was deleted after it was listed; rerun to read what is there"
            ) from None
        except PreconditionError:
            raise LandingFileError(
                item.relpath,
                f"was replaced after it was listed (ETag {etag or 'unknown'} no longer "
                "matches); rerun to read the new file",
            ) from None
        except LandingFileError:
            raise
        except Exception as exc:
            raise LandingFileError(
                item.relpath, f"could not be read from {self.uri}: {_explain(exc, self.where)}"
            ) from None

    def fetch(self, relpath: str) -> bytes | None:
        """The object's bytes now; None when there is no such object."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            return self._retrying(lambda: bytes(obstore.get(self.store, relpath).bytes()), relpath)
        except (FileNotFoundError, NotFoundError):
            return None
        except Exception as exc:
            raise LandingFileError(
                relpath, f"could not be read from {self.uri}: {_explain(exc, self.where)}"
            ) from None

    def hint(self, item: LandingObject) -> Stamp:
        """Size and ETag: an upload of other bytes gets another ETag."""
        return (item.size, item.stamp[1] or item.stamp[2])


def _is_object(meta: Mapping[str, Any]) -> bool:
    # Some tools write zero-byte "folder/" marker objects: not files.
    return not str(meta["path"]).endswith("/") and bool(PurePosixPath(str(meta["path"])).name)


def object_store_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The lake's storage options that mean something to the landing zone's object store,
    split into the store's settings and its HTTP client's (as obstore takes them). The
    retry settings go to the store's retry config instead (``_retry_config``)."""
    config: dict[str, str] = {}
    client: dict[str, str] = {}
    for key, value in options.items():
        if _LAKE_ONLY_OPTIONS.match(key) or _RETRY_OPTIONS.match(key):
            continue
        bare = _PROVIDER_PREFIX.sub("", key.lower())
        if bare in _CLIENT_OPTIONS:
            client[bare] = value
        else:
            config[key] = value
    return config, client


def _retry_config(retries: Retries) -> dict[str, Any]:
    """obstore's retry config for the same settings delta-rs reads from storage options."""
    return {
        "max_retries": retries.max_retries,
        "retry_timeout": dt.timedelta(seconds=retries.retry_timeout),
        "backoff": {
            "init_backoff": dt.timedelta(seconds=retries.init_backoff),
            "max_backoff": dt.timedelta(seconds=retries.max_backoff),
            "base": retries.base,
        },
    }


def is_object_uri(value: str) -> bool:
    """Whether ``value`` names an object-storage location (``scheme://...``, not file://)."""
    scheme, sep, _ = value.partition("://")
    return bool(sep) and scheme.lower() != "file"


def landing_root(
    value: LandingRoot | str | Path,
    options: Mapping[str, str] | None = None,
    where: str = "the landing URI",
) -> LandingRoot:
    """The landing root named by a local path, ``file://`` URI or object-storage URI.

    ``options`` are storage options as delta-rs takes them (dagster-deltalake's config
    fields, ``aws_*`` keys); left out, the store reads its own environment (``AWS_*``,
    ``GOOGLE_*``, ``AZURE_*``). ``where`` names the setting the value came from, for errors.
    """
    if isinstance(value, LandingRoot):
        return value
    text = str(value)
    if text.startswith("file://"):
        return LocalRoot(text.removeprefix("file://"), where)
    if "://" not in text:
        return LocalRoot(text, where)
    scheme = text.split("://", 1)[0].lower()
    if scheme not in OBJECT_SCHEMES:
        raise LandingRootError(
            text,
            f"unsupported scheme {scheme}://; {where} takes a local path or one of "
            + ", ".join(f"{s}://" for s in OBJECT_SCHEMES),
        )
    bucket = text.split("://", 1)[1].split("/", 1)[0]
    if not bucket:
        raise LandingRootError(text, f"names no bucket; {where} takes {scheme}://bucket/prefix")
    return ObjectRoot(text, options, where)


def _explain(exc: BaseException, where: str) -> str:
    """A short account of an object-store failure and the setting that fixes it."""
    text = str(exc)
    first = text.split("\n", 1)[0][:300]
    low = text.lower()
    if "nosuchbucket" in low or "bucket does not exist" in low:
        return f"the bucket does not exist (check the bucket in {where})"
    if "169.254.169.254" in low or ("credential" in low and "unauthorized" not in low):
        return (
            "no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the "
            "s3 settings of the resource, as dg.EnvVar)"
        )
    if any(
        code in text
        for code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403 Forbidden")
    ):
        return (
            "access denied: the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the "
            "resource's s3 settings) may not list and read this prefix"
        )
    if any(
        marker in low
        for marker in ("error sending request", "connect error", "dns error", "timed out")
    ):
        return (
            "the endpoint cannot be reached (check AWS_ENDPOINT_URL or the s3 endpoint setting, "
            f"and the network): {first}"
        )
    if "is not valid for store" in low or "configuration key" in low:
        return f"a storage option is not one this store knows: {first}"
    return first
