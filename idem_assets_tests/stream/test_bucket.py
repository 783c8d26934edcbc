"""A stream whose landing folder is a bucket prefix: the same batches as from a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from idem_assets.lake import fingerprint, read_rows
from idem_assets.landing import landing_root
from idem_assets.sample import EVENTS_STREAM
from idem_assets.stream import StreamIngester, StreamSettings
from idem_assets_tests.fixtures.s3 import S3Bucket
from idem_assets_tests.stream.world import StreamWorld, expected_keys

pytestmark = pytest.mark.slow


def test_a_stream_in_a_bucket_commits_what_the_same_folder_commits(
    s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    folder = StreamWorld(tmp_path / "landing", tmp_path / "lake", f"sqlite:///{tmp_path / 'a.db'}")
    files = folder.append(5)
    s3_bucket.upload_tree(folder.landing, "landing")
    bucket = StreamWorld(folder.landing, tmp_path / "lake-b", f"sqlite:///{tmp_path / 'b.db'}")
    root = landing_root(s3_bucket.uri("landing"))
    with folder.store() as store:
        folder.ingester(store, max_files_per_batch=2).run()
    with bucket.store() as store:
        report = StreamIngester(
            store,
            EVENTS_STREAM,
            root,
            bucket.table,
            bucket.quarantine,
            settings=StreamSettings(max_files_per_batch=2),
        ).run()
    assert [o.seq for o in report.outcomes] == [0, 1, 2]
    assert set(bucket.keys()) == expected_keys(files)
    for world_a, world_b in ((folder.table, bucket.table), (folder.quarantine, bucket.quarantine)):
        assert fingerprint(read_rows(world_b.open())) == fingerprint(read_rows(world_a.open()))
    assert bucket.batch_commits() == folder.batch_commits() == {0: 1, 1: 1, 2: 1}
