"""Deterministic idempotency keys: the same record always gets the same key, others never do."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from idem_assets.notify import idempotency_key
from idem_assets.notify.keys import KEY_PATTERN, key_problem, payload_hash


def test_same_record_same_key_and_pinned_value() -> None:
    key = idempotency_key("orders.shipped.v1", 42, dt.date(2024, 3, 1))
    assert key == idempotency_key("orders.shipped.v1", 42, dt.date(2024, 3, 1))
    assert KEY_PATTERN.fullmatch(key)
    # Pinned: changing the encoding would give every record a new key and re-send everything.
    assert key == "80d59c1b44e6ec2c74aee3398b930a6353c4d560a4693bc05d52893e3352d6b6"


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("ns", 1), ("ns", "1")),
        (("ns", True), ("ns", 1)),
        (("ns", "a:b", "c"), ("ns", "a", "b:c")),
        (("ns", None), ("ns", "")),
        (("ns", 1), ("other", 1)),
        (("ns", 1, 2), ("ns", 2, 1)),
        (("ns", dt.date(2024, 3, 1)), ("ns", "2024-03-01")),
    ],
)
def test_different_records_get_different_keys(left: tuple, right: tuple) -> None:
    assert idempotency_key(*left) != idempotency_key(*right)


def test_equal_values_in_different_forms_get_the_same_key() -> None:
    utc = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)
    paris = utc.astimezone(dt.timezone(dt.timedelta(hours=1)))
    assert idempotency_key("ns", utc) == idempotency_key("ns", paris)
    assert idempotency_key("ns", Decimal("19.90")) == idempotency_key("ns", Decimal("19.9"))


@pytest.mark.parametrize(
    ("parts", "error", "message"),
    [
        ((1.5,), TypeError, "part 0 has type float"),
        (("a", [1]), TypeError, "part 1 has type list"),
        ((dt.datetime(2024, 3, 1),), ValueError, "naive datetime"),
        ((Decimal("NaN"),), ValueError, "not a finite decimal"),
    ],
)
def test_ambiguous_parts_are_refused(parts: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        idempotency_key("ns", *parts)
    with pytest.raises(ValueError, match="namespace"):
        idempotency_key("", 1)


def test_key_rules_and_payload_hash() -> None:
    assert key_problem("orders:42.shipped_v-1") is None
    assert "required" in (key_problem(None) or "")
    assert "may only contain" in (key_problem("k\n") or "")
    assert payload_hash({"a": 1, "b": [1, 2]}) == payload_hash({"b": [1, 2], "a": 1})
    assert payload_hash({"a": 1}) != payload_hash({"a": 1.0})
