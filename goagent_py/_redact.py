"""Secrets out of error text (private).

A vendor may echo the API key it was sent back in an error body ("Incorrect API key provided:
sk-..."), and a proxy may echo the whole ``Authorization`` header. Error text is logged at
WARNING and recorded in spans, so :func:`redact` takes out of it, before any of that:

- the keys this process was configured with (passed in by whoever holds them: the HTTP backend
  knows its own headers), wherever they appear, even inside a longer token;
- the common key shapes, whoever they belong to: ``sk-...`` (OpenAI, ``sk-proj-``/``sk-ant-``
  included), ``AIza...`` (Google), ``pa-...`` (Voyage), ``hf_...``, ``gsk_...``, ``ghp_...``/
  ``github_pat_...``, ``xox?-...`` (Slack), ``AKIA...`` (AWS access key ids), ``Bearer``/``Basic``
  credentials, and the values of ``api_key=``, ``"x-api-key": "..."``, ``password=``... pairs;
- in URLs, the password of ``scheme://user:password@host`` and the values of query parameters
  that carry credentials (``?key=``, ``&token=``, ``&sig=``...).

Every secret becomes ``[REDACTED]``; what surrounds it is kept so the error stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = [
    "MIN_SECRET_CHARS",
    "REDACTED",
    "check_dsn",
    "redact",
    "secrets_from_dsn",
    "secrets_from_headers",
]

REDACTED = "[REDACTED]"

MIN_SECRET_CHARS = 8
"""Configured secrets shorter than this are not searched for: no real key is that short, and
replacing a 3-letter test key everywhere would mangle the message instead of protecting it."""

# Key shapes, each matched as a whole token (not in the middle of a longer word).
_KEY_SHAPES = re.compile(
    r"""(?<![A-Za-z0-9])(?:
        sk-[A-Za-z0-9_\-]{16,}                          # OpenAI, Anthropic (sk-ant-), DeepSeek
      | AIza[0-9A-Za-z_\-]{30,}                         # Google API keys
      | pa-[A-Za-z0-9_\-]{20,}                          # Voyage AI
      | hf_[A-Za-z0-9]{20,}                             # Hugging Face
      | gsk_[A-Za-z0-9]{20,}                            # Groq
      | (?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}        # GitHub tokens
      | github_pat_[A-Za-z0-9_]{20,}
      | xox[abprs]-[A-Za-z0-9\-]{10,}                   # Slack
      | (?:AKIA|ASIA)[0-9A-Z]{16}                       # AWS access key ids
    )""",
    re.VERBOSE,
)

# "Authorization: Bearer xyz", "Basic dXNlcjpwYXNz": the scheme stays, the credential goes.
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{8,}")

# api_key=..., "x-api-key": "...", password: ... (query strings, JSON, headers, env dumps).
_KEY_VALUE = re.compile(
    r"""(?ix)
    (\b(?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret[_-]?key|client[_-]?secret
        |password|passwd|x-goog-api-key)\b
     ["']?\s*[:=]\s*["']?)
    ([^\s"',;&}]{4,})
    """
)

# https://user:password@host: the user stays, the password goes.
_URL_PASSWORD = re.compile(r"(://[^\s/:@]*:)([^\s/@]+)(@)")  # a literal start: a fast scan

# ?key=...&token=...: query parameters that carry a credential (Google's key=, SAS sig=...).
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:key|apikey|token|access_token|auth|sig|signature|secret|password|code)=)"
    r"([^\s&#\"'<>]+)"
)

# What each pattern needs in the text before it is worth running (see redact).
_KEY_VALUE_WORDS = ("key", "token", "secret", "passw")
_KEY_PREFIXES = (
    "sk-", "AIza", "pa-", "hf_", "gsk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "xox", "AKIA", "ASIA",
)  # fmt: skip

# Headers whose value is a credential (lower-case names).
_SECRET_HEADER_WORDS = ("key", "token", "secret", "auth", "password", "cookie")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the configured ``secrets`` and every known key shape replaced.

    Args:
        text: an error message or response body.
        secrets: the exact secrets to take out (API keys this process sends); those shorter
            than :data:`MIN_SECRET_CHARS` are ignored.

    Returns:
        The text with each secret replaced by ``[REDACTED]`` (unchanged when there is none).
    """
    if not text:
        return text
    # Longest first: a key that contains another is replaced whole.
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    # Each pattern runs only when a word it needs is in the text: captured span content can be
    # long, and a scan that cannot match costs ~2-7 ms per 100 kB.
    lower = text.lower()
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", text)
    if "=" in text:
        text = _QUERY_SECRET.sub(
            lambda m: m.group(0) if m.group(2) == REDACTED else f"{m.group(1)}{REDACTED}", text
        )
    if "bearer" in lower or "basic" in lower:
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    if any(word in lower for word in _KEY_VALUE_WORDS):
        text = _KEY_VALUE.sub(
            lambda m: m.group(0) if m.group(2) == REDACTED else f"{m.group(1)}{REDACTED}", text
        )
    if any(prefix in text for prefix in _KEY_PREFIXES):
        text = _KEY_SHAPES.sub(REDACTED, text)
    return text


def secrets_from_headers(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The credentials among request headers (``Authorization``, ``x-api-key``...).

    For ``Authorization: Bearer KEY`` both the whole value and ``KEY`` are returned.
    """
    found: list[str] = []
    for name, value in headers.items():
        if not value or not any(word in name.lower() for word in _SECRET_HEADER_WORDS):
            continue
        found.append(value)
        scheme, _, credential = value.partition(" ")
        if credential and scheme.isalpha():
            found.append(credential.strip())
    return tuple(found)


_DSN_PASSWORD = re.compile(r"(?i)\bpassword\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S+))")


def secrets_from_dsn(dsn: str) -> tuple[str, ...]:
    """The password of a libpq connection string (URI or ``key=value`` form), as written.

    A driver quotes the malformed part of a connection string in its error ("invalid
    percent-encoded token: \"pa%zz\""), which may be the password itself: pass what this
    returns to :func:`redact` with errors about that connection.
    """
    found = [m.group(2) for m in _URL_PASSWORD.finditer(dsn)]
    found += [m.group(1) or m.group(2) for m in _DSN_PASSWORD.finditer(dsn)]
    return tuple(s for s in found if s)


def check_dsn(dsn: str, what: str) -> None:
    """Parse a libpq connection string now, so a malformed one fails here, by name, without its
    password (libpq quotes the bad part, and a connection pool logs that at WARNING on every
    attempt).

    Raises:
        ConfigurationError: ``dsn`` is not a valid connection string.
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    from goagent_py.errors import ConfigurationError

    try:
        conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        problem = redact(str(exc), secrets_from_dsn(dsn))
        raise ConfigurationError(
            f"{what}: invalid connection string ({problem}); write it as "
            "postgresql://user:password@host:port/database, with '%' in the password as %25"
        ) from None
