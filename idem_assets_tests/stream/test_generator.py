"""The stream file generator and command line: deterministic bytes, append-only growth."""

from __future__ import annotations

from pathlib import Path

import pytest

from idem_assets.checkpoint import open_store
from idem_assets.lake import LakeTable
from idem_assets.sample import EVENTS_STREAM
from idem_assets.sample.__main__ import main
from idem_assets.sample.stream_files import append_stream_files
from idem_assets.stream import StreamIngester, StreamSettings


def _tree(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "events_stream").iterdir())}


def test_same_seed_gives_the_same_files_however_the_appends_are_split(tmp_path: Path) -> None:
    append_stream_files(tmp_path / "a", 5, 40, seed=3, defects=True)
    append_stream_files(tmp_path / "b", 2, 40, seed=3, defects=True)
    append_stream_files(tmp_path / "b", 3, 40, seed=3, defects=True)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert list(_tree(tmp_path / "a")) == [
        "events-000000.jsonl",
        "events-000001.csv",
        "events-000002.parquet",
        "events-000003.jsonl",
        "events-000004.csv",
    ]
    append_stream_files(tmp_path / "c", 5, 40, seed=4, defects=True)
    assert _tree(tmp_path / "c") != _tree(tmp_path / "a")


def test_redeliveries_repeat_earlier_events_with_a_newer_ingested_at(tmp_path: Path) -> None:
    files = append_stream_files(tmp_path, 6, 50, seed=9, redeliver_share=0.2)
    rows = [row for f in files for row in f.rows]
    pairs = [(r["event_id"], r["ingested_at"]) for r in rows]
    assert len(pairs) == len(set(pairs)) == 300
    first_seen: dict[str, object] = {}
    again = 0
    for row in rows:
        if row["event_id"] in first_seen:
            again += 1
            assert row["ingested_at"] > first_seen[row["event_id"]]
        else:
            first_seen[row["event_id"]] = row["ingested_at"]
    assert again == sum(f.redelivered for f in files) == 5 * 10


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="events_per_file >= 1"):
        append_stream_files(tmp_path, 1, 0, seed=1)
    with pytest.raises(ValueError, match="redeliver_share"):
        append_stream_files(tmp_path, 1, 5, seed=1, redeliver_share=1.5)


def test_command_line_appends_files_and_lists_the_offset_log(tmp_path: Path, capsys) -> None:
    assert main(["stream-files", "--landing", str(tmp_path), "--files", "3", "--events", "4"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store:
        StreamIngester(
            store,
            EVENTS_STREAM,
            tmp_path,
            LakeTable(str(tmp_path / "t")),
            LakeTable(str(tmp_path / "q")),
            settings=StreamSettings(max_files_per_batch=2),
        ).run()
    assert main(["stream-status", "--url", url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "0\tsucceeded\t2 files\tattempts 1/5",
        "1\tsucceeded\t1 files\tattempts 1/5",
    ]
