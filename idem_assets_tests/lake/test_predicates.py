"""Predicates accept typed values only; injection strings never reach delta-rs."""

import datetime as dt

import pytest

from idem_assets.lake.predicates import (
    OneOf,
    Range,
    UnsafePredicateError,
    date_range,
    literal,
    quote_identifier,
)


def test_date_range_renders_half_open_interval_with_quoted_identifier():
    rng = date_range("order_date", dt.date(2024, 3, 1), dt.date(2024, 3, 4))
    assert rng.sql() == (
        "\"order_date\" >= DATE '2024-03-01' AND \"order_date\" < DATE '2024-03-04'"
    )
    assert rng.sql("t").startswith('t."order_date" >= ')


@pytest.mark.parametrize(
    "value",
    ["2024-03-01' OR '1'='1", "2024-03-01", 1.5, True, None, b"x"],
)
def test_literal_refuses_untyped_values(value):
    with pytest.raises(UnsafePredicateError):
        literal(value)


@pytest.mark.parametrize(
    "name", ['order_date" OR 1=1 --', "order date", "", "1col", "a;b", 'x"', "t.col"]
)
def test_identifier_must_be_plain(name):
    with pytest.raises(UnsafePredicateError):
        quote_identifier(name)


def test_naive_datetime_is_refused_and_aware_one_is_utc():
    with pytest.raises(UnsafePredicateError):
        literal(dt.datetime(2024, 3, 1))
    aware = dt.datetime(2024, 3, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert literal(aware) == "'2024-03-01T00:00:00.000000Z'"
    assert literal(aware, wall_clock=True) == "'2024-03-01T02:00:00.000000'"


def test_empty_or_mixed_ranges_are_refused():
    with pytest.raises(UnsafePredicateError):
        date_range("d", dt.date(2024, 3, 2), dt.date(2024, 3, 2))
    with pytest.raises(UnsafePredicateError):
        Range("d", dt.date(2024, 3, 1), 5)
    with pytest.raises(UnsafePredicateError):
        date_range("d", dt.datetime(2024, 3, 1), dt.datetime(2024, 3, 2))


def test_one_of_accepts_only_listed_code_constants():
    allowed = frozenset({"orders", "events"})
    assert OneOf("source", "orders", allowed).sql() == "\"source\" = 'orders'"
    with pytest.raises(UnsafePredicateError):
        OneOf("source", "orders' OR '1'='1", allowed)
    with pytest.raises(UnsafePredicateError):
        OneOf("source", "customers", allowed)
