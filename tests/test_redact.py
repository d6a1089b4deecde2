"""goagent_py._redact: configured secrets and common key shapes out of error text."""

from __future__ import annotations

import pytest

from goagent_py._redact import REDACTED, redact, secrets_from_headers

# Fake keys of the real shapes (random letters, never issued by anyone).
SHAPES = {
    "openai": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "openai-legacy": "sk-4f8Kq2ZpX9mWvT3rLc7NbY1dHs6GjE0a",
    "anthropic": "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AbCdEf",
    "google": "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "voyage": "pa-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6",
    "huggingface": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "groq": "gsk_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "github": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "aws": "AKIAIOSFODNN7EXAMPLE",
}


@pytest.mark.parametrize("name", SHAPES)
def test_each_key_shape_is_redacted_and_the_text_around_it_kept(name: str) -> None:
    key = SHAPES[name]
    text = f"Incorrect API key provided: {key}. You can find your key at example.com"
    out = redact(text)
    assert key not in out
    assert out == f"Incorrect API key provided: {REDACTED}. You can find your key at example.com"


def test_configured_secret_of_no_known_shape_is_redacted_everywhere() -> None:
    key = "Zq81mXk2Lw9Pq3Rt7Yv5Nb6Hc4Jd0Fs1Ga8Ke2W"  # a Cohere-style key: no prefix
    text = f'{{"message": "invalid api token {key}", "echo": "{key}"}}'
    assert redact(text) == text  # no shape to recognise it by...
    out = redact(text, [key])  # ...so the configured key is what finds it
    assert key not in out
    assert out.count(REDACTED) == 2


def test_bearer_and_key_value_pairs() -> None:
    text = (
        "headers: Authorization: Bearer abc.DEF-123_456~xyz; "
        '{"x-api-key": "k-0123456789", "api_key": "plain-value-99", "password": "hunter2!"} '
        "url?api_key=QWERTYUIOP&model=m"
    )
    out = redact(text)
    for leaked in ("abc.DEF-123_456~xyz", "k-0123456789", "plain-value-99", "hunter2!", "QWERTY"):
        assert leaked not in out
    assert "Authorization: Bearer [REDACTED]" in out
    assert "&model=m" in out


def test_ordinary_text_is_untouched() -> None:
    text = (
        "HTTP 400 invalid_request_error: max_tokens: 100000 > 64000, which is the maximum "
        "allowed number of output tokens for claude-sonnet-4-6; task-management skills"
    )
    assert redact(text) == text


def test_short_configured_secrets_are_not_searched_for() -> None:
    assert redact("key k is bad", ["k"]) == "key k is bad"


def test_secrets_from_headers() -> None:
    headers = {
        "authorization": "Bearer sk-abc123456789",
        "x-api-key": "anthropic-key-1",
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    assert secrets_from_headers(headers) == (
        "Bearer sk-abc123456789",
        "sk-abc123456789",
        "anthropic-key-1",
    )


def test_a_password_in_a_url_and_credential_query_parameters_are_redacted() -> None:
    text = (
        "postgresql://app:hunter2hunter2@db:5432/x and "
        "https://maps.example/geo?q=Lisbon&key=Zx9Yw8Vu7Ts6Rq5Po4Nm&lang=pt "
        "https://blob.example/f?sv=2024&sig=abc%2Fdef%3D"
    )
    out = redact(text)
    for secret in ("hunter2hunter2", "Zx9Yw8Vu7Ts6Rq5Po4Nm", "abc%2Fdef%3D"):
        assert secret not in out
    assert "postgresql://app:[REDACTED]@db:5432/x" in out
    assert "q=Lisbon&key=[REDACTED]&lang=pt" in out
    assert redact("http://host:8080/path?page=2") == "http://host:8080/path?page=2"
