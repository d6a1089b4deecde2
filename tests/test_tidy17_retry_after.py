"""One reading of ``Retry-After`` (``goagent_py/_retry_after.py``): what a provider's error
carries (``ProviderError.retry_after``) and what the retry policy's public
``parse_retry_after`` returns are the same answer for every header value.

RFC 9110 section 10.2.3: delay-seconds or an HTTP date (GMT). Anything else is unusable and
reads as absent, so the policy's own backoff applies (not "retry at once").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from goagent_py import parse_retry_after
from goagent_py.providers._http import error_from_response

_NOW = datetime.now(UTC).replace(microsecond=0)


def _http_date(when: datetime, zone: str = "GMT") -> str:
    return when.strftime("%a, %d %b %Y %H:%M:%S ") + zone


def _from_error(value: str) -> float | None:
    response = httpx.Response(429, headers={"retry-after": value}, json={})
    return error_from_response(response, provider="openai").retry_after


CASES = [
    ("7", 7.0),
    (" 2 ", 2.0),
    ("1.5", 1.5),
    ("0", 0.0),
    # Unusable: absent, not "wait 0 s".
    ("-3", None),
    ("-0.5", None),
    ("nan", None),
    ("NaN", None),
    ("inf", None),
    ("Infinity", None),
    ("1e3", None),
    ("soon", None),
    ("5 seconds", None),
    ("Wed, 99 Foo 2015", None),
    ("", None),
]


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_the_seconds_form_and_garbage_read_alike_everywhere(
    value: str, expected: float | None
) -> None:
    assert parse_retry_after(value) == expected
    assert _from_error(value) == expected


def test_a_date_ahead_reads_as_the_seconds_until_it() -> None:
    value = _http_date(_NOW + timedelta(seconds=120))
    assert parse_retry_after(value, now=_NOW) == 120.0
    # The provider's error reads it against the clock: an hour ahead is at most an hour.
    seen = _from_error(_http_date(datetime.now(UTC) + timedelta(hours=1)))
    assert seen is not None
    assert 0.0 < seen <= 3600.0


def test_a_date_in_the_past_is_no_wait() -> None:
    value = _http_date(_NOW - timedelta(hours=1))
    assert parse_retry_after(value, now=_NOW) == 0.0
    assert _from_error(value) == 0.0


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone set five hours from UTC (restored after)."""
    monkeypatch.setenv("TZ", "EST+05")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_from_utc")
def test_a_date_without_a_known_zone_is_gmt_not_local_time() -> None:
    # "-0000" parses to a time with no zone; HTTP dates are GMT, whatever the machine's zone.
    value = _http_date(_NOW + timedelta(seconds=120), zone="-0000")
    assert parse_retry_after(value, now=_NOW) == 120.0
    # Read as local time, an hour ahead would be six hours ahead here.
    seen = _from_error(_http_date(datetime.now(UTC) + timedelta(hours=1), zone="-0000"))
    assert seen is not None
    assert 0.0 < seen <= 3600.0


def test_a_naive_now_is_utc() -> None:
    value = _http_date(_NOW + timedelta(seconds=30))
    assert parse_retry_after(value, now=_NOW.replace(tzinfo=None)) == 30.0


def test_retry_after_ms_comes_first_and_garbage_in_it_falls_back() -> None:
    def error(headers: dict[str, str]) -> float | None:
        response = httpx.Response(429, headers=headers, json={})
        return error_from_response(response, provider="openai").retry_after

    assert error({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert error({"retry-after-ms": "-250", "retry-after": "9"}) == 9.0
    assert error({"retry-after-ms": "nan", "retry-after": "9"}) == 9.0
    assert error({"retry-after-ms": "nan"}) is None
    assert error({}) is None
