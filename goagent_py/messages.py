"""Messages and content blocks: the data every other part of goagent-py exchanges.

Blocks and messages are cheap slotted dataclasses; one pydantic ``TypeAdapter`` turns any list of
messages into JSON and back (bytes travel as base64), so a conversation survives storage intact.
pydantic is imported (and the adapter built) on first use: importing goagent_py stays light.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from goagent_py.errors import ConfigurationError, InvalidMediaTypeError

__all__ = [
    "DOCUMENT_MEDIA_TYPES",
    "IMAGE_MEDIA_TYPES",
    "ContentBlock",
    "DocumentBlock",
    "ImageBlock",
    "Message",
    "Role",
    "ScoredMessage",
    "StopReason",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "Usage",
    "assistant_message",
    "build_codec",
    "messages_from_json",
    "messages_to_json",
    "text_from",
    "user_message",
]

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, TypeAdapter
    from pydantic_core import CoreSchema

IMAGE_MEDIA_TYPES: tuple[str, ...] = ("image/jpeg", "image/png", "image/gif", "image/webp")
DOCUMENT_MEDIA_TYPES: tuple[str, ...] = ("application/pdf", "text/plain")

# Bytes go over JSON as base64 (the default would be UTF-8 and break on binary data). A pydantic
# ConfigDict is a plain dict: no pydantic import needed to write one.
_BYTES_AS_BASE64: dict[str, Any] = {"ser_json_bytes": "base64", "val_json_bytes": "base64"}


class Role(enum.StrEnum):
    """Who a message of the conversation comes from.

    There is no system role (the system prompt travels on the request) and no document role
    (retrieved passages are search results, delimited data inside a user or tool message).
    """

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# Histories and indexes written before roles were narrowed may hold these; read them as user
# content (that is how two of the four providers sent them), never fail to load.
_LEGACY_ROLES = {"document": "user", "system": "user"}


def _legacy_role(value: Any) -> Any:
    return _LEGACY_ROLES.get(value, value) if isinstance(value, str) else value


class _LegacyRole:
    """``Annotated`` metadata: read legacy roles as user (pydantic's ``BeforeValidator``, without
    importing pydantic until a schema is built)."""

    @staticmethod
    def __get_pydantic_core_schema__(source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(_legacy_role, handler(source))


class _ByType:
    """``Annotated`` metadata: the union is discriminated by ``type`` (pydantic's
    ``Field(discriminator="type")``, without importing pydantic until a schema is built)."""

    @staticmethod
    def __get_pydantic_core_schema__(source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic import Field

        return handler.generate_schema(Annotated[source, Field(discriminator="type")])


class StopReason(enum.StrEnum):
    """Why the model stopped producing output."""

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    TOOL_USE = "tool_use"
    STOP_SEQUENCE = "stop_sequence"
    REFUSAL = "refusal"
    PAUSE_TURN = "pause_turn"
    ERROR = "error"
    ABORTED = "aborted"
    DEFERRED = "deferred"
    """The run stopped on tool calls that wait for decisions (``RunResult.pending``)."""


@dataclass(slots=True, frozen=True)
class TextBlock:
    """Plain text."""

    text: str
    type: Literal["text"] = field(default="text", init=False, repr=False)

    def __init__(self, text: str) -> None:
        # The dataclass's own signature, through the slots (see Usage.__init__).
        _TEXT_SLOTS[0](self, text)
        _TEXT_SLOTS[1](self, "text")


@dataclass(slots=True, frozen=True)
class ImageBlock:
    """An image as raw bytes; ``media_type`` is one of :data:`IMAGE_MEDIA_TYPES`."""

    __pydantic_config__ = _BYTES_AS_BASE64

    data: bytes
    media_type: str
    type: Literal["image"] = field(default="image", init=False, repr=False)

    def __post_init__(self) -> None:
        _check_bytes(self.data, "ImageBlock")
        if self.media_type not in IMAGE_MEDIA_TYPES:
            raise InvalidMediaTypeError("image", self.media_type, IMAGE_MEDIA_TYPES)

    def __repr__(self) -> str:
        return f"ImageBlock(media_type={self.media_type!r}, {len(self.data)} bytes)"


@dataclass(slots=True, frozen=True)
class DocumentBlock:
    """A document (PDF or plain text) as raw bytes, with an optional title."""

    __pydantic_config__ = _BYTES_AS_BASE64

    data: bytes
    media_type: str
    title: str = ""
    type: Literal["document"] = field(default="document", init=False, repr=False)

    def __post_init__(self) -> None:
        _check_bytes(self.data, "DocumentBlock")
        if self.media_type not in DOCUMENT_MEDIA_TYPES:
            raise InvalidMediaTypeError("document", self.media_type, DOCUMENT_MEDIA_TYPES)

    def __repr__(self) -> str:
        return (
            f"DocumentBlock(media_type={self.media_type!r}, title={self.title!r}, "
            f"{len(self.data)} bytes)"
        )


@dataclass(slots=True, frozen=True)
class ThinkingBlock:
    """The model's reasoning. ``signature`` is an opaque vendor token that must be echoed back.

    Redacted thinking (Anthropic) is ``thinking="[redacted]"`` with the encrypted data in
    ``signature``.
    """

    thinking: str
    signature: str = ""
    type: Literal["thinking"] = field(default="thinking", init=False, repr=False)


ContentBlock = Annotated[TextBlock | ImageBlock | DocumentBlock | ThinkingBlock, _ByType()]
"""Any content block; ``block.type`` tells which."""


def _check_bytes(data: object, what: str) -> None:
    if not isinstance(data, bytes):
        raise ConfigurationError(
            f"{what}.data must be bytes, got {type(data).__name__}; wrap it in bytes()"
        )


@dataclass(slots=True)
class _FactoryProbe:
    x: int = field(default_factory=int)


# What a dataclass's generated ``__init__`` takes as the default of a field with a default
# factory (shown as ``<factory>``): the hand-written constructors below keep the signature the
# dataclass would give them, default objects included.
_FACTORY: Any = _FactoryProbe.__init__.__defaults__[0]  # type: ignore[index]


INVALID_ARGUMENTS_KEY = "__invalid_arguments__"
"""Key of the arguments a provider gives a tool call whose JSON from the model is malformed.

``ToolCall(arguments={INVALID_ARGUMENTS_KEY: raw_text})``: the call still reaches the agent,
which runs no tool on it; the model reads an error result that quotes its text and asks for one
JSON object (``goagent_py._call_gates.checked_arguments``) instead of the run crashing. A
``prepare_arguments`` repair sees the call first and may mend it.
"""


@dataclass(slots=True, frozen=True)
class ToolCall:
    """A call the model asks for; ``id`` links it to its result."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def __init__(self, id: str, name: str, arguments: dict[str, Any] = _FACTORY) -> None:
        # The dataclass's own signature and defaults, set through the slots rather than the
        # frozen __init__'s object.__setattr__ per field: every provider answer with calls makes
        # them (issue 36; tests/test_records.py compares it with the generated one).
        _CALL_SLOTS[0](self, id)
        _CALL_SLOTS[1](self, name)
        _CALL_SLOTS[2](self, {} if arguments is _FACTORY else arguments)


@dataclass(slots=True, frozen=True)
class Usage:
    """Token counts of one or more model calls; ``a + b`` sums every field."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __init__(
        self,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
    ) -> None:
        # The dataclass's own signature, set through the slots rather than the frozen
        # __init__'s object.__setattr__ per field: every response and run makes one (issue 36).
        _USAGE_SLOTS[0](self, input_tokens)
        _USAGE_SLOTS[1](self, output_tokens)
        _USAGE_SLOTS[2](self, cache_creation_input_tokens)
        _USAGE_SLOTS[3](self, cache_read_input_tokens)

    def __add__(self, other: Usage) -> Usage:
        # Built through the slots, not the frozen __init__ (an object.__setattr__ call per
        # field): the loop sums usage after every model call (issue 36).
        out: Usage = _new(Usage)
        _USAGE_SLOTS[0](out, self.input_tokens + other.input_tokens)
        _USAGE_SLOTS[1](out, self.output_tokens + other.output_tokens)
        _USAGE_SLOTS[2](out, self.cache_creation_input_tokens + other.cache_creation_input_tokens)
        _USAGE_SLOTS[3](out, self.cache_read_input_tokens + other.cache_read_input_tokens)
        return out

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (cache tokens are part of the input)."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )


_new = object.__new__
_TEXT_SLOTS = (TextBlock.__dict__["text"].__set__, TextBlock.__dict__["type"].__set__)
_CALL_SLOTS = tuple(ToolCall.__dict__[name].__set__ for name in ("id", "name", "arguments"))
# The slot setters of Usage's fields, in order (what its frozen __init__ reaches by name).
_USAGE_SLOTS = tuple(
    Usage.__dict__[name].__set__
    for name in (
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    )
)


@dataclass(slots=True)
class Message:
    """One message of a conversation.

    Attributes:
        role: who it comes from.
        content: the content blocks.
        tool_calls: calls the assistant asks for (assistant messages only).
        tool_call_id: the call this message answers (tool messages only).
        is_error: on a tool message, whether the call failed.
        metadata: free data for stores and RAG; never sent to a provider.
    """

    role: Annotated[Role, _LegacyRole()]
    content: list[ContentBlock] = field(default_factory=list)
    _: KW_ONLY
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    is_error: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        role: Annotated[Role, _LegacyRole()],
        content: list[ContentBlock] = _FACTORY,
        *,
        tool_calls: list[ToolCall] = _FACTORY,
        tool_call_id: str = "",
        is_error: bool = False,
        metadata: dict[str, Any] = _FACTORY,
    ) -> None:
        # The dataclass's generated __init__, written out (tests/test_records.py compares the
        # two): fresh containers without a factory call each, and __post_init__ only when it has
        # something to do (a role given as a string, or a subclass's own) (issue 36).
        self.role = role
        self.content = [] if content is _FACTORY else content
        self.tool_calls = [] if tool_calls is _FACTORY else tool_calls
        self.tool_call_id = tool_call_id
        self.is_error = is_error
        self.metadata = {} if metadata is _FACTORY else metadata
        if type(role) is not Role or type(self) is not Message:
            self.__post_init__()

    def __post_init__(self) -> None:
        if type(self.role) is not Role:
            try:
                self.role = Role(self.role)
            except ValueError:
                raise ConfigurationError(
                    f"Message role {self.role!r}: use 'user', 'assistant' or 'tool'; the "
                    "system prompt is the agent's system_prompt (it travels on the request)"
                ) from None

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (thinking, images and documents are left out)."""
        return text_from(self.content)

    def has(self, block_type: str) -> bool:
        """Whether any content block is of ``block_type`` ("text", "image", ...)."""
        return any(block.type == block_type for block in self.content)


# The constructors written out above return ``None`` as the generated ones say it (an object, not
# the string ``from __future__ import annotations`` leaves): the same signature.
for _kind in (TextBlock, ToolCall, Usage, Message):
    _kind.__init__.__annotations__["return"] = None


@dataclass(slots=True, frozen=True)
class ScoredMessage:
    """A message found by a similarity search; higher ``score`` is better."""

    message: Message
    score: float
    id: str = ""


def text_from(blocks: list[ContentBlock]) -> str:
    """Join the non-empty text blocks of ``blocks`` with newlines."""
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock) and b.text)


def user_message(text: str) -> Message:
    """A user message with one text block."""
    return Message(Role.USER, [TextBlock(text)])


def assistant_message(text: str) -> Message:
    """An assistant message with one text block."""
    return Message(Role.ASSISTANT, [TextBlock(text)])


_ADAPTER: list[TypeAdapter[list[Message]]] = []


def _messages_adapter() -> TypeAdapter[list[Message]]:
    # Built on first use (pydantic's import and the schema cost ~100 ms); a race builds it twice,
    # harmlessly.
    if not _ADAPTER:
        from pydantic import TypeAdapter

        _ADAPTER.append(TypeAdapter(list[Message]))
    return _ADAPTER[0]


def build_codec() -> None:
    """Build the messages' JSON codec now rather than on first use.

    For processes that must not pause at first use: a Temporal worker's workflow tasks decode
    messages and must yield within 2 s (Temporal's deadlock check), which a cold build on a
    busy machine can exceed.
    """
    _messages_adapter()


def messages_to_json(messages: list[Message]) -> bytes:
    """Serialise messages to JSON (bytes as base64). Inverse of :func:`messages_from_json`."""
    try:
        return _plain_json(messages)
    except (_NotPlain, RecursionError):  # RecursionError: a cycle, which pydantic reports
        return _messages_adapter().dump_json(messages)


# json.dumps(..., ensure_ascii=False, separators=(",", ":")), built on first use (issue 36:
# dumps built a new encoder for every stored message).
_ENCODE: list[Callable[[Any], str]] = []


class _NotPlain(Exception):
    """Internal: a value the stdlib path does not write exactly as pydantic does."""


def _plain_json(messages: list[Message]) -> bytes:
    """The bytes pydantic's adapter writes, through the stdlib ``json`` module.

    Building the adapter costs ~100 ms, which a new process paid on its first stored message
    (issue 36). The usual message (our own blocks; str, int, bool, None, lists and dicts of them
    in arguments and metadata) is written here; anything else (a float written in exponent form,
    a tuple, a non-str key, a subclass) raises :class:`_NotPlain` and goes through pydantic, so
    the output is the same either way (entry ids hash it; a test compares the two).
    """
    out = [_plain_message(m) for m in messages]
    if not _ENCODE:
        from goagent_py._json_fast import fast_encoder

        _ENCODE.append(fast_encoder(ensure_ascii=False, separators=(",", ":")))
    text = _ENCODE[0](out)
    try:
        return text.encode()
    except UnicodeEncodeError:
        # A lone surrogate: a file name os.listdir() decoded with surrogateescape, in a tool's
        # result. It is written as U+FFFD, so the turn is stored (pydantic would refuse it).
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


def _plain_message(m: Message) -> dict[str, Any]:
    if type(m) is not Message or type(m.role) is not Role:
        raise _NotPlain
    return {
        "role": m.role.value,
        "content": [_plain_block(b) for b in _plain_list(m.content)],
        "tool_calls": [_plain_call(c) for c in _plain_list(m.tool_calls)],
        "tool_call_id": _plain_str(m.tool_call_id),
        "is_error": _plain_bool(m.is_error),
        "metadata": _plain_value(m.metadata),
    }


def _plain_block(b: object) -> dict[str, Any]:
    kind = type(b)
    if kind is TextBlock:
        return {"text": _plain_str(b.text), "type": "text"}  # type: ignore[attr-defined]
    if kind is ThinkingBlock:
        return {
            "thinking": _plain_str(b.thinking),  # type: ignore[attr-defined]
            "signature": _plain_str(b.signature),  # type: ignore[attr-defined]
            "type": "thinking",
        }
    if kind is ImageBlock or kind is DocumentBlock:
        import base64

        out = {
            "data": base64.urlsafe_b64encode(b.data).decode(),  # type: ignore[attr-defined]
            "media_type": _plain_str(b.media_type),  # type: ignore[attr-defined]
        }
        if kind is DocumentBlock:
            out["title"] = _plain_str(b.title)  # type: ignore[attr-defined]
        out["type"] = b.type  # type: ignore[attr-defined]
        return out
    raise _NotPlain


def _plain_call(c: object) -> dict[str, Any]:
    if type(c) is not ToolCall:
        raise _NotPlain
    return {
        "id": _plain_str(c.id),
        "name": _plain_str(c.name),
        "arguments": _plain_value(c.arguments),
    }


def _plain_list(value: object) -> list[Any]:
    if type(value) is not list:
        raise _NotPlain
    return value


def _plain_str(value: object) -> str:
    if type(value) is not str:
        raise _NotPlain
    return value


def _plain_bool(value: object) -> bool:
    if type(value) is not bool:
        raise _NotPlain
    return value


def _plain_value(value: Any) -> Any:
    """``value`` itself when it is JSON that both writers write alike; raises otherwise."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        # Python and pydantic agree on finite floats written without an exponent
        # (1e-07 against 1e-7); the others take the pydantic path.
        if value != value or value in (_INF, -_INF) or "e" in repr(value):
            raise _NotPlain
        return value
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain
            _plain_value(v)
        return value
    if kind is list:
        for v in value:
            _plain_value(v)
        return value
    raise _NotPlain


_INF = float("inf")


def messages_from_json(data: str | bytes) -> list[Message]:
    """Parse messages from JSON made by :func:`messages_to_json`.

    Only goagent-py's own types come out; unknown block types are rejected.
    """
    return _messages_adapter().validate_json(data)
