"""What ``goagent-py chat``, ``serve`` and ``mcp serve`` are made of: memory, the local
embedder, the small-model kit (their agent is built in :mod:`goagent_py.cli._agent`).

The small-model kit is what makes the embedded 135M model usable, by the framework's own means:

- :func:`~goagent_py.small_models.tool_selection.select_tools` offers only the tool relevant
  to the message (none for chit-chat), with required parameters only (the model fills optional
  ones with noise; its arguments are grammar-constrained to the schema, so a parameter it is
  not offered cannot be written). With the embedded model the one tool offered must be called
  (``LlamaCppProvider.require_tool``): left to choose, it answered "What time is it now?" with
  a made-up time;
- :func:`~goagent_py.small_models.tool_answers.answer_from_tools` answers from the
  calculator's and the clock's results (the model reads "395" and writes "69") and turns a
  failed call into a short apology instead of an essay about the error; and a question about
  the user from the user's own statement recalled for it, when it covers the question, said
  back ("Where was I born?": "You were born in Goa, in India."; the model, shown that
  sentence, wrote "India");
- :func:`~goagent_py.small_models.context_filters.drop_failed_tool_exchanges` keeps failed
  exchanges of earlier turns, and the confused answers after them, out of what the model reads
  (successful ones stay: they are the examples it follows when it calls a tool);
- :func:`~goagent_py.small_models.repeat_guard.avoid_repeats` asks again when an answer
  echoes the user's message ("Hello! How are you today?" came back word for word) or copies
  an earlier answer (the model continues patterns: after a few "It is 12:04." answers,
  "Thanks!" got "It is 12:04." too);
- a short default system prompt (:data:`~goagent_py.cli._common.SMALL_MODEL_PROMPT`);
- a short history window (the last 4 messages or exchanges): the model imitates what it reads,
  and long prompts are slow on a CPU. Facts from earlier come back through long-term recall:
  the best recalled statement is said back to the model before a question
  (:func:`~goagent_py.small_models.context_filters.inline_memories`: "You were born in Goa,
  in India.\nWhere was I born?"), and tool selection then offers no tool when that statement
  matches the question better than any tool does ("When is my birthday?" is not a request for
  the clock).

It applies to the embedded model and to ``--base-url`` servers (local OpenAI-compatible servers
run small models); the cloud models get the plain agent.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from goagent_py.errors import MissingExtraError

__all__ = [
    "TOOL_EXAMPLES",
    "TOOL_TEMPLATES",
    "embedder_problem",
    "exit_if_loading",
    "load_in_background",
    "loading",
    "loading_embedder",
    "local_embedder",
    "long_term_memory",
    "small_model_context",
    "small_model_provider",
    "wait_loaded",
    "write_policy",
]

TOOL_EXAMPLES: dict[str, list[str]] = {
    "calculator": [
        "What is 12 * 7?",
        "How much is 250 plus 37?",
        "Calculate 15 / 4",
        "What is 3 + 4 * 2?",
        "What's 100 minus 58?",
    ],
    "current_time": [
        "What time is it?",
        "What is the date?",
        "What day of the week is it?",
        "Tell me the current time",
        "What's the current date and time?",
    ],
}
"""Requests each built-in tool serves: tool selection matches a message against these too."""

TOOL_TEMPLATES: dict[str, str] = {
    "calculator": "{expression} = {result}",
    "current_time": "It is {result}.",
}
"""Direct answers from the built-in tools' results."""

SELECTION_THRESHOLD = 0.4
"""Least similarity for a tool to be offered (MiniLM with the examples above: requests for a
tool score 0.45-0.95, chit-chat and personal facts at most 0.33)."""


def local_embedder() -> Any:
    """The local MiniLM sentence embedder (extras ``local``), not loaded yet."""
    try:
        from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MissingExtraError(
            str(exc.name or exc), "local", feature="the local embedder"
        ) from exc
    return SentenceTransformerEmbedder()


_LOADS: list[threading.Thread] = []
"""The background loads started in this process (:func:`exit_if_loading` looks at them)."""

EXIT_WAIT = 300.0
"""How long the interpreter's exit waits for a background load still running (seconds)."""

_log = logging.getLogger("goagent_py.cli")


def loading() -> bool:
    """Whether a background load started by :func:`load_in_background` is still running."""
    return any(thread.is_alive() for thread in _LOADS)


def _finish_loads() -> None:
    """At the interpreter's exit, wait for the background loads still running.

    The last line of defence of :func:`exit_if_loading`, for every exit that does not pass
    through it (an exception out of ``main()``, a program that called ``main(argv)``): the
    interpreter finalised while the load thread was inside ONNX Runtime or torch and the
    process aborted ("terminate called without an active exception", exit 134). Waiting keeps
    the exit code the interpreter chose. A load that outlasts :data:`EXIT_WAIT` is left by
    ``os._exit`` rather than risk the abort.
    """
    for thread in _LOADS:
        thread.join(EXIT_WAIT)
    if loading():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(1)


class _Load(threading.Thread):
    """A model load in a daemon thread, registered in :data:`_LOADS`.

    A failure is kept in :attr:`failure` for the call that needs the model, which reports it
    where the user sees it (the thread printed its traceback into the middle of the chat).
    """

    def __init__(self, load: Callable[[], Any]) -> None:
        super().__init__(name="goagent-embedder-load", daemon=True)
        self._load = load
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._load()
        except BaseException as exc:  # reported by wait_loaded, or by the next _load call
            _log.debug("background load failed: %r", exc)
            self.failure = exc


def _start_load(load: Callable[[], Any]) -> _Load:
    thread = _Load(load)
    if not _LOADS:
        atexit.register(_finish_loads)
    _LOADS.append(thread)
    thread.start()
    return thread


def load_in_background(embedder: Any) -> _Load | None:
    """Load ``embedder``'s model in a daemon thread while the user types.

    Not in the event loop's executor: quitting right after start must not wait for the load
    (asyncio.run joins its executor threads; the interpreter does not join daemon threads).
    A turn that needs the model waits for it on the embedder's own lock. A command that ends
    while the load runs leaves through :func:`exit_if_loading`.
    """
    load = getattr(embedder, "_load", None)
    if load is None:
        return None
    # numpy first, in this thread: the load imports it, and so does a vector store opened
    # meanwhile; two threads importing it at once can see it half initialised ("cannot import
    # name 'NDArray' from partially initialized module 'numpy._typing'").
    with contextlib.suppress(ImportError):
        importlib.import_module("numpy")
    return _start_load(load)


async def wait_loaded(thing: Any) -> None:
    """Load ``thing``'s model (an embedder's, an embedded LLM's: its ``_load``) in a
    :func:`load_in_background` thread and wait for it, in a daemon worker.

    Loaded on first use instead, the model loads in the event loop's executor, which
    ``asyncio.run`` joins on the way out: a Ctrl-C while it loaded waited for the whole load
    (``rag index`` sat for the seconds of the embedder's load). Loaded here, the command ends
    at once through :func:`exit_if_loading` (exit 130, nothing more written). A failed load
    is tried once more, in a registered load thread too (a Ctrl-C during the second try must
    also leave through :func:`exit_if_loading`), and its failure raised here. A ``thing``
    without ``_load`` is loaded by its own ``load()`` when it has one (nothing otherwise: a
    vendor's model).
    """
    from goagent_py._workers import run_named

    thread = load_in_background(thing)
    if thread is None:
        load = getattr(thing, "load", None)
        if callable(load):
            await load()
        return
    await run_named("load-wait", thread.join)
    if thread.failure is None:
        return
    again = _start_load(thing._load)
    await run_named("load-wait", again.join)
    if again.failure is not None:
        raise again.failure


def exit_if_loading(code: int) -> None:
    """End the process now with ``code`` when a background load is still running.

    The interpreter's normal exit finalises modules and runs C++ static destructors while the
    load thread is inside ONNX Runtime or torch: the process then aborted with "terminate
    called without an active exception" (exit 134) about one time in three when serve or chat
    was quit in its first seconds. ``os._exit`` skips that finalisation; the command has
    closed its own resources by now, so only the standard streams are left to flush. Waiting
    for the load instead would hold a quit for the whole load (docs/notes/review6c.md).
    For the command-line entry only: a process that called ``main()`` keeps running.
    """
    if not loading():
        return
    # What the normal exit waits for, first: the non-daemon threads (a SQLite file's writer
    # with writes still queued; an idle one is told to end now instead of lingering).
    sqlite_module = sys.modules.get("goagent_py._sqlite")
    if sqlite_module is not None:
        sqlite_module._end_idle_writers()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(30)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def embedder_problem() -> str:
    """Why the local embedder cannot be made (its :class:`MissingExtraError`, which says how
    to install it), or "" when it can. A command that goes on without it says so: long-term
    memory off, and every tool offered to a small model."""
    try:
        local_embedder()
    except MissingExtraError as exc:
        return str(exc)
    return ""


def loading_embedder() -> Any:
    """The local embedder, its model loading in the background (None without ``local``)."""
    try:
        embedder = local_embedder()
    except MissingExtraError:
        return None
    load_in_background(embedder)
    return embedder


def write_policy(mode: str) -> Any:
    """The long-term write policy for ``--remember``: statements, all or none."""
    from goagent_py.memory.base import store_always
    from goagent_py.memory.write_policies import user_statements

    if mode == "all":
        return store_always
    if mode == "none":
        return lambda user, answer: None
    # First-person statements only: a request ("Calculate 250 - 37") recalled later is read
    # as a fact, and the small model copied its numbers into the next calculation.
    return user_statements(about_user=True)


async def long_term_memory(
    path: Path,
    embedder: Any,
    closers: list[Any],
    *,
    threshold: float | None,
    top_k: int = 3,
    decider: Any = None,
) -> Any:
    """Long-term memory on sqlite-vec at ``path`` with ``embedder``, consolidating new facts
    with ``decider`` (None: every statement is added)."""
    try:
        from goagent_py.memory.long_term import LongTermMemory
        from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MissingExtraError(
            str(exc.name or exc), "local,vector", feature="long-term memory"
        ) from exc
    # Read from the model folder without loading the model (loading takes seconds).
    store = SqliteVecStore(path, table="memories", dimensions=embedder.dimensions)
    closers.append(store)
    return LongTermMemory(embedder, store, top_k=top_k, score_threshold=threshold, decider=decider)


def small_model_provider(provider: Any, embedder: Any | None) -> Any:
    """``provider`` wrapped in the small-model kit (see the module's docstring)."""
    from goagent_py.small_models.repeat_guard import avoid_repeats
    from goagent_py.small_models.tool_answers import answer_from_tools
    from goagent_py.small_models.tool_selection import select_tools

    if embedder is not None:
        if hasattr(provider, "require_tool"):
            # Offered only when relevant, the one tool must be called, not answered around.
            provider.require_tool = True
        provider = select_tools(
            provider,
            embedder,
            top_k=1,
            threshold=SELECTION_THRESHOLD,
            examples=TOOL_EXAMPLES,
            required_only=True,
        )
    return answer_from_tools(avoid_repeats(provider), TOOL_TEMPLATES, memory_answers=True)


def small_model_context(recalled: Callable[[], list[Any]]) -> Callable[[list[Any]], list[Any]]:
    """The small model's ``transform_context``; ``recalled`` gives the turn's recalled memories.

    Recalled facts are quoted next to the question: a small model ignores a memory block.
    With a fact recalled, earlier turns go: the model imitates their answers instead. Only the
    best one: given two facts, it mixes them ("your name is Biscuit").
    """
    from goagent_py.memory._provenance import provenance_of
    from goagent_py.memory.records import SUPERSEDED, asks_about_past, state_of
    from goagent_py.memory.write_policies import is_question
    from goagent_py.small_models.context_filters import (
        current_turn_start,
        drop_failed_tool_exchanges,
        inline_memories,
        used_to,
    )

    def transform(messages: list[Any]) -> list[Any]:
        # The user's own statements only: a passage or tool output stored as a user message
        # (provenance "retrieved" or "tool") said back as "You ..." would be read as fact.
        said = [s.message for s in recalled() if provenance_of(s.message) == "user"]
        facts = [m.text for m in said][:1]
        kept = drop_failed_tool_exchanges(messages)
        # Asked about the past: the fact a newer one replaced, said as the past.
        former = [m.text for m in said if state_of(m.metadata) == SUPERSEDED]
        if former and kept and asks_about_past(kept[-1].text):
            facts = [used_to(former[0])]
        if not kept or not is_question(kept[-1].text):
            facts = []  # a statement: quoted facts would only be parroted back
        if facts:
            kept = kept[current_turn_start(kept) :]
        return inline_memories(kept, facts)

    return transform
