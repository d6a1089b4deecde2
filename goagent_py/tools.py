"""Tools: what the model can call.

A tool is anything with a :class:`ToolDefinition` and an async ``execute(args)`` that returns
content blocks. Most tools are written with :func:`tool`, which reads the schema from the
function's type hints and the descriptions from its Google-style docstring, and validates the
model's arguments with pydantic before the function runs.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import types
import typing
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Protocol,
    TypeVar,
    cast,
    get_type_hints,
    overload,
    runtime_checkable,
)

from goagent_py._describe import validation_errors
from goagent_py._frozen import FrozenDict, freeze
from goagent_py._json_schema import check_schema
from goagent_py._results import to_blocks
from goagent_py._workers import run_in_thread, run_named
from goagent_py.errors import ConfigurationError, ToolArgumentsError
from goagent_py.messages import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
)
from goagent_py.tool_context import current_tool_context

if TYPE_CHECKING:
    import pydantic

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
    """What the model is told about a tool: its name, description and JSON-schema parameters.

    The schema :func:`tool` generates from a signature is made once and shared by every
    request, so it is frozen: a ``dict`` (and ``list``) for every reader, JSON encoder and
    ``isinstance``, which refuses any change with ``TypeError``. To send a changed schema,
    change a copy (``copy.deepcopy(definition.parameters)`` is a plain, mutable one) and make a
    new definition from it (``dataclasses.replace``, or :func:`tool_func`). A schema given by
    hand (:func:`tool_func`, ``ToolDefinition(...)``) stays the caller's object.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


class _ToolCheck(type(Protocol)):  # type: ignore[misc]
    """The protocol's metaclass, with a fast ``isinstance`` for the tools this module makes.

    On Python 3.11 an ``isinstance`` against a runtime-checkable protocol lists the protocol's
    members anew on every call (~8 µs, half the cost of building an agent, which checks each
    tool); a :class:`FunctionTool` is a tool by construction.
    """

    def __instancecheck__(cls, instance: object) -> bool:
        if type(instance) is FunctionTool and cls is Tool:
            return True
        return super().__instancecheck__(instance)  # type: ignore[no-any-return]


@runtime_checkable
class Tool(Protocol, metaclass=_ToolCheck):
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


class FunctionTool:
    """A tool backed by a Python function (sync or async). Made by :func:`tool` and friends."""

    __slots__ = (
        "__weakref__",
        "_call",
        "_definition",
        "_description",
        "_name",
        "_schema",
        "_validator",
        "requires_approval",
    )

    def __init__(
        self,
        definition: ToolDefinition,
        call: Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]],
        validator: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        validate_tool_name(definition.name)
        self._name = definition.name
        self._description = definition.description
        self._definition: ToolDefinition | None = definition
        self._call = call
        self._validator = validator
        self._schema: _Schema | None = None
        self.requires_approval: bool | Callable[[dict[str, Any]], bool] = False

    @classmethod
    def _from_schema(
        cls,
        name: str,
        description: str,
        schema: _Schema,
        call: Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]],
    ) -> FunctionTool:
        # The definition (JSON schema) is built on first use, from the function's cached schema.
        self = cls.__new__(cls)
        self._name, self._description, self._definition = name, description, None
        self._call, self._validator, self._schema = call, None, schema
        self.requires_approval = False
        return self

    @property
    def definition(self) -> ToolDefinition:
        """The definition shown to the model."""
        definition = self._definition
        if definition is None:
            assert self._schema is not None
            # Frozen (when it is JSON), so shared: no copy here, none in the requests' records.
            parameters = self._schema.parameters(self._name)
            if type(parameters) is not FrozenDict:
                parameters = dict(parameters)
            definition = self._definition = ToolDefinition(
                self._name, self._description, parameters
            )
        return definition

    def validate_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` validated and coerced as the function will get them.

        Raises:
            ToolArgumentsError: the arguments do not fit the signature (the model reads why).
        """
        if self._schema is not None:
            return self._schema.validate(self._name, args)
        if self._validator is not None:
            return self._validator(args)
        return args

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Validate ``args`` (when the tool has a typed signature) and run the function."""
        if self._schema is not None:
            args = self._schema.validate(self._name, args)
        elif self._validator is not None:
            args = self._validator(args)
        return await self._call(args)

    def _execute_validated(self, args: dict[str, Any]) -> Awaitable[list[ContentBlock]]:
        """Run the function on what :meth:`validate_arguments` returned (the loop validated the
        call already, to show and approve it: one validation per call, issue 36)."""
        return self._call(args)

    def __repr__(self) -> str:
        return f"FunctionTool({self._name!r})"


# What most tools return: never awaitable, so no ``inspect.isawaitable`` for them (a few
# thousand instructions a call, issue 36).
_NEVER_AWAITABLE = frozenset((str, int, float, bool, bytes, type(None), list, dict, tuple))


class _Pending:
    """What a sync tool function returned from its worker thread when it was awaitable (it
    called an async helper without awaiting it): awaited on the event loop, then converted."""

    __slots__ = ("value",)

    def __init__(self, value: Awaitable[Any]) -> None:
        self.value = value


async def _settled(value: Any) -> Any:
    """``value``, awaited while it is awaitable: a tool function that returns a coroutine (a
    forgotten ``await``, a sync function calling an async helper) means its value, never the
    text ``"<coroutine object ...>"`` (and the coroutine never run)."""
    while inspect.isawaitable(value):
        value = await value
    return value


def _wrap(
    fn: Callable[..., Any], convert: Callable[[Any], list[ContentBlock]]
) -> Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]]:
    if inspect.iscoroutinefunction(fn):

        async def call_async(args: dict[str, Any]) -> list[ContentBlock]:
            value = await fn(args)
            if type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value):
                value = await _settled(value)
            return convert(value)

        return call_async

    label = getattr(fn, "__name__", "fn")

    def call_and_convert(args: dict[str, Any]) -> list[ContentBlock] | _Pending:
        value = fn(args)
        if type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value):
            return _Pending(value)
        return convert(value)

    async def call_sync(args: dict[str, Any]) -> list[ContentBlock]:
        out = await _in_worker(label, call_and_convert, args)
        if type(out) is _Pending:
            return convert(await _settled(out.value))
        return out  # type: ignore[return-value]

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

    Raises:
        ConfigurationError: ``parameters`` is not valid JSON Schema (the message names the
            path, e.g. ``properties.x.type: 'float' is not a JSON Schema type``).
    """
    params = _parameters(name, parameters)
    return FunctionTool(ToolDefinition(name, description, params), _wrap(fn, _as_text))


def tool_blocks_func(
    name: str,
    description: str,
    parameters: Mapping[str, Any] | None,
    fn: Callable[[dict[str, Any]], list[ContentBlock]]
    | Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]],
) -> Tool:
    """Like :func:`tool_func`, for functions that return content blocks (images, documents)."""
    params = _parameters(name, parameters)
    return FunctionTool(ToolDefinition(name, description, params), _wrap(fn, _as_blocks))


def _parameters(name: str, parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    if parameters is None:
        return {"type": "object", "properties": {}}
    check_schema(parameters, what=f"tool {name!r} parameters")
    return dict(parameters)


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
    import pydantic  # on first use: importing goagent_py stays light

    try:
        schema = pydantic.TypeAdapter(model).json_schema()
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


def _fields(fn: Callable[..., Any], arg_docs: dict[str, str]) -> list[_Field]:
    """The function's parameters as (name, annotation, default, description)."""
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise ConfigurationError(f"@tool cannot resolve the type hints of {fn!r}: {exc}") from exc
    fields: list[_Field] = []
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
        default = ... if param.default is param.empty else param.default
        fields.append((pname, hints.get(pname, Any), default, arg_docs.get(pname)))
    return fields


def _build_model(model_name: str, fields: list[_Field]) -> type[pydantic.BaseModel]:
    import pydantic  # on first use: importing goagent_py stays light

    definitions: dict[str, Any] = {
        name: (annotation, pydantic.Field(default=default, description=doc))
        for name, annotation, default, doc in fields
    }
    model = pydantic.create_model(
        model_name,
        __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **definitions,
    )
    return cast(type[pydantic.BaseModel], model)


def _model_parameters(model: type[pydantic.BaseModel], tool_name: str) -> dict[str, Any]:
    import pydantic

    try:
        parameters: dict[str, Any] = _strip_titles(model.model_json_schema())
    except pydantic.PydanticUserError as exc:
        raise ConfigurationError(f"@tool {tool_name!r}: cannot build a JSON schema: {exc}") from exc
    parameters.pop("additionalProperties", None)
    parameters.setdefault("properties", {})
    return parameters


# The common signatures (str, int, float, bool, their Optional, Any; JSON-plain defaults) are
# validated and described without pydantic, exactly as pydantic would: a first answer then needs
# neither pydantic's import (~60 ms) nor a model (~2 ms). Anything else, and any argument that is
# not already of its exact type (coercion, errors), goes to the pydantic model, built on demand.
_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_NONE = type(None)
_REQUIRED: Any = ...
# Names pydantic treats apart (private attributes, its namespace, BaseModel's attributes): such
# a signature is left to pydantic, with its errors and warnings at decoration time.
_PYDANTIC_NAMES = frozenset(
    (
        "construct",
        "copy",
        "dict",
        "from_orm",
        "json",
        "parse_file",
        "parse_obj",
        "parse_raw",
        "schema",
        "schema_json",
        "update_forward_refs",
        "validate",
    )
)
_PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

_Field = tuple[str, Any, Any, "str | None"]
# Per parameter: name, the exact types accepted as they are (None: anything), the default.
_FastField = tuple[str, "frozenset[type] | None", Any]


def _json_type(annotation: Any) -> bool:
    # isinstance first: an annotation need not be hashable (Annotated metadata).
    return isinstance(annotation, type) and annotation in _JSON_TYPES


def _plain_default(value: object) -> bool:
    kind = type(value)
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    return value is _REQUIRED or kind in (str, int, bool, _NONE)


def _fast_field(name: str, annotation: Any, default: Any) -> _FastField | None:
    if not _PLAIN_NAME.match(name) or name.startswith("model_") or name in _PYDANTIC_NAMES:
        return None
    if not _plain_default(default):
        return None
    if annotation is Any:
        return (name, None, default)
    if _json_type(annotation):
        return (name, frozenset((annotation,)), default)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        inner = [a for a in args if a is not _NONE]
        if len(args) == 2 and len(inner) == 1 and _json_type(inner[0]):
            return (name, frozenset((inner[0], _NONE)), default)
    return None


def _fast_property(annotation: Any, default: Any, doc: str | None) -> dict[str, Any]:
    # Keys in pydantic's (sorted) order.
    prop: dict[str, Any] = {}
    if annotation is not Any and not _json_type(annotation):  # X | None
        inner = next(a for a in typing.get_args(annotation) if a is not _NONE)
        prop["anyOf"] = [{"type": _JSON_TYPES[inner]}, {"type": "null"}]
    if default is not _REQUIRED:
        prop["default"] = default
    if doc is not None:
        prop["description"] = doc
    if _json_type(annotation):
        prop["type"] = _JSON_TYPES[annotation]
    return prop


class _Schema:
    """What a function's signature costs to analyse, done once per function object and shared
    by every tool made from it: the docstring summary, the argument model (validation) and, on
    first use, the JSON schema. It holds no reference to the function (the cache's weak key)."""

    __slots__ = (
        "_fast",
        "_fields",
        "_model",
        "_model_name",
        "_parameters",
        "call",
        "field_names",
        "stamp",
        "summary",
        "tools",
    )

    def __init__(self, fn: Callable[..., Any], stamp: tuple[object, ...]) -> None:
        self.summary, arg_docs = parse_docstring(fn.__doc__)
        fields = _fields(fn, arg_docs)
        self._model_name = f"{fn.__name__}_arguments"
        self._fields = fields
        self.stamp = stamp
        self._parameters: dict[str, Any] | None = None
        self._model: type[pydantic.BaseModel] | None = None
        fast = [_fast_field(name, annotation, default) for name, annotation, default, _ in fields]
        self._fast: tuple[_FastField, ...] | None = None
        if all(f is not None for f in fast):
            self._fast = tuple(cast(list[_FastField], fast))
            self.field_names = tuple(name for name, *_ in fields)
        else:  # pydantic's own analysis, now: its errors belong to the decoration
            self.field_names = tuple(self.model.model_fields)
        # The tools made from a plain function, by (name, description): tool(f) twice gives the
        # same (immutable) tool while the first one lives.
        self.tools: dict[tuple[str, str | None], weakref.ref[FunctionTool]] = {}
        # A plain function's call wrapper, made once (a bound method gets one per tool).
        self.call: Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]] | None = None

    @property
    def model(self) -> type[pydantic.BaseModel]:
        """The pydantic model of the arguments (built on first use)."""
        model = self._model
        if model is None:
            model = self._model = _build_model(self._model_name, self._fields)
        return model

    def parameters(self, tool_name: str) -> dict[str, Any]:
        """The JSON schema of the arguments (built on first use, then shared: frozen, see
        :mod:`goagent_py._frozen`, unless it holds a value that is not JSON)."""
        parameters = self._parameters
        if parameters is None:
            if self._fast is not None:
                properties = {name: _fast_property(a, d, doc) for name, a, d, doc in self._fields}
                parameters = {"properties": properties}
                required = [name for name, _, d, _ in self._fields if d is _REQUIRED]
                if required:
                    parameters["required"] = required
                parameters["type"] = "object"
            else:
                parameters = _model_parameters(self.model, tool_name)
            parameters = self._parameters = freeze(parameters)
        return parameters

    def validate(self, tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
        """The model's arguments validated and coerced, as keyword arguments for the function."""
        fast = self._fast
        if fast is not None and type(args) is dict:
            out: dict[str, Any] = {}
            given = 0
            for name, accepted, default in fast:
                if name in args:
                    value = args[name]
                    if accepted is not None and type(value) not in accepted:
                        break
                    out[name] = value
                    given += 1
                elif default is _REQUIRED:
                    break
                else:
                    out[name] = default
            else:
                if given == len(args):
                    return out
        import pydantic

        try:
            validated = self.model.model_validate(args)
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(tool_name, _format_validation_error(exc)) from exc
        return {k: getattr(validated, k) for k in self.field_names}


# Schemas by function object (weak keys: a function that goes away takes its entry along). Bound
# methods are keyed on their function, in a table of their own (their signature has no self).
_SCHEMAS: weakref.WeakKeyDictionary[Callable[..., Any], _Schema] = weakref.WeakKeyDictionary()
_BOUND_SCHEMAS: weakref.WeakKeyDictionary[Callable[..., Any], _Schema] = weakref.WeakKeyDictionary()
_SCHEMAS_LOCK = threading.Lock()


def _schema_for(fn: Callable[..., Any]) -> _Schema:
    if isinstance(fn, types.FunctionType):
        target, cache = fn, _SCHEMAS
    elif isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        target, cache = fn.__func__, _BOUND_SCHEMAS
    else:  # callable objects, partials, builtins: analysed every time
        return _Schema(fn, ())
    schema = cache.get(target)
    # What the schema is made of; if any is replaced after the first analysis, analyse again.
    if schema is not None:
        doc, defaults, kwdefaults, annotations = schema.stamp
        if (
            target.__doc__ is doc
            and target.__defaults__ is defaults
            and target.__kwdefaults__ is kwdefaults
            and target.__annotations__ is annotations
        ):
            return schema
    stamp = (target.__doc__, target.__defaults__, target.__kwdefaults__, target.__annotations__)
    schema = _Schema(fn, stamp)
    with _SCHEMAS_LOCK:
        cache[target] = schema
    return schema


def _format_validation_error(exc: pydantic.ValidationError) -> str:
    return validation_errors(exc.errors(include_url=False), "(arguments)")


async def _in_worker(label: str, fn: Callable[..., T], /, *args: Any) -> T:
    """Run a sync tool in a worker thread; if the call is abandoned (an abort, a cancel, a
    timeout) the thread runs on, so the call's context says so (``ctx.cancelled``)."""
    try:
        return await run_named(label, fn, *args)
    except asyncio.CancelledError:
        ctx = current_tool_context()
        if ctx is not None:
            ctx.cancel_event.set()
        raise


def _call_to_blocks(fn: Callable[..., Any], args: dict[str, Any]) -> list[ContentBlock] | _Pending:
    # In the worker thread: the result is serialised there too, under the call's timeout.
    value = fn(**args)
    if type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value):
        return _Pending(value)  # awaited on the event loop, where it belongs
    return to_blocks(value)


def _typed_call(
    fn: Callable[..., Any],
) -> Callable[[dict[str, Any]], Awaitable[list[ContentBlock]]]:
    if inspect.iscoroutinefunction(fn):

        async def call_async(args: dict[str, Any]) -> list[ContentBlock]:
            value = await fn(**args)
            if type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value):
                value = await _settled(value)
            return to_blocks(value)

        return call_async

    label = getattr(fn, "__name__", "fn")

    async def call_sync(args: dict[str, Any]) -> list[ContentBlock]:
        out = await _in_worker(label, _call_to_blocks, fn, args)
        if type(out) is _Pending:
            return to_blocks(await _settled(out.value))
        return out  # type: ignore[return-value]

    return call_sync


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
) -> FunctionTool:
    if not callable(fn):
        raise ConfigurationError(f"@tool needs a function, got {fn!r}")
    if not (isinstance(requires_approval, bool) or callable(requires_approval)):
        raise ConfigurationError(
            f"@tool(requires_approval={requires_approval!r}): use True, False or a function "
            "of the validated arguments that returns True when a person must decide"
        )
    tool_name = validate_tool_name(name or fn.__name__)
    schema = _schema_for(fn)
    # A tool that waits for approval is its own object: the shared one stays as it was.
    shared = isinstance(fn, types.FunctionType) and requires_approval is False
    key = (tool_name, description)
    if shared:
        ref = schema.tools.get(key)
        existing = ref() if ref is not None else None
        if existing is not None:
            return existing
    call = schema.call if shared else None
    if call is None:
        call = _typed_call(fn)
        if shared:
            schema.call = call
    made = FunctionTool._from_schema(
        tool_name, description or schema.summary or tool_name, schema, call
    )
    if shared:
        schema.tools[key] = weakref.ref(made)
    made.requires_approval = requires_approval
    return made


def _name_of(tool: Tool) -> str:
    """A tool's name, without building a function tool's definition (its JSON schema): an
    agent needs only the names when it is made."""
    return tool._name if type(tool) is FunctionTool else tool.definition.name


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
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
        requires_approval: True, or a function of the validated arguments returning True,
            when a person must decide before a call runs: the run stops with the call in
            ``result.pending`` (docs/approvals.md).

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
        return _make_tool(fn, name, description, requires_approval)

    def decorate(f: Callable[..., Any]) -> FunctionTool:
        return _make_tool(f, name, description, requires_approval)

    return decorate
