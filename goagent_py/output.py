"""Typed output: what a run's answer must be, how it is asked for, and how it is checked.

An ``output_type`` (a pydantic model, a dataclass, a TypedDict, ``list[...]``, a union, a
``Literal``; ``str`` is plain text) becomes an :class:`OutputSpec`: a JSON schema whose top level
is an object (other types are wrapped as ``{"response": ...}``, since tool arguments and most
vendors' structured output must be objects) and one pydantic ``TypeAdapter`` that validates.

The three modes (:data:`~goagent_py.provider.OutputMode`):

- ``"tool"``: the model gets a ``final_result`` tool whose parameters are the schema; calling it
  ends the run. Works wherever tools work; the default.
- ``"native"``: the schema travels on the request (:attr:`CompletionRequest.output`) and the
  provider enforces it (OpenAI ``response_format``, Ollama ``format``, Anthropic
  ``output_config``, a grammar on the embedded model).
- ``"prompted"``: the schema is written into the system prompt and the answer parsed as JSON.

A failed validation, or a :class:`~goagent_py.ModelRetry` from an output validator, goes back to
the model with what was wrong; after ``output_retries`` retries the run raises
:class:`~goagent_py.OutputValidationError`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from goagent_py import _deps
from goagent_py._cancel import stray
from goagent_py._describe import validation_errors
from goagent_py._frozen import freeze
from goagent_py._json_schema import check_schema
from goagent_py._json_text import loads
from goagent_py.errors import ConfigurationError, ModelRetry, OutputValidationError
from goagent_py.messages import INVALID_ARGUMENTS_KEY, Message, ToolCall
from goagent_py.provider import (
    CompletionRequest,
    OutputFormat,
    OutputMode,
    OutputSchemaLimits,
    Provider,
    StructuredOutputProvider,
)
from goagent_py.tools import ToolDefinition

__all__ = ["FINAL_RESULT_TOOL", "OutputContext", "OutputSpec", "OutputValidator", "Verdict"]

Out = TypeVar("Out")
D = TypeVar("D")

FINAL_RESULT_TOOL = "final_result"
"""The name of the tool the model calls with its answer in ``"tool"`` mode."""

OutputValidator = Callable[..., Any]
"""A function (sync or async) given the validated output, or an :class:`OutputContext` and the
output; it returns the output (possibly changed) or raises :class:`~goagent_py.ModelRetry` with
a message for the model."""


@dataclass(slots=True, frozen=True)
class OutputContext:
    """What an output validator that takes two arguments gets first.

    Attributes:
        deps: the run's ``deps`` (None when the run got none).
        retries: the retries the run has used so far (0 on the first answer).
    """

    deps: Any = None
    retries: int = 0

    def deps_as(self, kind: type[D]) -> D:
        """The run's deps, typed.

        Raises:
            TypeError: the run's deps are not a ``kind``.
        """
        return _deps.deps_as(self.deps, kind)


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


_MODES = ("tool", "native", "prompted")


def _schema_name(output_type: object) -> str:
    name = getattr(output_type, "__name__", "") or "output"
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "output"


@dataclass(slots=True, frozen=True)
class Verdict:
    """What the loop does with one assistant message of a typed run.

    Attributes:
        accepted: the output validated (``value`` is it) and the run ends.
        value: the validated output (when accepted).
        raw: the output as the model gave it (JSON text).
        feedback: what the model reads when it must try again ("" when accepted).
        call: the ``final_result`` call the verdict answers (tool mode), or None.
        cut_off: the output did not parse because it ended at the token limit.
        text: the accepted output as text when a validator changed it (the text itself for
            ``str``, else its JSON), None when ``raw`` still says it: the run's text is the
            answer it returns, not the one a validator replaced.
    """

    accepted: bool
    value: Any = None
    raw: str = ""
    feedback: str = ""
    call: ToolCall | None = None
    cut_off: bool = False
    text: str | None = None


class OutputSpec(Generic[Out]):
    """An output type made ready for a run: its schema, its validator, its mode.

    Args:
        output_type: the type ``result.output`` has (``str`` for plain text).
        mode: "tool", "native" or "prompted"; None picks the provider's default.
        retries: how many times an invalid output is sent back before the run fails.
        validators: functions run on the validated output, in order.

    Raises:
        ConfigurationError: pydantic cannot build a JSON schema for the type, or the mode is
            unknown.
    """

    def __init__(
        self,
        output_type: Any,
        *,
        mode: OutputMode | None = None,
        retries: int = 1,
        validators: Sequence[OutputValidator] = (),
    ) -> None:
        if mode is not None and mode not in _MODES:
            raise ConfigurationError(
                f"output_mode={mode!r}: expected one of {', '.join(map(repr, _MODES))} (or None "
                "for the provider's default)"
            )
        self.type = output_type
        self.mode = mode
        self.retries = retries
        self.validators = [(v, _takes_context(v)) for v in validators]
        self.is_text = output_type is str
        self.wrapped = False
        self.schema: dict[str, Any] = {}
        self.name = _schema_name(output_type)
        self._last_mode: tuple[Provider | None, object, OutputMode] | None = None
        if self.is_text:
            return
        from pydantic import TypeAdapter  # only typed runs pay for pydantic's import

        try:
            self._adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = self._adapter.json_schema()
        except Exception as exc:
            raise ConfigurationError(
                f"output_type={output_type!r} has no JSON schema ({exc}); use a pydantic model, "
                "a dataclass, a TypedDict, list[...], a union of them, a Literal, or str"
            ) from exc
        schema = _inline_root(schema)
        if schema.get("type") == "object":
            self.schema = schema
        else:
            defs = schema.pop("$defs", None)
            self.wrapped = True
            self.schema = {
                "type": "object",
                "properties": {"response": schema},
                "required": ["response"],
                **({"$defs": defs} if defs else {}),
            }
        check_schema(self.schema, what=f"the JSON schema of output_type={self.name}")
        # Sent in every run's request (a tool's parameters, the native format): frozen, so an
        # edit through one request cannot change the next run's (goagent_py/_frozen.py).
        self.schema = freeze(self.schema)
        self.description = schema.get("description", "") or f"The final {self.name} answer."

    # -- requests --------------------------------------------------------------------------

    def mode_for(self, provider: Provider | None) -> OutputMode:
        """The mode this run uses on ``provider``: the agent's, else the provider's default;
        a default ``"native"`` the provider cannot express for this schema becomes ``"tool"``.

        Raises:
            ConfigurationError: the agent asked for ``"native"`` and the provider cannot
                express the schema (the message names the field).
        """
        # Asked once per run: kept for the provider last asked about (and its default, should
        # it change). Two runtime-protocol isinstance checks were a third of a typed run's
        # time on Python 3.11 (they list the protocol's members anew on every call).
        default = getattr(provider, "default_output_mode", None)
        last = self._last_mode
        if last is not None and last[0] is provider and last[1] == default:
            return last[2]
        mode = self._mode_on(provider)
        self._last_mode = (provider, default, mode)
        return mode

    def _mode_on(self, provider: Provider | None) -> OutputMode:
        mode = self.mode
        if mode is None:
            mode = (
                provider.default_output_mode
                if isinstance(provider, StructuredOutputProvider)
                else "tool"
            )
        if mode != "native" or self.is_text or not isinstance(provider, OutputSchemaLimits):
            return mode
        problem = provider.native_output_problem(self.schema)
        if problem is None:
            return mode
        if self.mode is None:
            return "tool"  # the provider's default could not take it: the tool mode can
        raise ConfigurationError(
            f"output_mode='native': {type(provider).__name__} cannot express the schema of "
            f"output_type={self.name}: {problem}; use output_mode='tool' or 'prompted', or "
            "change the type"
        )

    def shape(self, request: CompletionRequest, mode: OutputMode) -> CompletionRequest:
        """``request`` asking for this output (a new tool, a schema, or a prompt)."""
        if self.is_text:
            return request
        if mode == "tool":
            definition = ToolDefinition(
                FINAL_RESULT_TOOL,
                f"Call this with your final answer; it ends the run. {self.description}",
                self.schema,
            )
            # The name is the output's: a server's tool of that name is left out (the agent
            # refuses its own when it is built, AgentOptions.output_spec), so the request never
            # holds two tools of one name and no call to it is taken for the answer.
            kept = [t for t in request.tools if t.name != FINAL_RESULT_TOOL]
            request.tools = [*kept, definition]
        elif mode == "native":
            request.output = OutputFormat(self.name, self.schema, self.description)
        else:
            request.system_prompt = _join(request.system_prompt, self.prompt())
        return request

    def prompt(self) -> str:
        """The instructions prompted mode adds to the system prompt."""
        return (
            "Answer with a single JSON object (no other text, no code fence) that follows this "
            f"JSON schema:\n{json.dumps(self.schema)}"
        )

    # -- answers ---------------------------------------------------------------------------

    def candidate(self, message: Message, mode: OutputMode) -> tuple[str, ToolCall | None] | None:
        """The raw output in ``message`` (JSON text, and the call it came in), or None when the
        message is not an answer yet (it calls other tools)."""
        if self.is_text or mode != "tool":
            return None if message.tool_calls else (message.text, None)
        for call in message.tool_calls:
            if call.name == FINAL_RESULT_TOOL:
                return self.arguments_text(call), call
        if message.tool_calls:
            return None
        return message.text, None

    @staticmethod
    def arguments_text(call: ToolCall) -> str:
        """The raw output a ``final_result`` call holds: its arguments as JSON text."""
        arguments = call.arguments
        if INVALID_ARGUMENTS_KEY in arguments:
            # JSON the provider could not parse comes as {INVALID_ARGUMENTS_KEY: text}: the
            # text is the answer, judged (and reported) as written. Dumped, the wrapper read
            # as an object missing every field ("name: Field required").
            return str(arguments[INVALID_ARGUMENTS_KEY])
        return json.dumps(arguments)

    def rejected(self, raw: str, call: ToolCall | None, why: str) -> Verdict:
        """The verdict on an output refused before it was validated (``why``, for the model)."""
        return Verdict(False, raw=raw, feedback=_feedback(why), call=call)

    async def judge(
        self,
        raw: str,
        call: ToolCall | None,
        mode: OutputMode,
        context: OutputContext | None = None,
        *,
        cut_off_at: int | None = None,
    ) -> Verdict:
        """Validate ``raw`` then run the validators (those taking two arguments get
        ``context``); a verdict either way. ``cut_off_at``: the answer ended at the token limit
        (that limit, 0 when unknown), which is what the model reads when it does not parse."""
        if self.is_text:
            value: Any = raw
        elif mode == "tool" and call is None:
            return Verdict(
                False,
                raw=raw,
                feedback=f"Call the {FINAL_RESULT_TOOL} tool with your final answer; plain "
                "text is not accepted.",
            )
        else:
            try:
                value = self.parse(raw)
            except ValueError as exc:
                if cut_off_at is None:
                    return Verdict(False, raw=raw, feedback=_feedback(str(exc)), call=call)
                # A grammar keeps each token valid JSON, not the JSON short enough to end.
                limit = f" (max_tokens={cut_off_at})" if cut_off_at else ""
                why = exc.reason if isinstance(exc, _NotJSON) else str(exc)
                feedback = (
                    f"Your answer was cut off at the token limit{limit} before it was "
                    f"complete ({why}). Answer again, shorter: keep every value brief."
                )
                return Verdict(False, raw=raw, feedback=feedback, call=call, cut_off=True)
        # What the output says before the validators (one may change it in place).
        before = self._text_of(value) if self.validators else None
        for validator, with_context in self.validators:
            try:
                value = (
                    validator(context or OutputContext(), value)
                    if with_context
                    else validator(value)
                )
                if inspect.isawaitable(value):
                    value = await value
            except ModelRetry as exc:
                return Verdict(False, raw=raw, feedback=_feedback(exc.message), call=call)
            except asyncio.CancelledError as exc:  # the validator's, or the run's
                if (error := stray(exc, "an output validator")) is None:
                    raise
                raise error from exc
        after = self._text_of(value) if self.validators else None
        text = after if after is not None and after != before else None
        return Verdict(True, value=value, raw=raw, call=call, text=text)

    def _text_of(self, value: Any) -> str | None:
        """``value`` as the run's text: a str as is, else its JSON (None when it has none)."""
        if self.is_text:
            return value if isinstance(value, str) else None
        from pydantic_core import PydanticSerializationError, to_json

        try:
            return to_json(value).decode()
        except (PydanticSerializationError, ValueError, TypeError):
            return None

    def parse(self, raw: str) -> Out:
        """The output ``raw`` (JSON text) holds, validated.

        Raises:
            ValueError: ``raw`` is not JSON, or not valid for the type (the message lists the
                errors the way the model reads them).
        """
        from pydantic import ValidationError

        data = _json_of(raw)
        if self.wrapped:
            if not isinstance(data, dict) or "response" not in data:
                raise ValueError('the output must be an object {"response": ...}')
            data = data["response"]
        try:
            return self._adapter.validate_python(data)  # type: ignore[no-any-return]
        except ValidationError as exc:
            # Where the model wrote it: a wrapped output's fields are under "response".
            under = ("response",) if self.wrapped else ()
            errors = validation_errors(exc.errors(include_url=False), "(root)", under=under)
            raise ValueError(errors) from None

    def partial(self, raw: str) -> Any:
        """What the JSON received so far (``raw``, possibly cut mid-value) validates to, or
        None while it validates to nothing yet."""
        from pydantic import ValidationError
        from pydantic_core import from_json

        start = raw.find("{")  # past a fence's opening line or a word before the object
        if start < 0:
            return None
        text = raw[start:] if start else raw
        try:
            data = from_json(text, allow_partial=True)
        except ValueError:
            return None
        if self.wrapped:
            if not isinstance(data, dict) or "response" not in data:
                return None
            data = data["response"]
        try:
            return self._adapter.validate_python(data, experimental_allow_partial=True)
        except ValidationError:
            return None

    def failed(self, verdict: Verdict, *, refused: bool = False) -> OutputValidationError:
        """The error a run ends with when ``verdict`` is its last try (``refused``: the
        model refused, which ends the run at its first try)."""
        return OutputValidationError(
            verdict.raw, verdict.feedback, self.retries, cut_off=verdict.cut_off, refused=refused
        )


def _inline_root(schema: dict[str, Any]) -> dict[str, Any]:
    """A recursive model's schema is a bare ``{"$ref": "#/$defs/Tree", "$defs": ...}``: inline
    the referred object, so it is not wrapped as ``{"response": ...}`` like a non-object."""
    ref = schema.get("$ref")
    defs = schema.get("$defs") or {}
    if not isinstance(ref, str) or not ref.startswith("#/$defs/") or len(schema) != 2:
        return schema
    target = defs.get(ref.removeprefix("#/$defs/"))
    if not isinstance(target, dict) or target.get("type") != "object":
        return schema
    return {**target, "$defs": defs}


_DECODER = json.JSONDecoder()
_TRIED_OBJECTS = 8
_QUOTED_CHARS = 120


def _json_of(raw: str) -> Any:
    """The JSON value ``raw`` holds: all of it, else the first JSON object inside it (models
    asked for JSON alone still wrap it in a code fence or a sentence; the object is the
    answer, so it is read rather than sent back as "not valid JSON at line 1 column 1").

    Raises:
        ValueError: no JSON object is in ``raw`` (the message quotes how it begins and says
            what to send instead).
    """
    try:
        return loads(raw)
    except json.JSONDecodeError as exc:
        first = exc
    start = raw.find("{")
    for _ in range(_TRIED_OBJECTS):
        if start < 0:
            break
        try:
            _, end = _DECODER.raw_decode(raw, start)
        except (json.JSONDecodeError, RecursionError):
            start = raw.find("{", start + 1)
            continue
        try:
            return loads(raw[start:end])  # again, for its lone surrogates
        except json.JSONDecodeError:
            break
    raise _NotJSON(first, raw)


class _NotJSON(ValueError):
    """No JSON object in the output; ``reason`` is the decoder's complaint alone (what an
    answer cut off at the token limit is told: the advice about extra text does not fit it)."""

    def __init__(self, error: json.JSONDecodeError, raw: str) -> None:
        self.reason = f"the output is not valid JSON ({error})"
        quoted = raw if len(raw) <= _QUOTED_CHARS else f"{raw[:_QUOTED_CHARS]}..."
        super().__init__(f"{self.reason}; it began {quoted!r}. Give one JSON object, nothing else")


def _feedback(errors: str) -> str:
    return f"Your answer was not accepted: {errors}. Fix it and answer again."


def _join(system_prompt: str, extra: str) -> str:
    return f"{system_prompt}\n\n{extra}" if system_prompt else extra
