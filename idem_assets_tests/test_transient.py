"""The one rule for reads cut mid-body: which errors are retried, how often, for how long,
and how a cut stream goes on from where it stopped. The clock and the sleep are the test's
own: no test here waits on wall time."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from idem_assets.transient import Retries, is_transient, resuming, retrying

# How the errors read, verbatim, in delta-rs, obstore and pyarrow's S3 filesystem.
CUT_BODY = OSError(
    "Kernel error -> Generic S3 error\n ↳ Error performing GET http://127.0.0.1:1/b/t/"
    "_delta_log/_last_checkpoint in 17ms - HTTP error\n ↳ request or response body error\n"
    " ↳ error reading a body from connection\n ↳ end of file before message length reached"
)
CUT_LIST = Exception("Generic S3 error: Error getting list response body: HTTP error")
CUT_CURL = OSError(
    "AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 18, "
    "Transferred a partial file"
)


class FakeTime:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(errors: list[BaseException], value: str = "read"):
    """A read that raises each of ``errors`` in turn, then returns ``value``."""
    calls = []

    def read() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return value

    return read, calls


def test_cut_answers_are_transient_and_other_failures_are_not():
    assert is_transient(CUT_BODY) and is_transient(CUT_CURL)
    assert is_transient(ValueError("wrapped")) is False
    wrapped = RuntimeError("listing failed")
    wrapped.__cause__ = Exception("request or response body error")
    assert is_transient(wrapped)  # found in the chain of causes
    for refused in (
        PermissionError("403 Forbidden: AccessDenied"),
        FileNotFoundError("NoSuchKey"),
        OSError("error sending request for url: Connection refused"),  # nobody answers
        OSError("Precondition Failed: ETag does not match"),
        Exception("Generic S3 error: 503 SlowDown after 10 retries"),  # the store's budget
    ):
        assert not is_transient(refused), refused


def test_a_cut_read_is_tried_again_with_growing_waits_until_it_succeeds():
    time = FakeTime()
    read, calls = failing([CUT_BODY, CUT_LIST, CUT_CURL])
    policy = Retries(max_retries=5, init_backoff=1.0, max_backoff=3.0)
    assert retrying(read, "s3://b/t", policy, sleep=time.sleep, clock=time.clock) == "read"
    assert len(calls) == 4
    # 1, 2, 4 capped at 3: each wait is half to all of its ceiling.
    for wait, ceiling in zip(time.sleeps, (1.0, 2.0, 3.0), strict=True):
        assert ceiling / 2 <= wait <= ceiling


def test_retries_stop_at_the_count_and_raise_the_last_cut():
    time = FakeTime()
    read, calls = failing([CUT_BODY] * 10)
    with pytest.raises(OSError, match="end of file before message length reached"):
        retrying(read, "x", Retries(max_retries=3), sleep=time.sleep, clock=time.clock)
    assert len(calls) == 4 and len(time.sleeps) == 3


def test_retries_stop_at_the_timeout():
    time = FakeTime()
    read, calls = failing([CUT_BODY] * 10)
    policy = Retries(max_retries=10, retry_timeout=5.0, init_backoff=2.0, max_backoff=2.0, base=1)
    with pytest.raises(OSError):
        retrying(read, "x", policy, sleep=time.sleep, clock=time.clock)
    assert time.now <= 5.0
    assert 2 <= len(time.sleeps) <= 5  # waits of 1..2 s within 5 s


def test_other_errors_are_raised_at_once():
    time = FakeTime()
    read, calls = failing([PermissionError("AccessDenied")])
    with pytest.raises(PermissionError):
        retrying(read, "x", sleep=time.sleep, clock=time.clock)
    assert len(calls) == 1 and time.sleeps == []


def test_zero_retries_turns_it_off():
    read, calls = failing([CUT_BODY])
    with pytest.raises(OSError):
        retrying(read, "x", Retries(max_retries=0), sleep=FakeTime().sleep)
    assert len(calls) == 1


def test_a_cut_byte_stream_goes_on_from_the_last_byte_received():
    data = bytes(range(256)) * 40
    opened: list[int] = []

    def from_offset(offset: int) -> Iterator[bytes]:
        opened.append(offset)
        sent = 0
        for start in range(offset, len(data), 1000):
            # The first two answers die after two chunks.
            if len(opened) <= 2 and sent == 2:
                raise CUT_BODY
            sent += 1
            yield data[start : start + 1000]

    time = FakeTime()
    got = b"".join(resuming(from_offset, "x", size=len, sleep=time.sleep, clock=time.clock))
    assert got == data
    assert opened == [0, 2000, 4000]


def test_a_cut_batch_stream_skips_the_batches_it_already_gave():
    batches = list(range(10))
    opened: list[int] = []

    def from_batch(count: int) -> Iterator[int]:
        opened.append(count)

        def source() -> Iterator[int]:
            for index, batch in enumerate(batches):
                if len(opened) == 1 and index == 4:
                    raise CUT_CURL
                yield batch

        return itertools.islice(source(), count, None)

    time = FakeTime()
    assert list(resuming(from_batch, "x", sleep=time.sleep, clock=time.clock)) == batches
    assert opened == [0, 4]


def test_settings_come_from_the_storage_options_delta_rs_reads():
    policy = Retries.from_options(
        {
            "max_retries": "3",
            "retry_timeout": "30s",
            "backoff_config.init_backoff": "250ms",
            "backoff_config.max_backoff": "2 minutes",
            "backoff_config.base": "3",
            "aws_region": "us-east-1",  # not a retry setting: ignored here
        }
    )
    assert policy == Retries(
        max_retries=3, retry_timeout=30.0, init_backoff=0.25, max_backoff=120.0, base=3.0
    )
    assert Retries.from_options(None) == Retries()
    with pytest.raises(ValueError, match="retry_timeout='soon' is not a duration"):
        Retries.from_options({"retry_timeout": "soon"})
    with pytest.raises(ValueError, match="max_retries='many' is not a number"):
        Retries.from_options({"max_retries": "many"})


def test_a_write_attempt_cut_mid_body_is_decided_again_and_other_errors_are_not():
    from deltalake.exceptions import CommitFailedError

    from idem_assets.lake.tables import with_commit_retries

    calls: list[int] = []

    def cut_once(number: int) -> str:
        calls.append(number)
        if number == 0:
            raise CUT_BODY  # e.g. the snapshot's _last_checkpoint read died mid-body
        return "decided"

    assert with_commit_retries(cut_once) == "decided" and calls == [0, 1]

    def lost_race_then_cut(number: int) -> str:
        if number == 0:
            raise CommitFailedError("Failed to commit transaction: version already exists")
        if number == 1:
            raise CUT_CURL
        return "decided"

    assert with_commit_retries(lost_race_then_cut) == "decided"

    def refused(number: int) -> str:
        calls.append(number)
        raise PermissionError("AccessDenied")

    calls.clear()
    with pytest.raises(PermissionError):
        with_commit_retries(refused)
    assert calls == [0]  # not a cut, not a conflict: raised at once
