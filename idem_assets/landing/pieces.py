"""Cutting one landing file's bytes into pieces that parse on their own, so memory is bounded
by a piece, not by a file.

A CSV piece is the header line and whole records; a JSON Lines piece is whole lines. Cuts
fall on a newline outside any quoted field (an even number of ``"`` before it), so a quoted
newline never splits a record; a file whose quotes never balance is one piece. Each piece
carries the physical line its body starts on, so line numbers in reasons are the file's.
Gzip files are inflated as they stream, bounded against gzip bombs.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from idem_assets.landing.errors import LandingFileError

# What one piece may hold before it is cut (the text after inflating).
PIECE_BYTES = 64 << 20
# Decompressed text beyond this many times its compressed size is refused: real exports
# compress 3-20x, a gzip bomb thousands of times.
MAX_GZIP_RATIO = 200
_MIN_GZIP_BOUND = 64 << 20


@dataclass(frozen=True)
class Piece:
    """Bytes that parse on their own, and where in the file they come from."""

    index: int
    data: bytes
    # Physical lines of the file before the piece's first line of records, less the lines
    # the piece itself adds in front of them (a CSV piece repeats the header line).
    line_offset: int


def gunzip_chunks(chunks: Iterable[bytes], relpath: str, compressed_size: int) -> Iterator[bytes]:
    """The bytes inside a gzip stream, inflated as it arrives; bounded, and a corrupt or
    truncated stream names the file. Concatenated members (``cat a.gz b.gz``) are read."""
    bound = max(_MIN_GZIP_BOUND, compressed_size * MAX_GZIP_RATIO)
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    produced = 0
    started = False
    try:
        for chunk in chunks:
            rest = chunk
            while rest:
                started = True
                if inflater.eof:  # the next member of a concatenated file
                    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                out = inflater.decompress(rest, bound + 1 - produced)
                produced += len(out)
                if produced > bound:
                    raise LandingFileError(
                        relpath,
                        f"gzip content is over {bound} bytes ({MAX_GZIP_RATIO}x the file): "
                        "refused as a likely gzip bomb; split the file",
                    )
                if out:
                    yield out
                rest = inflater.unconsumed_tail or inflater.unused_data
    except zlib.error as exc:
        raise LandingFileError(relpath, f"not a readable gzip file ({exc}); re-deliver it") from exc
    if started and not inflater.eof:
        raise LandingFileError(relpath, "gzip stream is truncated; re-deliver the file")


def _cut(buffer: bytearray, limit: int, quoted: bool) -> int | None:
    """The end of the last whole record within ``buffer[:limit]`` (just after its newline),
    outside quotes when ``quoted``; None when there is none."""
    end = buffer.rfind(b"\n", 0, limit)
    if end < 0 or not quoted:
        return end + 1 if end >= 0 else None
    quotes = buffer.count(b'"', 0, end)
    while end >= 0:
        if quotes % 2 == 0:
            return end + 1
        previous = buffer.rfind(b"\n", 0, end)
        quotes -= buffer.count(b'"', previous + 1, end)
        end = previous
    return None


def text_pieces(
    chunks: Iterable[bytes],
    fmt: str,
    piece_bytes: int = PIECE_BYTES,
    header: bytes | None = None,
) -> Iterator[Piece]:
    """Pieces of a CSV or JSON Lines text (at least one, empty for an empty file).

    ``header``: a headerless CSV's column line, put in front of every piece (the file's
    first line is then a record, numbered line 1).
    """
    csv = fmt == "csv"
    headerless = header is not None
    buffer = bytearray()
    header = header or b""
    line = 1  # physical line the buffer starts on
    index = 0

    def piece(body: bytes) -> Piece:
        if not csv:
            return Piece(index, body, line - 1)
        if index == 0 and not headerless:
            return Piece(index, body, 0)
        # The header line in front: the body's first line is the piece's line 2.
        if not body and headerless:
            return Piece(index, b"", line - 2)  # an empty headerless file stays empty
        return Piece(index, header + body, line - 2)

    for chunk in chunks:
        buffer += chunk
        while len(buffer) > piece_bytes:
            if csv and not header:
                first = buffer.find(b"\n")
                if first < 0:
                    break  # no whole header line yet
                header = bytes(buffer[: first + 1])
            # The last whole record within a piece's size, else (a record longer than a
            # piece) the last one in the buffer; none yet: read on.
            cut = _cut(buffer, piece_bytes, csv) or _cut(buffer, len(buffer), csv)
            if cut is None:
                break
            body = bytes(buffer[:cut])
            yield piece(body)
            line += body.count(b"\n")
            index += 1
            del buffer[:cut]
    if buffer or index == 0:
        yield piece(bytes(buffer))
