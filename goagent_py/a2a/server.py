"""An agent as an A2A server: the agent card at ``/.well-known/agent-card.json`` and JSON-RPC
(``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``, and their 0.3 names
``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``) on the official SDK's
request handler and routes::

    app = a2a_app(agent, url="http://127.0.0.1:9000")   # an ASGI app
    uvicorn.run(app, port=9000)                          # or: await run_a2a(agent, port=9000)

Each A2A context is one conversation (a :class:`~goagent_py.Session`), so a follow-up in the
same context sees what came before; each message starts a task that runs the agent. A client's
CancelTask aborts the run (``session.abort("now")``): the partial answer is kept and the task
ends CANCELED. How events, parts and states map is in :mod:`goagent_py.a2a._mapping`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from goagent_py._conversation import ConversationOwners
from goagent_py._http_guard import OriginGuard
from goagent_py.a2a._guard import JsonRpcGuard
from goagent_py.a2a._mapping import (
    ANSWER_ARTIFACT,
    agent_card,
    answer_parts,
    blocks_of,
    busy_error,
    progress_note,
)
from goagent_py.a2a._sdk import require
from goagent_py.a2a._sent import Sent, SentMessages
from goagent_py.a2a._store import bounded_task_store
from goagent_py.agent import Agent
from goagent_py.approvals import REPLY_HINT, Deny, reply_decision
from goagent_py.errors import ConfigurationError, SessionBusyError
from goagent_py.events import AgentEnd, MessageDelta
from goagent_py.memory._clients import (
    ClientAgent,
    ClientLedger,
    check_forget_after,
    client_agent,
    client_key,
    clients_stored,
    forget_client,
    recall_key,
    sweeping,
    unkeyable,
)
from goagent_py.messages import ContentBlock, StopReason, TextBlock
from goagent_py.results import PendingCall, RunResult
from goagent_py.session import Session

__all__ = ["a2a_app", "run_a2a"]

AgentFactory = Callable[[str], Agent | Awaitable[Agent]]
"""Builds the agent of one A2A context (its id given): e.g. one with its own stored memory."""

# How long a CancelTask waits for the aborted run to wind down before the SDK cancels it.
_CANCEL_GRACE = 10.0
_LOG = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class _Running:
    """A task whose run is in progress: what CancelTask needs to stop it (the session once
    the run has one)."""

    session: Session | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_requested: bool = False


@dataclass(slots=True, eq=False)
class _Claim:
    """A message being answered: a copy of it (the same context and message id) waits for
    ``settled`` and is then answered from its record."""

    key: tuple[str, str]  # the context id and the message id
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    taken: bool = False  # a task's run took it (that run settles it, whatever the request does)
    # The claim where the records are kept (other servers on the storage wait on it), let go
    # when settled (SentMessages.claim).
    held: contextlib.AsyncExitStack | None = None


@dataclass(slots=True, eq=False)
class _FactoryAgent:
    """A factory's agent as one context holds it: closed when the last context holding it is
    dropped (a factory may give several contexts one agent; ``held`` counts them by agent)."""

    agent: Agent
    held: dict[int, int]

    async def aclose(self) -> None:
        key = id(self.agent)
        left = self.held.pop(key, 1) - 1
        if left > 0:
            self.held[key] = left
        else:
            await self.agent.aclose()


@dataclass(slots=True, eq=False)
class _Context:
    """A context's conversation, and what was opened for it (closed when it is dropped)."""

    session: Session
    opened: ClientAgent | _FactoryAgent | None = None
    # Tasks that took this context and have not ended: it is never dropped under them (between
    # taking it and the run's start there are awaits, and another context may come).
    users: int = 0


class _Runner:
    """Runs the agent for the SDK's executor: one session per context, one run per task."""

    def __init__(
        self,
        agent: Agent | AgentFactory,
        *,
        max_contexts: int,
        max_running: int,
        shared_memory: bool = False,
        forget_after: float | None = None,
        max_kept: int = 10_000,
    ) -> None:
        self._agent = agent
        self._max_contexts = max_contexts
        self._max_running = max_running
        self._shared_memory = shared_memory
        self._sessions: OrderedDict[str, _Context] = OrderedDict()
        # A context is one conversation, never another context's; kept past a context's
        # eviction, as its stored conversation is.
        self._owners = ConversationOwners()
        # How many kept contexts hold each factory agent (by id): closed with the last one.
        self._held: dict[int, int] = {}
        self._running: dict[str, _Running] = {}
        self._building = asyncio.Lock()
        # How each message's run ended, to answer it again when it is sent again (docs/a2a.md,
        # "A message sent again"), and the messages being answered now.
        self._sent = SentMessages(agent)
        self._answering: dict[tuple[str, str], _Claim] = {}
        # When each context was last used: the idle ones are forgotten (docs/a2a.md, "How long
        # a context is kept").
        self.ledger = ClientLedger(forget_after=forget_after, max_kept=max_kept)
        self._met = False

    async def _session(self, context_id: str) -> _Context:
        """The context's conversation, held for the caller (``users``, and on the ledger)
        until it lets go (:meth:`_let_go`)."""
        async with self._building:
            await self._meet()
            self.ledger.hold(client_key(context_id))
            try:
                await self._forget(self.ledger.due())
                return await self._taken(context_id)
            except BaseException:
                self.ledger.release(client_key(context_id))
                raise

    async def _meet(self) -> None:
        """Put on the ledger, once, what a server on this storage met before a restart (call it
        holding ``_building``)."""
        if self._met:
            return
        self._met = True
        agent = self._agent
        if isinstance(agent, Agent):
            self.ledger.met(await clients_stored(agent, "a2a"))
        self.ledger.met(await self._sent.stored())

    async def sweep(self) -> None:
        """Forget the contexts due now, with no message arriving (the app's periodic sweep)."""
        async with self._building:
            await self._meet()
            await self._forget(self.ledger.due())

    async def _forget(self, keys: list[str]) -> None:
        """Delete what is kept of the contexts ``keys`` (none holds a task): their conversation
        here and stored, their remembered facts, the records of their messages."""
        if not keys:
            return
        gone = set(keys)
        for context_id in [c for c in self._sessions if client_key(c) in gone]:
            context = self._sessions.pop(context_id)
            if context.opened is not None:
                await context.opened.aclose()
        for key in keys:
            try:
                if isinstance(self._agent, Agent) and not await forget_client(
                    self._agent, key, protocol="a2a", shared_memory=self._shared_memory
                ):
                    self.ledger.seen(key)  # running on another server: in use, kept
                    continue
                await self._sent.forget(key)
            except Exception as exc:  # the next context's message goes on; told once per key
                _LOG.warning("a2a: the idle context %s could not be forgotten: %s", key, exc)

    async def _taken(self, context_id: str) -> _Context:
        """The context's conversation (made on its first message), its ``users`` counted."""
        found = self._sessions.pop(context_id, None)
        if found is None:
            agent = self._agent
            if isinstance(agent, Agent):
                # The served agent as this context gets it: its own conversation in the
                # served storage's kind, its own remembered facts (docs/a2a.md).
                opened = client_agent(
                    agent, context_id, protocol="a2a", shared_memory=self._shared_memory
                )
                found = _Context(Session(opened.agent), opened)
            else:
                built = agent(context_id)
                agent = await built if inspect.isawaitable(built) else built
                if not isinstance(agent, Agent):
                    raise ConfigurationError("the agent factory must return an Agent")
                self._claim(context_id, agent)
                self._held[id(agent)] = self._held.get(id(agent), 0) + 1
                found = _Context(Session(agent), _FactoryAgent(agent, self._held))
        found.users += 1
        self._sessions[context_id] = found  # most recently used last
        dropped = self._evict()
        for context in dropped:
            if context.opened is not None:
                await context.opened.aclose()
        return found

    def _claim(self, context_id: str, agent: Agent) -> None:
        owner = self._owners.claim(context_id, agent.options.short_term_memory)
        if owner is not None:
            raise ConfigurationError(
                f"the agent factory returned, for context {context_id!r}, an agent whose "
                f"short-term memory keeps the conversation of another context ({owner!r}): each "
                "context must get its own (e.g. storage keyed by the context id the factory is "
                "given), or every client would read the others' messages"
            )
        scope = None if self._shared_memory else recall_key(agent)
        owner = None if scope is None else self._owners.claim_key(context_id, scope)
        if owner is not None:
            raise ConfigurationError(
                f"the agent factory returned, for context {context_id!r}, an agent whose "
                f"long-term memory recalls the facts of another context ({owner!r}) (the same "
                "memory and agent name): name each context's agent apart (long-term memory is "
                "scoped by the agent's name), or pass shared_memory=True to a2a_app to have "
                "every client's facts recalled for every other client"
            )

    async def sent_before(self, message: Any) -> tuple[str, Sent] | None:
        """How the run of ``message`` ended when its context sent it before (the same
        message id; once that run has ended, if it is running), as its context's id and its
        record; None when it was not: it is then being answered (a copy sent meanwhile waits
        for this one's run) until a run takes it or :meth:`not_taken` lets it go."""
        message_id = message.message_id
        if not message_id:
            return None
        key = (message.context_id, message_id)
        while (answering := self._answering.get(key)) is not None:
            await answering.settled.wait()
        answering = self._answering[key] = _Claim(key)
        context_id = message.context_id  # "" only for a task the SDK does not know: refused
        if not context_id:
            return None
        try:
            # Where the records are: another server on the storage answering it is waited for.
            answering.held = await self._sent.claim(context_id, message_id)
            found = await self._sent.find(context_id, message_id)
        except BaseException:
            await self._settle(answering)
            raise
        if found is None:
            return None
        await self._settle(answering)
        return context_id, found

    async def not_taken(self, message: Any) -> None:
        """The request of ``message`` ended before a run took it (refused, or failed in the
        SDK): a copy of it may be answered again."""
        answering = self._answering.get((message.context_id, message.message_id))
        if answering is not None and not answering.taken:
            await self._settle(answering)

    def _take(self, message: Any) -> _Claim | None:
        """The task's run takes the answering of its message (see :meth:`sent_before`)."""
        answering = self._answering.get((message.context_id, message.message_id))
        if answering is not None and not answering.taken:
            answering.taken = True
            return answering
        return None

    async def _settle(self, answering: _Claim | None) -> None:
        """Let go of the claim (its record, if any, is kept by now): a copy waiting here or
        on another server goes on, and finds it."""
        if answering is None:
            return
        held, answering.held = answering.held, None
        try:
            if held is not None:
                await held.aclose()
        except Exception as exc:  # the hold goes with its connection or process anyway
            _LOG.warning("a2a: the claim of message %r was not let go: %s", answering.key[1], exc)
        finally:
            if self._answering.get(answering.key) is answering:
                del self._answering[answering.key]
            answering.settled.set()

    async def _record(self, message: Any, context_id: str, sent: Sent) -> None:
        """Keep how ``message``'s run ended, to answer it so when it is sent again."""
        try:
            await self._sent.keep(context_id, message.message_id, sent)
        except Exception as exc:  # the answer went out: only a copy of it would run again
            _LOG.warning(
                "a2a: the answer to message %r was not recorded: %s", message.message_id[:80], exc
            )

    def is_running(self, task_id: str) -> bool:
        """Whether ``task_id``'s run is in progress here (the task store keeps it then)."""
        return task_id in self._running

    def _evict(self) -> list[_Context]:
        idle = [c for c, s in self._sessions.items() if not s.users and not s.session.state.running]
        return [
            self._sessions.pop(context_id)
            for context_id in idle[: max(0, len(self._sessions) - self._max_contexts)]
        ]

    async def aclose(self) -> None:
        """Close what was opened for the contexts kept (the app's shutdown)."""
        contexts, self._sessions = list(self._sessions.values()), OrderedDict()
        try:
            for context in contexts:
                if context.opened is not None:
                    await context.opened.aclose()
        finally:
            await self._sent.aclose()

    def admit(self, message: Any) -> None:
        """Refuse, before any task exists, a message this runner would not run: the A2A error
        the client gets (a part the agent cannot read, no parts or only empty text, a task id
        whose run is in progress, ``max_running`` reached)."""
        blocks_of(message)
        if message.task_id and message.task_id in self._running:
            # The SDK would hold it until the run ends, answer it with that run's result and
            # then run it in the finished task: a follow-up goes in the context, after the run.
            raise require("a2a.utils.errors").UnsupportedOperationError(
                f"task {message.task_id[:80]!r} is still running: send the message when it has "
                "ended (in its context, without the task id) or cancel the task"
            )
        if len(self._running) >= self._max_running:
            raise busy_error(len(self._running))

    async def execute(self, context: Any, queue: Any) -> None:
        tasks: Any = require("a2a.server.tasks")
        helpers: Any = require("a2a.helpers.proto_helpers")
        types: Any = require("a2a.types")
        task_id, context_id = context.task_id, context.context_id
        prompt = blocks_of(context.message)  # admitted: it reads
        if len(self._running) >= self._max_running:
            # Admitted in a race with other messages: the same error, through the SDK.
            raise busy_error(len(self._running))
        running = self._running[task_id] = _Running()  # counted before the first await
        answering = self._take(context.message)
        taken: _Context | None = None
        let_go = False

        async def finish(sent: Sent | None) -> None:
            """The run is over (before its last event goes out, so a client that has it finds
            its record and its context idle): keep how it ended, let the context go."""
            nonlocal let_go
            if let_go:
                return
            let_go = True
            try:
                if sent is not None and context.message.message_id:
                    await self._record(context.message, context_id, sent)
            finally:
                if taken is not None:
                    taken.users -= 1
                    self.ledger.release(client_key(context_id))
                await self._settle(answering)

        try:
            if context.current_task is None:
                submitted = helpers.new_task(
                    task_id, context_id, types.TaskState.TASK_STATE_SUBMITTED, [], [context.message]
                )
                await queue.enqueue_event(submitted)
            try:
                taken = await self._session(context_id)
                running.session = taken.session
            except ConfigurationError as exc:  # the developer's factory: the task says why
                await finish(None)
                updater = tasks.TaskUpdater(queue, task_id, context_id)
                await updater.failed(
                    updater.new_agent_message(answer_parts(f"the agent failed: {exc}"))
                )
                return
            updater = tasks.TaskUpdater(queue, task_id, context_id)
            await self._run(running, prompt, updater, finish)
        finally:
            try:
                await finish(None)  # when the run did not get there (cancelled, an error)
            finally:
                running.done.set()
                self._running.pop(task_id, None)

    async def _run(
        self,
        running: _Running,
        prompt: list[ContentBlock],
        updater: Any,
        finish: Callable[[Sent | None], Awaitable[None]],
    ) -> None:
        """Run the agent on the task's message; ``finish`` is told how the run ended (None:
        it did not run, the message may be sent again to run it) before the task's last
        event."""
        states: Any = require("a2a.types").TaskState

        def note(text: str) -> Any:
            return updater.new_agent_message(answer_parts(text))

        await updater.start_work()
        if running.cancel_requested or running.session is None:
            await finish(None)
            await updater.cancel()
            return
        try:
            result = await self._stream(running.session, prompt, updater, note)
        except SessionBusyError:
            await finish(None)
            await updater.reject(
                note(
                    "this context is busy with another task: wait for it to finish or cancel "
                    "it, or send the message in a new context"
                )
            )
            return
        except Exception as exc:
            said = f"the agent failed: {type(exc).__name__}: {exc}"
            await finish(Sent(updater.task_id, states.TASK_STATE_FAILED, "", said))
            await updater.failed(note(said))
            return
        if result.text or result.stop_reason != StopReason.ABORTED:
            await updater.add_artifact(
                answer_parts(result.text),
                artifact_id=self._answer_id(updater),
                name=ANSWER_ARTIFACT,
                append=False,
                last_chunk=True,
            )
        if result.stop_reason == StopReason.ABORTED:
            await finish(Sent(updater.task_id, states.TASK_STATE_CANCELED, result.text, ""))
            await updater.cancel()
        elif result.stop_reason == StopReason.DEFERRED and result.pending:
            # Calls wait for a person: the context's next message is the answer.
            asking = _asking(result.pending)
            await finish(
                Sent(updater.task_id, states.TASK_STATE_INPUT_REQUIRED, result.text, asking)
            )
            await updater.requires_input(note(asking))
        else:
            await finish(Sent(updater.task_id, states.TASK_STATE_COMPLETED, result.text, ""))
            await updater.complete()

    @staticmethod
    def _answer_id(updater: Any) -> str:
        return f"{updater.task_id}-{ANSWER_ARTIFACT}"

    async def _stream(
        self,
        session: Session,
        prompt: list[ContentBlock],
        updater: Any,
        note: Callable[[str], Any],
    ) -> RunResult:
        working: Any = require("a2a.types").TaskState.TASK_STATE_WORKING
        answer_id = self._answer_id(updater)
        streamed = False
        result: RunResult | None = None
        if not session.loaded:
            await session.load()
        streams = [session.stream(prompt)]
        waiting = session.pending
        if waiting:
            # The message answers the calls that wait (the task asked for input): "approved"
            # or "denied: <reason>" decides them; anything else is a new message instead of
            # a decision, which denies them (as in the served page) and then runs.
            text = " ".join(b.text for b in prompt if isinstance(b, TextBlock))
            decided = reply_decision(text, token=waiting[0].token)
            if decided is not None:
                streams = []
            else:
                decided = Deny(_WENT_ON, stop=True, token=waiting[0].token)
            decisions = {
                p.id: decided
                if p.kind == "approval" or isinstance(decided, Deny)
                else Deny("the client cannot run this tool over A2A", token=p.token)
                for p in waiting
            }
            streams.insert(0, session.stream_resume(decisions))
        for stream in streams:
            async for event in stream:
                if isinstance(event, AgentEnd) and not event.path:
                    result = event.result
                elif isinstance(event, MessageDelta):
                    if event.kind == "text" and event.delta:
                        await updater.add_artifact(
                            answer_parts(event.delta),
                            artifact_id=answer_id,
                            name=ANSWER_ARTIFACT,
                            append=streamed,
                            last_chunk=False,
                        )
                        streamed = True
                elif (progress := progress_note(event)) is not None:
                    await updater.update_status(working, message=note(progress))
            if result is not None and result.stop_reason == StopReason.DEFERRED:
                break  # the resumed run waits again: the message stays unsent
        if result is None:  # pragma: no cover - a run always ends with AgentEnd or raises
            raise RuntimeError("the run ended without a result")
        return result

    async def cancel(self, context: Any, queue: Any) -> None:
        running = self._running.get(context.task_id)
        if running is None:
            return  # not running here: the SDK records the task as canceled itself
        running.cancel_requested = True
        if running.session is not None:
            running.session.abort("now", reason="canceled by the A2A client")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(running.done.wait(), _CANCEL_GRACE)


def _executor(runner: _Runner) -> Any:
    """The SDK's ``AgentExecutor`` around ``runner`` (its class needs the SDK, so it is made
    here, on first use)."""
    execution: Any = require("a2a.server.agent_execution")

    class _Executor(execution.AgentExecutor):  # type: ignore[misc]
        async def execute(self, context: Any, event_queue: Any) -> None:
            await runner.execute(context, event_queue)

        async def cancel(self, context: Any, event_queue: Any) -> None:
            await runner.cancel(context, event_queue)

    return _Executor()


def _request_handler(runner: _Runner, **settings: Any) -> Any:
    """The SDK's request handler, refusing a message the runner would not run with the A2A
    error before the SDK makes a task of it (see :meth:`_Runner.admit`)."""
    handlers: Any = require("a2a.server.request_handlers")

    class _Handler(handlers.DefaultRequestHandler):  # type: ignore[misc]
        async def on_message_send(self, params: Any, context: Any) -> Any:
            await self._in_its_context(params.message, context)
            found = await runner.sent_before(params.message)
            if found is not None:  # sent again: answered as it was, not run again
                return await self._answered(params.message, *found, context)
            try:
                runner.admit(params.message)
                return await super().on_message_send(params, context)
            except BaseException:
                await runner.not_taken(params.message)
                raise

        async def on_message_send_stream(self, params: Any, context: Any) -> AsyncIterator[Any]:
            await self._in_its_context(params.message, context)
            found = await runner.sent_before(params.message)
            if found is not None:
                yield await self._answered(params.message, *found, context)
                return
            try:
                runner.admit(params.message)
                async for event in super().on_message_send_stream(params, context):
                    yield event
            except BaseException:
                await runner.not_taken(params.message)
                raise

        async def _in_its_context(self, message: Any, call: Any) -> None:
            """Name the context of a message sent without one: its task's (a reply naming
            only the task it answers), or one made of the message itself (see
            :func:`contextless_id`), so that a copy sent again is found in the same context by
            any server on the same storage (the SDK made a random one per copy)."""
            if message.context_id:
                return
            if message.task_id:  # a task the store does not have: the SDK says so
                kept = await self.task_store.get(message.task_id, call)
                if kept is not None:
                    message.context_id = kept.context_id
            elif message.message_id:
                message.context_id = contextless_id(message)

        async def _answered(self, message: Any, context_id: str, sent: Sent, call: Any) -> Any:
            """The task that answered ``message`` before: as the task store keeps it, or
            as its record says when the store no longer has it (dropped, or a restart)."""
            kept = await self.task_store.get(sent.task_id, call)
            if kept is not None and kept.status.state == sent.state:
                return kept
            return answered_task(message, context_id, sent)

    return _Handler(**settings)


def a2a_app(
    agent: Agent | AgentFactory,
    *,
    url: str,
    name: str | None = None,
    description: str | None = None,
    version: str = "1.0.0",
    path: str = "/",
    streaming: bool = True,
    max_contexts: int = 256,
    max_running: int = 64,
    max_tasks: int = 1024,
    allowed_hosts: Iterable[str] = (),
    max_body: int = 8 << 20,
    shared_memory: bool = False,
    forget_after: float | None = 30 * 86400.0,
    max_kept_contexts: int = 10_000,
) -> Any:
    """Serve ``agent`` over A2A (protocol 1.0, JSON-RPC binding): an ASGI (Starlette) app.

    Args:
        agent: the :class:`~goagent_py.Agent`, or a factory called with each new context's id
            that returns the agent for that conversation (e.g. with its own stored memory). An
            agent with short-term memory gives each context a conversation of its own in its
            storage's kind (docs/a2a.md, "One conversation per client").
        url: the address clients reach the app at (it goes in the agent card).
        name: the card's name (default: the agent's name; required with a factory).
        description: what the agent does, for the card (default: a sentence with its name).
        version: the agent's version, for the card.
        path: where JSON-RPC requests are posted, under ``url``.
        streaming: whether to offer ``SendStreamingMessage`` (``message/stream``).
        max_contexts: conversations kept in memory; past it, the least recently used idle one
            is dropped (a message in it then starts afresh).
        max_running: tasks running at once; a message past it is refused with the A2A error
            for a server temporarily unavailable (JSON-RPC -32603, no task is made) whose
            message says to send it again when one has ended.
        max_tasks: tasks kept for ``GetTask``; past it, the least recently updated ones that
            are not running are dropped (``GetTask`` then answers "task not found").
        allowed_hosts: host names accepted in the ``Host`` header besides localhost and the
            host of ``url``. Any other gets 421, a cross-origin POST 403 and a POST that is not
            JSON 415, so a page in the user's browser cannot make the agent run
            (docs/security.md).
        max_body: the largest request body accepted, in bytes (413 above; 8 MiB by default,
            room for a few images or files sent inline).
        shared_memory: recall every context's remembered facts in every other context (one
            long-term memory scope for all clients: one user's deployment). By default each
            context recalls its own only.
        forget_after: seconds a context may stay idle (no message) before what is kept of it
            is deleted: its stored conversation, its remembered facts and the records of its
            messages (docs/a2a.md, "How long a context is kept"); None: kept however long.
            30 days by default. A context with a task running is never forgotten.
        max_kept_contexts: contexts kept at most; past it, the one idle longest is
            forgotten first (10,000 by default).

    Returns:
        A Starlette app; serve it with uvicorn (see :func:`run_a2a`) or mount it in yours.

    Raises:
        MissingExtraError: the ``a2a`` extra is not installed.
        ConfigurationError: a bad URL, path or limit, a factory without ``name=``, or an agent
            whose short-term memory cannot keep a conversation per context (a storage that
            cannot name another conversation: pass a factory).
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"a2a_app needs the http(s) URL clients reach it at, got {url!r}")
    if not path.startswith("/"):
        raise ConfigurationError(f"path must start with '/', got {path!r}")
    for setting, value in (
        ("max_contexts", max_contexts),
        ("max_running", max_running),
        ("max_tasks", max_tasks),
        ("max_kept_contexts", max_kept_contexts),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{setting} must be >= 1, got {value!r}")
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ConfigurationError(f"max_body must be a number of bytes >= 1, got {max_body!r}")
    if not isinstance(shared_memory, bool):
        raise ConfigurationError(f"shared_memory must be True or False, got {shared_memory!r}")
    check_forget_after(forget_after)
    if isinstance(agent, Agent):
        memory = agent.options.short_term_memory
        why = None if memory is None else unkeyable(memory)
        if why is not None:
            raise ConfigurationError(
                f"the served agent cannot keep a conversation per A2A context: {why}. Pass a "
                "factory instead, a2a_app(make_agent, name=...), where make_agent(context_id) "
                "returns an agent whose memory keeps that context's conversation"
            )
        card_name = name or agent.name or "goagent-py"
        tools = [t.definition.name for t in agent.tools]
    elif callable(agent):
        if not name:
            raise ConfigurationError("a2a_app with an agent factory needs name= for the card")
        card_name, tools = name, []
    else:
        raise ConfigurationError(
            f"a2a_app takes an Agent or a factory of agents, got {type(agent).__name__}"
        )
    routes: Any = require("a2a.server.routes")
    runner = _Runner(
        agent,
        max_contexts=max_contexts,
        max_running=max_running,
        shared_memory=shared_memory,
        forget_after=forget_after,
        max_kept=max_kept_contexts,
    )
    applications: Any = require("starlette.applications")
    card = agent_card(
        name=card_name,
        description=description or f"The goagent-py agent {card_name!r}: send it a task.",
        url=url.rstrip("/") + path,
        version=version,
        streaming=streaming,
        tools=tools,
    )
    handler = _request_handler(
        runner,
        agent_executor=_executor(runner),
        task_store=bounded_task_store(max_tasks, runner.is_running),
        agent_card=card,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            # An idle server forgets too (docs/a2a.md, "How long a context is kept").
            async with sweeping(runner.sweep, runner.ledger, what="a2a"):
                yield
        finally:
            try:
                await handler.aclose()
            finally:
                await runner.aclose()

    middleware: Any = require("starlette.middleware")
    hosts = [urlsplit(url).hostname or "", *allowed_hosts]
    return applications.Starlette(
        routes=[
            *routes.create_agent_card_routes(card),
            *routes.create_jsonrpc_routes(handler, path, enable_v0_3_compat=True),
        ],
        middleware=[
            middleware.Middleware(OriginGuard, hosts=hosts, max_body=max_body),
            middleware.Middleware(JsonRpcGuard),
        ],
        lifespan=lifespan,
    )


async def run_a2a(
    agent: Agent | AgentFactory,
    *,
    host: str = "127.0.0.1",
    port: int = 9000,
    url: str | None = None,
    **options: Any,
) -> None:
    """Serve ``agent`` over A2A at ``http://host:port`` until cancelled (``url`` defaults to
    that address; set it when clients reach the app through a proxy). Other keywords go to
    :func:`a2a_app`."""
    import uvicorn

    app = a2a_app(agent, url=url or f"http://{host}:{port}", **options)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


_WENT_ON = "the user sent a new message instead of deciding on this call"


def contextless_id(message: Any) -> str:
    """The context of a message sent without one (and without a task): ``msg-`` and a digest
    of its id and its parts. A copy sent again names the same context wherever it arrives (a
    restarted server, another worker on the same storage), so its record there is found; a
    message that reuses the id for something else (another client's "1") is another context,
    never given the first one's answer (docs/a2a.md, "A message sent again")."""
    digest = hashlib.sha256(message.message_id.encode("utf-8", "surrogatepass"))
    for part in message.parts:
        digest.update(b"\x1f")
        digest.update(part.SerializeToString(deterministic=True))
    return "msg-" + digest.hexdigest()[:32]


def answered_task(message: Any, context_id: str, sent: Sent) -> Any:
    """The task a record says answered ``message`` (its id, state, answer and note)."""
    types: Any = require("a2a.types")
    status = types.TaskStatus(state=sent.state)
    if sent.note:
        status.message.CopyFrom(
            types.Message(
                role=types.Role.ROLE_AGENT,
                message_id=f"{sent.task_id}-note",
                task_id=sent.task_id,
                context_id=context_id,
                parts=answer_parts(sent.note),
            )
        )
    task = types.Task(id=sent.task_id, context_id=context_id, status=status, history=[message])
    if sent.answer or sent.state != types.TaskState.TASK_STATE_CANCELED:
        task.artifacts.append(
            types.Artifact(
                artifact_id=f"{sent.task_id}-{ANSWER_ARTIFACT}",
                name=ANSWER_ARTIFACT,
                parts=answer_parts(sent.answer),
            )
        )
    return task


def _asking(pending: list[PendingCall]) -> str:
    """The input-required note: what waits, and how the next message decides it."""
    calls = "; ".join(f"{p.name} {json.dumps(p.arguments, ensure_ascii=False)}" for p in pending)
    return (
        f"waiting for your decision on {calls}: reply {REPLY_HINT} (any other message denies "
        "it and is answered instead)"
    )
