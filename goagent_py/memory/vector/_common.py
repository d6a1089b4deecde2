"""Checks and conversions every vector store shares: vectors, dimensions, metadata filters,
the session key, entry serialisation and SQL identifiers.

Each store rejects the same bad input with the same message because they all call these.
numpy is imported on first use, so importing this module stays light.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from goagent_py.errors import ConfigurationError, InvalidInputError
from goagent_py.memory.vector.base import Metric, UpsertEntry, Vector
from goagent_py.messages import messages_to_json

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "SESSION_KEY",
    "FilterValue",
    "SerializedEntry",
    "as_vector",
    "check_dimensions",
    "check_filter",
    "entries_version",
    "filter_sql",
    "metadata_matches",
    "serialize_entries",
    "session_of",
    "split_session",
    "validate_identifier",
    "value_matches",
]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
SESSION_KEY = "session"
"""The metadata key long-term memory stores the session (agent name) under."""

_FILTER_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")

FilterValue = str | int | float | bool


def as_vector(
    vector: Vector, dimensions: int | None, *, what: str = "vector", metric: Metric = "cosine"
) -> NDArray[np.float32]:
    """``vector`` as a fresh 1-D float32 array, checked: finite, ``dimensions`` long, and for
    the cosine metric not all zeros.

    Raises:
        ConfigurationError: the vector is empty, not 1-D, has NaN/inf, is all zeros under
            cosine (which is undefined for it), or has the wrong number of dimensions.
    """
    import numpy as np

    try:
        arr = np.array(vector, dtype=np.float32, copy=True)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what} must be a sequence of numbers: {exc}") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ConfigurationError(
            f"{what} must be a non-empty 1-D sequence of numbers, got shape {arr.shape}"
        )
    if dimensions is not None and arr.shape[0] != dimensions:
        raise ConfigurationError(
            f"{what} has {arr.shape[0]} dimensions but the store holds {dimensions}-dimensional "
            "vectors; use the same embedder (and dimensions) for storing and searching"
        )
    if not np.isfinite(arr).all():
        raise ConfigurationError(f"{what} contains NaN or infinite values")
    if metric == "cosine" and not np.any(arr):
        raise ConfigurationError(f"{what} is all zeros; cosine similarity is undefined for it")
    return arr


def check_dimensions(dimensions: int) -> int:
    """Validate a store's ``dimensions`` argument."""
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
        raise ConfigurationError(f"dimensions must be a positive int, got {dimensions!r}")
    return dimensions


_INT64 = (-(2**63), 2**63 - 1)  # SQLite, PostgreSQL's jsonb comparisons and Qdrant use int64


def check_filter(filter: Mapping[str, Any] | None) -> dict[str, FilterValue]:
    """Validate a metadata filter: keys like identifiers, values str/int/float/bool (finite,
    integers within 64 bits).

    Raises:
        InvalidInputError: (also a ValueError) a key or value that no backend can match
            exactly; the message starts with "bad filter". A filter is often built from a
            model's tool arguments: a bad one is data the model can correct, not misuse.
    """
    if not filter:
        return {}
    if not isinstance(filter, Mapping):
        raise InvalidInputError(f"bad filter: expected a mapping, got {type(filter).__name__}")
    out: dict[str, FilterValue] = {}
    for key, value in filter.items():
        if not isinstance(key, str) or not _FILTER_KEY.fullmatch(key):
            raise InvalidInputError(
                f"bad filter: filter key {key!r} is not supported: use letters, digits, '_' or "
                "'-' (starting with a letter or '_', at most 64 characters)"
            )
        if not isinstance(value, str | int | float):
            raise InvalidInputError(
                f"bad filter: filter value for {key!r} must be a str, int, float or bool, "
                f"got {type(value).__name__}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInputError(
                f"bad filter: filter value for {key!r} must be finite, got {value!r}"
            )
        if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            raise InvalidInputError(
                f"bad filter: filter value for {key!r} is an integer beyond 64 bits ({value}); "
                "stores compare integers as 64-bit numbers"
            )
        if isinstance(value, str) and "\x00" in value:
            raise InvalidInputError(
                f"bad filter: filter value for {key!r} must not contain NUL characters"
            )
        out[key] = value
    return out


def value_matches(actual: Any, expected: FilterValue) -> bool:
    """JSON-style equality: bools only equal bools, numbers compare numerically, str exactly."""
    if isinstance(expected, bool):
        return isinstance(actual, bool) and actual is expected
    if isinstance(expected, int | float):
        return (
            isinstance(actual, int | float) and not isinstance(actual, bool) and actual == expected
        )
    return isinstance(actual, str) and actual == expected


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, FilterValue]) -> bool:
    """Whether ``metadata`` has every key of ``filter`` with an equal value."""
    return all(k in metadata and value_matches(metadata[k], v) for k, v in filter.items())


@dataclass(slots=True, frozen=True)
class SerializedEntry:
    """An upsert entry checked and serialized for a persistent store."""

    id: str
    vector: NDArray[np.float32]
    session: str | None
    text: str
    message: str  # the message as JSON (messages_to_json)
    metadata: str  # the metadata as JSON


def serialize_entries(
    entries: Sequence[UpsertEntry], dimensions: int, metric: Metric
) -> list[SerializedEntry]:
    """Check every entry (id, vector, session, JSON metadata) and serialize it, all before a
    store writes anything, so a bad entry leaves the store as it was.

    Raises:
        ConfigurationError: an empty id, a bad vector, or metadata that is not JSON data.
    """
    out = []
    for e in entries:
        if not isinstance(e.id, str) or not e.id:
            raise ConfigurationError(f"entry id must be a non-empty str, got {e.id!r}")
        vector = as_vector(e.vector, dimensions, what=f"vector of entry {e.id!r}", metric=metric)
        session = session_of(e.message.metadata)
        try:
            metadata = json.dumps(e.message.metadata, allow_nan=False)
            message = messages_to_json([e.message]).decode()
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"entry {e.id!r}: metadata must be JSON data: {exc}") from exc
        out.append(SerializedEntry(e.id, vector, session, e.message.text, message, metadata))
    return out


def split_session(filter: dict[str, FilterValue]) -> str | None:
    """Take the session name out of a checked ``filter`` and return it (None if it has none).

    Only a str ``session`` is a session name (a store's session column or partition); any
    other value stays in ``filter``, to be matched in the metadata like every other key.
    """
    session = filter.get(SESSION_KEY)
    if isinstance(session, str):
        del filter[SESSION_KEY]
        return session
    return None


def session_of(metadata: Mapping[str, Any]) -> str | None:
    """The session stored in ``metadata``, or None when it has no string session."""
    value = metadata.get(SESSION_KEY)
    if isinstance(value, str):
        if "\x00" in value:
            raise ConfigurationError("the session metadata value must not contain NUL characters")
        return value
    return None


def validate_identifier(name: str, *, what: str = "table name") -> str:
    """``name`` quoted for SQL, after checking it against ``[A-Za-z_][A-Za-z0-9_]{0,62}``.

    Raises:
        ConfigurationError: the name is not a plain identifier.
    """
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ConfigurationError(
            f"invalid {what} {name!r}: use letters, digits and '_', starting with a letter or "
            "'_', at most 63 characters"
        )
    return f'"{name}"'


def _json_path(key: str) -> str:
    return f'$."{key}"'  # keys are checked by check_filter: no quotes or dots inside


def filter_sql(
    filter: Mapping[str, FilterValue], *, alias: str = "t"
) -> tuple[list[str], list[Any]]:
    """SQL conditions on ``<alias>.metadata`` with JSON equality (bools are not numbers).

    Shared by every table that keeps metadata as JSON in one SQLite file (the vector store and
    the RAG keyword index). ``alias`` is a fixed table alias, never user input.
    """
    column = f"{alias}.metadata"
    conds: list[str] = []
    params: list[Any] = []
    for key, value in filter.items():
        path = _json_path(key)
        if isinstance(value, bool):
            conds.append(f"json_type({column}, ?) = ?")
            params += [path, "true" if value else "false"]
        elif isinstance(value, int | float):
            conds.append(
                f"json_type({column}, ?) IN ('integer', 'real') AND json_extract({column}, ?) = ?"
            )
            params += [path, path, value]
        else:
            conds.append(f"json_type({column}, ?) = 'text' AND json_extract({column}, ?) = ?")
            params += [path, path, value]
    return conds, params


def entries_version(rows: Sequence[tuple[str, str | bytes]]) -> str:
    """The version token of a set of ``(id, stored message)`` rows (``GuardedStore``): the
    SHA-256 of the rows sorted by id, so every store gives the same token for the same rows."""
    digest = hashlib.sha256()
    for id, message in sorted(rows, key=lambda row: row[0]):
        data = message.encode() if isinstance(message, str) else message
        digest.update(f"{len(id)}:{id}:{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()
