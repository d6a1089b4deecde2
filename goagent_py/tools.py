"""Tools: what the model can call.

A tool is anything with a :class:`ToolDefinition` and an async ``execute(args)`` that returns
content blocks. Most tools are written with :func:`tool`, which reads the schema from the
function's type hints and the descriptions from its Google-style docstring, and validates the
model's arguments with pydantic before the function runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast, get_type_hints, overload, runtime_checkable

import pydantic
from pydantic import TypeAdapter
from pydantic_core import to_json

from goagent_py.errors import ConfigurationError, ToolArgumentsError
from goagent_py.messages import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
)

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolDefinition",
    "run_in_thread",
    "schema_from",
    "tool",
    "tool_blocks_func",
    "tool_func",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BLOCK_TYPES = (TextBlock, ImageBlock, DocumentBlock, ThinkingBlock)

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class ToolDefinition:
    """What the model is told about a tool: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@runtime_checkable
class Tool(Protocol):
    """Something the model can call. Implement this for tools that need more than :func:`tool`."""

    @property
    def definition(self) -> ToolDefinition:
        """The name, description and parameter schema shown to the model."""
        ...

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Run the tool with the model's arguments and return its result."""
        ...


def validate_tool_name(name: str) -> str:
    """Check a tool name against what every vendor accepts (``[A-Za-z0-9_-]{1,64}``)."""
    if not _NAME_RE.match(name):
        raise ConfigurationError(
            f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-' "
            "(the character set every provider accepts)"
        )
    return name


async def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run blocking ``fn`` in a daemon thread and await its result.

    Unlike ``asyncio.to_thread`` the thread is a daemon: a sync tool that hangs past its timeout is
    abandoned without blocking interpreter exit, and never occupies a shared pool slot.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))

    def deliver(result: T | None, error: BaseException | None) -> None:
        # An abandoned call (timed out) may finish after its event loop closed: drop it.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    def worker() -> None:
        try:
            result = ctx.run(fn, *args, **kwargs)
        except BaseException as exc:  # handed to the awaiting task, which decides
            deliver(None, exc)
        else:
            deliver(result, None)

    threading.Thread(
        target=worker, name=f"goagent-tool-{getattr(fn, '__name__', 'fn')}", daemon=True
    ).start()
    return await future


def to_blocks(value: object) -> list[ContentBlock]:
    """Turn what a tool function returned into content blocks.

    ``str`` becomes one text block, a block or a list of blocks passes through, and anything
    else is serialised to JSON text with pydantic (dicts, lists, dataclasses, models).
    """
    if isinstance(value, str):
        return [TextBlock(value)]
    if isinstance(value, _BLOCK_TYPES):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, _BLOCK_TYPES) for v in value):
        return list(value)
    if value is None:
        return [TextBlock("")]
    return [TextBlock(to_json(value, fallback=str).decode())]


class FunctionTool:
    """A tool backed by a Python function (sync or async). Made by :func:`tool` and friends."""

    __slots__ = ("_call", "_definition", "_validator")

    def __init__(
        self,
        definition: ToolDefinition,
        call: Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]],
        validator: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        validate_tool_name(definition.name)
        self._definition = definition
        self._call = call
        self._validator = validator

    @property
    def definition(self) -> ToolDefinition:
        """The definition shown to the model."""
        return self._definition

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Validate ``args`` (when the tool has a typed signature) and run the function."""
        if self._validator is not None:
            args = self._validator(args)
        return await self._call(args)

    def __repr__(self) -> str:
        return f"FunctionTool({self._definition.name!r})"


def _wrap(
    fn: Callable[..., Any], convert: Callable[[Any], list[ContentBlock]]
) -> Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]]:
    if inspect.iscoroutinefunction(fn):

        async def call_async(args: dict[str, Any]) -> list[ContentBlock]:
            return convert(await fn(args))

        return call_async

    async def call_sync(args: dict[str, Any]) -> list[ContentBlock]:
        return convert(await run_in_thread(fn, args))

    return call_sync


def _as_text(value: object) -> list[ContentBlock]:
    if not isinstance(value, str):
        raise ConfigurationError(f"tool function must return str, got {type(value).__name__}")
    return [TextBlock(value)]


def _as_blocks(value: object) -> list[ContentBlock]:
    if not isinstance(value, list) or not all(isinstance(v, _BLOCK_TYPES) for v in value):
        raise ConfigurationError("tool function must return a list of content blocks")
    return list(value)


def tool_func(
    name: str,
    description: str,
    parameters: Mapping[str, Any] | None,
    fn: Callable[[dict[str, Any]], str] | Callable[[dict[str, Any]], Awaitable[str]],
) -> Tool:
    """A tool from a function that takes the raw argument dict and returns text.

    ``fn`` may be sync (it runs in a worker thread) or async. ``parameters`` is a JSON schema,
    given as is to the model; ``None`` means an object with no properties.
    """
    params = dict(parameters) if parameters is not None else {"type": "object", "properties": {}}
    return FunctionTool(ToolDefinition(name, description, params), _wrap(fn, _as_text))


def tool_blocks_func(
    name: str,
    description: str,
    parameters: Mapping[str, Any] | None,
    fn: Callable[[dict[str, Any]], list[ContentBlock]]
    | Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]],
) -> Tool:
    """Like :func:`tool_func`, for functions that return content blocks (images, documents)."""
    params = dict(parameters) if parameters is not None else {"type": "object", "properties": {}}
    return FunctionTool(ToolDefinition(name, description, params), _wrap(fn, _as_blocks))


# ---------------------------------------------------------------------------------------------
# Schemas


def _strip_titles(schema: Any) -> Any:
    """Remove pydantic's generated "title" keywords (not properties that happen to be named so)."""
    if isinstance(schema, list):
        return [_strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
            value, dict
        ):
            out[key] = {k: _strip_titles(v) for k, v in value.items()}
        elif key in ("default", "enum", "const", "examples", "required"):
            out[key] = value
        else:
            out[key] = _strip_titles(value)
    return out


def schema_from(model: type[Any] | None) -> dict[str, Any]:
    """The JSON schema of a pydantic model, dataclass or TypedDict, as tools declare parameters.

    ``None`` gives ``{"type": "object", "properties": {}}``. The schema always has
    ``"type": "object"``; generated titles are removed.
    """
    if model is None:
        return {"type": "object", "properties": {}}
    try:
        schema = TypeAdapter(model).json_schema()
    except pydantic.PydanticUserError as exc:
        raise ConfigurationError(f"cannot build a JSON schema from {model!r}: {exc}") from exc
    schema = _strip_titles(schema)
    if schema.get("type") != "object":
        raise ConfigurationError(
            f"schema_from({model!r}) must describe an object (a pydantic model, dataclass or "
            f"TypedDict), got type {schema.get('type')!r}"
        )
    schema.setdefault("properties", {})
    return cast(dict[str, Any], schema)


_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Todo|Warnings?)\s*:\s*$"
)
_ARG_RE = re.compile(r"^(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and the per-argument descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        match = _SECTION_RE.match(stripped)
        if match and not line.startswith((" ", "\t")):
            section = match.group(1).lower()
            current, arg_indent = None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in ("args", "arguments", "parameters", "params") or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        arg = _ARG_RE.match(stripped)
        if arg and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = arg.group(1).lstrip("*")
            args[current] = arg.group(3).strip()
        elif current is not None:
            args[current] = f"{args[current]} {stripped}".strip()
    text = "\n".join(description).strip()
    return text, args


def _build_model(fn: Callable[..., Any], arg_docs: dict[str, str]) -> type[pydantic.BaseModel]:
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise ConfigurationError(f"@tool cannot resolve the type hints of {fn!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    for pname, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(
                f"@tool function {fn.__name__!r} cannot take *{pname}: the model needs named "
                "parameters; declare each argument explicitly"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ConfigurationError(
                f"@tool function {fn.__name__!r}: parameter {pname!r} is positional-only; "
                "tools are called with keyword arguments"
            )
        annotation = hints.get(pname, Any)
        default = ... if param.default is param.empty else param.default
        info = pydantic.Field(default=default, description=arg_docs.get(pname))
        fields[pname] = (annotation, info)
    model = pydantic.create_model(
        f"{fn.__name__}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )
    return cast(type[pydantic.BaseModel], model)


def _format_validation_error(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _make_tool(fn: Callable[..., Any], name: str | None, description: str | None) -> FunctionTool:
    if not callable(fn):
        raise ConfigurationError(f"@tool needs a function, got {fn!r}")
    summary, arg_docs = parse_docstring(fn.__doc__)
    tool_name = validate_tool_name(name or fn.__name__)
    model = _build_model(fn, arg_docs)
    try:
        parameters = _strip_titles(model.model_json_schema())
    except pydantic.PydanticUserError as exc:
        raise ConfigurationError(f"@tool {tool_name!r}: cannot build a JSON schema: {exc}") from exc
    parameters.pop("additionalProperties", None)
    parameters.setdefault("properties", {})
    field_names = list(model.model_fields)

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        try:
            validated = model.model_validate(args)
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(tool_name, _format_validation_error(exc)) from exc
        return {k: getattr(validated, k) for k in field_names}

    if inspect.iscoroutinefunction(fn):

        async def call(args: dict[str, Any]) -> list[ContentBlock]:
            return to_blocks(await fn(**args))

    else:

        async def call(args: dict[str, Any]) -> list[ContentBlock]:
            return to_blocks(await run_in_thread(fn, **args))

    definition = ToolDefinition(tool_name, description or summary or tool_name, parameters)
    return FunctionTool(definition, call, validate)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a typed function, sync or async.

    The parameter schema comes from the type hints (through pydantic), the description from the
    docstring's first paragraphs and each parameter's description from its ``Args:`` section.
    The model's arguments are validated and coerced before the call; invalid arguments become an
    error the model reads. Sync functions run in a worker thread.

    Args:
        fn: the function (when used as ``@tool``).
        name: the tool's name; defaults to the function's name.
        description: overrides the docstring's description.

    Example:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.
        ...
        ...     Args:
        ...         a: the first addend.
        ...         b: the second addend.
        ...     '''
        ...     return a + b
    """
    if fn is not None:
        return _make_tool(fn, name, description)

    def decorate(f: Callable[..., Any]) -> FunctionTool:
        return _make_tool(f, name, description)

    return decorate
