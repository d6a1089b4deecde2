"""An agent as a tool: the parent's model delegates a task to a child agent.

:func:`as_tool` wraps an :class:`~goagent_py.Agent` in a :class:`~goagent_py.tools.Tool`. When
the parent's model calls it, the child runs a whole run of its own (its own model, tools and
iteration budget) and its answer becomes the tool result::

    researcher = Agent(provider=p, name="researcher", tools=[search])
    lead = Agent(provider=p, tools=[as_tool(researcher, name="research",
                                            description="Research a topic in depth.")])
    result = await lead.run("Write a brief on solid-state batteries.")
    result.usage          # the lead's tokens and the researcher's

What crosses the boundary:

- **Usage**: the child's tokens are added to the parent run's ``RunResult.usage`` (through
  ``ToolContext.add_usage``), failed child runs included.
- **Events**: every event of the child run reaches the parent's stream and hooks as a
  :class:`~goagent_py.events.ToolExecutionUpdate` of the delegating call, whose ``update`` is
  the child's event; the child's event has ``path = parent path + (child name,)``, so a UI can
  tell nested agents apart (:func:`unwrap` yields the nested event).
- **Cancellation**: the child runs in the parent's tool task; cancelling or aborting the parent
  (``Session.abort``) cancels the child.
- **Failure**: a child that fails (``ProviderError``, ``MaxIterationsError``...) is an error
  result the parent's model reads (a ``ToolExecutionError`` whose ``__cause__`` is the child's
  error), not a crashed parent run.
- **Typed output**: a child with an ``output_type`` returns its validated output as JSON to the
  parent's model, and the object itself as the call's ``ToolResult.details`` (on the parent's
  ``ToolExecutionEnd`` event and ``on_tool_end`` hook), so the parent's code need not parse it.
- **Deps**: the parent run's ``deps`` are the child run's, unless ``deps=`` gives a function
  that makes the child's from the parent's (``deps=lambda parent: parent.db``).
- **History**: by default the child sees only the prompt its parent wrote. ``"last_user"``
  adds the parent's last user message; a function chooses from the parent's transcript.
  Thinking blocks never cross.
- **Approvals**: a child run that stops on calls waiting for decisions (docs/approvals.md)
  stops the parent run too (``ToolContext.wait_for``): the parent's ``result.pending`` lists
  them with ids under the delegating call (``"p1/k1"``), and the child's conversation is
  kept in the parent's record. Resuming the parent with those decisions resumes the child;
  its answer is the call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Generic, Literal, Protocol, Self, TypeVar

from goagent_py._cancel import failed
from goagent_py._conversation import HOLDING, conversation_key
from goagent_py._describe import described
from goagent_py._frozen import freeze
from goagent_py._json_schema import check_schema
from goagent_py._loop import Run
from goagent_py._prompt import to_messages
from goagent_py._recall import PROVENANCE_KEY
from goagent_py._record_hold import record_hold
from goagent_py._transcript import UI_ONLY_KEY, repair_transcript, strip_thinking, waiting_at
from goagent_py.approvals import Deny, pending_of
from goagent_py.errors import (
    ConfigurationError,
    InvalidInputError,
    ToolArgumentsError,
    ToolBlockedError,
    ToolError,
)
from goagent_py.events import AgentEvent, ToolExecutionUpdate
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    messages_from_json,
    messages_to_json,
)
from goagent_py.options import AgentOptions
from goagent_py.results import RunResult
from goagent_py.tool_context import ToolContext, ToolResume, current_tool_context
from goagent_py.tools import ToolDefinition, validate_tool_name

_DROPPED = (
    "the call that waited for this decision ended without one (interrupted); this call was not run"
)

__all__ = ["AgentTool", "ChildAgent", "HistoryMode", "as_tool", "unwrap"]

# The agents whose runs, started through ``as_tool``, lead to the running code: an agent that
# reaches itself again (a supervisor given itself, a tool that looks the agent up) is refused,
# or each level ran the next and the runs grew as max_iterations ** depth.
_RUNNING: ContextVar[tuple[object, ...]] = ContextVar("goagent_as_tool_running", default=())


class ChildAgent(Protocol):
    """What :class:`AgentTool` needs of the agent it wraps (an :class:`~goagent_py.Agent`).

    Defined here, below the agent, so the agent can offer :meth:`~goagent_py.Agent.as_tool`
    without this module importing it back (docs/architecture.md, "Layers").
    """

    def replace(self, *, max_iterations: int) -> Self: ...

    @property
    def options(self) -> AgentOptions: ...

    async def start_run(
        self,
        prompt: str | list[Message] | None,
        *,
        streaming: bool,
        history: list[Message] | None = None,
        path: tuple[str, ...] = (),
        deps: Any = None,
    ) -> Run: ...

    async def start_resume(
        self,
        decisions: Mapping[str, Any],
        *,
        streaming: bool,
        history: list[Message] | None = None,
        path: tuple[str, ...] = (),
        deps: Any = None,
        matched: bool = False,
    ) -> Run: ...


HistoryMode = Literal["none", "last_user"] | Callable[[list[Message]], Sequence[Message]]
"""What the child sees of its parent's conversation: nothing, the parent's last user message, or
what a function picks from the parent's transcript (any messages; the result is repaired into a
valid transcript and stripped of thinking blocks)."""

# Frozen: every tool made here holds this one schema (see goagent_py/_frozen.py).
_PROMPT_SCHEMA: dict[str, Any] = freeze(
    {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "description": "The task for the sub-agent, with every detail it needs.",
            }
        },
        "required": ["prompt"],
    }
)


def _default_returns(result: RunResult[Any]) -> str:
    output = result.output
    if output is None or isinstance(output, str):
        return result.text if output is None else output
    # A typed child: the parent's model reads its output as JSON (pydantic loads only here,
    # for typed runs, which have loaded it already).
    from pydantic_core import to_json

    return to_json(output).decode()


_A = TypeVar("_A", bound=ChildAgent)


class AgentTool(Generic[_A]):
    """A tool that runs a child agent (made by :func:`as_tool`; see the module docstring).

    Attributes:
        agent: the child agent (with ``max_iterations`` applied).
        name: the tool name, which is also the child's segment in event paths.
    """

    def __init__(
        self,
        agent: _A,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any] | None = None,
        prompt: Callable[[dict[str, Any]], str] | None = None,
        history: HistoryMode = "none",
        max_iterations: int | None = None,
        returns: Callable[[RunResult], str | list[ContentBlock]] = _default_returns,
        streaming: bool = False,
        deps: Callable[[Any], Any] | None = None,
    ) -> None:
        validate_tool_name(name)
        if not isinstance(description, str) or not description.strip():
            raise ConfigurationError(f"as_tool({name!r}) needs a description for the model")
        if parameters is not None and not isinstance(parameters, dict):
            raise ConfigurationError(
                f"as_tool({name!r}) parameters must be a JSON-schema dict, "
                f"got {type(parameters).__name__}"
            )
        if history not in ("none", "last_user") and not callable(history):
            raise ConfigurationError(
                f"as_tool({name!r}) history must be 'none', 'last_user' or a function, "
                f"got {history!r}"
            )
        if not callable(returns):
            raise ConfigurationError(f"as_tool({name!r}) returns must be a function")
        if deps is not None and not callable(deps):
            raise ConfigurationError(
                f"as_tool({name!r}) deps must be a function of the parent run's deps "
                f"(deps=lambda parent: ...), got {type(deps).__name__}"
            )
        if max_iterations is not None:
            agent = agent.replace(max_iterations=max_iterations)
        self.agent = agent
        self.name = name
        if parameters is not None:
            check_schema(parameters, what=f"as_tool({name!r}) parameters")
        self._definition = ToolDefinition(name, description, parameters or _PROMPT_SCHEMA)
        self._custom_schema = parameters is not None
        self._prompt = prompt
        self._history = history
        self._returns = returns
        self._streaming = streaming
        self._deps = deps
        # The waits in the child's own memory handed up to a parent run (token -> its run id):
        # a sibling call of that run leaves them alone (:meth:`_drop_orphaned_wait`).
        self._handed: dict[str, str] = {}

    @property
    def definition(self) -> ToolDefinition:
        """The definition shown to the parent's model."""
        return self._definition

    def _prompt_text(self, args: dict[str, Any]) -> str:
        if self._prompt is not None:
            return self._prompt(args)
        if not self._custom_schema or "prompt" in args:
            text = args.get("prompt")
            if not isinstance(text, str):
                raise ToolArgumentsError(self.name, "'prompt' must be a non-empty string")
            try:
                to_messages(text, "the call's prompt")  # the rule every run's prompt follows
            except InvalidInputError:
                raise ToolArgumentsError(self.name, "'prompt' must be a non-empty string") from None
            return text
        # A custom schema without a prompt field: the child reads the arguments as JSON.
        # (json, not pydantic: an agent imports this module, and a plain run loads no pydantic)
        return json.dumps(args, ensure_ascii=False, separators=(",", ":"))

    def _messages(self, transcript: list[Message], text: str) -> tuple[Any, list[Message] | None]:
        """The child's prompt and history from the parent's transcript. The prompt is the
        parent's model's text, not the user's: recorded so (``_user``)."""
        if self._history == "none":
            return [_user(text)], None
        if self._history == "last_user":
            for m in reversed(transcript):
                if m.role is Role.USER and not m.metadata.get(UI_ONLY_KEY):
                    first = strip_thinking([m])[0]
                    return [Message(Role.USER, list(first.content)), _user(text)], None
            return [_user(text)], None
        assert callable(self._history)
        # The assistant message that made this call has no results yet: leave it out.
        if transcript and transcript[-1].role is Role.ASSISTANT and transcript[-1].tool_calls:
            transcript = transcript[:-1]
        chosen = list(self._history(list(transcript)))
        return [_user(text)], repair_transcript(strip_thinking(chosen), "not shown to this agent")

    def child_deps(self, parent: Any) -> Any:
        """The child run's deps given the parent run's (``deps=`` applied, else as they are);
        an orchestration that runs the child as a node uses it too."""
        if self._deps is None:
            return parent
        try:
            return self._deps(parent)
        except (Exception, asyncio.CancelledError) as exc:
            if not failed(exc):  # the run's own cancellation (goagent_py/_cancel.py)
                raise
            # The developer's function failed, not the model's call: the parent run fails with
            # it (the loop raises a ConfigurationError a tool raised), never shown to the model.
            raise ConfigurationError(
                f"as_tool({self.name!r}) deps= raised {described(exc)}: fix the function that "
                "makes the child run's deps from the parent's"
            ) from exc

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Run the child agent with the call's prompt; its answer is the result.

        Raises:
            ToolArgumentsError: the arguments hold no usable prompt.
            GoAgentError: what the child run failed with (the dispatcher makes it an error
                result for the parent's model).
        """
        ctx = current_tool_context()
        path = (*ctx.path, self.name) if ctx is not None else (self.name,)
        running = _RUNNING.get()
        if any(agent is self.agent for agent in running):
            raise ToolBlockedError(
                self.name,
                f"it runs an agent that is already running in this chain ({' > '.join(path)}): "
                "an agent cannot call itself through as_tool; answer with what you have",
            )
        deps = self.child_deps(ctx.deps if ctx is not None else None)
        held = ctx.conversations if ctx is not None else HOLDING.get()
        memory = self.agent.options.short_term_memory
        if memory is not None and conversation_key(memory) in held:
            # The child would write its own turns into a record a parent run is writing (in
            # the middle of the parent's turn), and read the parent's conversation as its own.
            raise ConfigurationError(
                f"as_tool({self.name!r}): the sub-agent's short_term_memory keeps the "
                "conversation of a run it is part of (its parent's, or an ancestor's): give the "
                "sub-agent a memory of its own (its own storage or session id) or none (it "
                "then sees only the prompt its parent writes)"
            )
        holding = HOLDING.set(held)
        token = _RUNNING.set((*running, self.agent))
        try:
            # The child's own stored conversation, held for its run as any run holds it (two
            # calls of this tool at once would interleave their turns in its record): the
            # second is refused with SessionBusyError, an error result for the parent's model.
            hold = record_hold(memory)
            if hold is None:
                return await self._execute(ctx, args, path, deps)
            async with hold():
                return await self._execute(ctx, args, path, deps)
        finally:
            _RUNNING.reset(token)
            HOLDING.reset(holding)

    async def _execute(
        self, ctx: ToolContext | None, args: dict[str, Any], path: tuple[str, ...], deps: Any
    ) -> list[ContentBlock]:
        if ctx is not None and ctx.resumed is not None:
            # The parent's resume matched these decisions to its wait (by its token), and the
            # sub-agent's wait now is the one that wait listed.
            run = await self.agent.start_resume(
                ctx.resumed.decisions,
                streaming=self._streaming,
                history=self._kept(ctx.resumed),
                path=path,
                deps=deps,
                matched=True,
            )
        else:
            text = self._prompt_text(args)
            transcript = ctx.transcript() if ctx is not None else []
            prompt, history = self._messages(transcript, text)
            if history is None:
                await self._drop_orphaned_wait(ctx, path, deps)
            run = await self.agent.start_run(
                prompt, streaming=self._streaming, history=history, path=path, deps=deps
            )
        try:
            async with contextlib.aclosing(run.events()) as events:
                async for event in events:
                    if ctx is not None:
                        ctx.report(event)
        finally:
            if ctx is not None and run.result is not None:
                ctx.add_usage(run.result.usage)
        assert run.result is not None
        if run.result.stop_reason is StopReason.DEFERRED and run.result.pending:
            return self._wait(ctx, run)
        output = run.result.output
        if ctx is not None and output is not None and not isinstance(output, str):
            ctx.set_details(output)  # the parent's code gets the object, not only its JSON
        try:
            returned = self._returns(run.result)
        except (Exception, asyncio.CancelledError) as exc:  # the developer's, as deps= above
            if not failed(exc):
                raise
            raise ConfigurationError(
                f"as_tool({self.name!r}) returns= raised {described(exc)}: fix the function "
                "that makes the tool's result from the child run's"
            ) from exc
        if isinstance(returned, str):
            return [TextBlock(returned)]
        if isinstance(returned, list):
            return list(returned)
        raise ConfigurationError(
            f"as_tool({self.name!r}) returns must give a str or content blocks, "
            f"got {type(returned).__name__}"
        )

    async def _drop_orphaned_wait(
        self, ctx: ToolContext | None, path: tuple[str, ...], deps: Any
    ) -> None:
        """Close a wait the child's own memory still holds when a fresh call begins: only the
        parent's resume reaches it, so unless a call of the same parent run handed it up just
        now (a sibling in this batch), the parent's call that waited on it ended without one
        (a process died after the parent's claim, an abort came first) and, left open, it
        refused every later call of the child (review9c). Its calls are denied, not run."""
        memory = self.agent.options.short_term_memory
        if memory is None:
            return
        stored = await memory.messages()
        at = waiting_at(stored)
        if at < 0:
            return
        token, pending = pending_of(stored[at])
        if ctx is not None and self._handed.get(token) == ctx.run_id:
            return
        self._handed.pop(token, None)
        dropped = {p.id: Deny(_DROPPED, stop=True, token=token) for p in pending}
        run = await self.agent.start_resume(dropped, streaming=False, path=path, deps=deps)
        async with contextlib.aclosing(run.events()) as events:
            async for _ in events:
                pass

    def _wait(self, ctx: ToolContext | None, run: Run) -> list[ContentBlock]:
        """The child stopped on calls that wait: the parent's run waits for them too, keeping
        the child's conversation (unless the child keeps it in its own short-term memory)."""
        assert run.result is not None
        ids = [p.id for p in run.result.pending]
        if ctx is None or not ctx.can_wait:
            raise ToolError(
                f"the sub-agent {self.name!r} stopped for decisions on {ids}, and this run "
                "cannot wait for them (run the parent agent with agent.run or a Session)"
            )
        own_memory = run.o.short_term_memory is not None and run.given_history is None
        transcript = [*(run.given_history or []), *run.new_messages]
        if own_memory:
            for m in reversed(transcript):
                token = pending_of(m)[0]
                if token:
                    self._handed[token] = ctx.run_id
                    break
        kept = None if own_memory else json.loads(messages_to_json(transcript))
        ctx.wait_for(run.result.pending, {"messages": kept})
        return [TextBlock(f"[waiting for decisions on {', '.join(ids)}]")]

    def _kept(self, resumed: ToolResume) -> list[Message] | None:
        """The child's conversation kept by :meth:`_wait` (None: in the child's memory)."""
        state = resumed.state
        if not isinstance(state, dict) or "messages" not in state:
            raise ToolError(f"the record of the sub-agent {self.name!r} is not one it wrote")
        kept = state["messages"]
        return None if kept is None else messages_from_json(json.dumps(kept))

    def __repr__(self) -> str:
        return f"AgentTool({self.name!r})"


def _user(text: str) -> Message:
    """The child's prompt: written by the parent's model, so long-term memory records it as an
    agent's text (``goagent.provenance``), never as the user's own statement."""
    return Message(Role.USER, [TextBlock(text)], metadata={PROVENANCE_KEY: "assistant"})


def as_tool(
    agent: _A,
    *,
    name: str,
    description: str,
    parameters: dict[str, Any] | None = None,
    prompt: Callable[[dict[str, Any]], str] | None = None,
    history: HistoryMode = "none",
    max_iterations: int | None = None,
    returns: Callable[[RunResult], str | list[ContentBlock]] = _default_returns,
    streaming: bool = False,
    deps: Callable[[Any], Any] | None = None,
) -> AgentTool[_A]:
    """A tool that runs ``agent`` as a sub-agent (see the module docstring for what crosses).

    Args:
        agent: the child agent.
        name: the tool name (also the child's segment in event paths).
        description: what the parent's model reads about the child.
        parameters: the argument schema (default: one required string, ``prompt``).
        prompt: builds the child's prompt from the arguments (default: ``args["prompt"]``,
            or the arguments as JSON for a schema without ``prompt``).
        history: what the child sees of the parent's conversation (see :data:`HistoryMode`).
        max_iterations: the child's own iteration budget (default: the child agent's).
        returns: turns the child's :class:`RunResult` into the tool result (default: its text,
            or for a typed child its output as JSON).
        streaming: run the child streaming, so its text deltas reach the parent's events.
        deps: makes the child run's deps from the parent run's (default: the parent's deps,
            as they are).

    Raises:
        ConfigurationError: a bad name, an empty description or a bad option.
    """
    return AgentTool(
        agent,
        name=name,
        description=description,
        parameters=parameters,
        prompt=prompt,
        history=history,
        max_iterations=max_iterations,
        returns=returns,
        streaming=streaming,
        deps=deps,
    )


def unwrap(event: AgentEvent) -> Any:
    """The event itself, or, for a sub-agent's event forwarded by an :class:`AgentTool` (or an
    orchestration's, by ``Flow.as_tool``), the nested event (at any depth): ``event.path`` then
    tells where it came from.

    ::

        async for event in lead.stream("..."):
            e = unwrap(event)
            print("/".join(e.path) or "lead", type(e).__name__)
    """
    while isinstance(event, ToolExecutionUpdate) and isinstance(
        getattr(event.update, "path", None), tuple
    ):
        event = event.update  # a nested event (an agent's, or an orchestration node's)
    return event
