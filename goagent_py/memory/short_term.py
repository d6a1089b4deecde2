"""Short-term memory: the conversation, kept in a storage and read through a window policy."""

from __future__ import annotations

from goagent_py._describe import message_of
from goagent_py._metadata_keys import UI_ONLY_KEY
from goagent_py._transcript import holding_wait
from goagent_py.errors import ConfigurationError, MemoryStoreError
from goagent_py.memory.base import MessageMatch, MessageUpdate
from goagent_py.memory.policies import NoOp, Policy
from goagent_py.memory.storage import InMemoryStorage, Storage
from goagent_py.messages import Message, Role

__all__ = ["COMPACTION_METADATA_KEY", "ShortTermMemory", "is_boundary", "model_visible"]

COMPACTION_METADATA_KEY = "goagent.compaction"
"""Metadata key of a compaction boundary: ``{summary, covers, strategy, tokens_before,
tokens_after}`` (see :mod:`goagent_py.memory.compaction`)."""


def is_boundary(message: Message) -> bool:
    """Whether ``message`` is a compaction boundary (a stored summary of earlier messages)."""
    return isinstance(message.metadata.get(COMPACTION_METADATA_KEY), dict)


def model_visible(message: Message) -> bool:
    """Whether ``message`` counts in a boundary's ``covers``: a transcript message the model
    is sent (not a boundary, not a UI-only message). A compactor counts what it is sent, so
    storage must count the same way (issue 28: UI-only messages shifted the cut)."""
    return not is_boundary(message) and not message.metadata.get(UI_ONLY_KEY)


def _after_visible(transcript: list[Message], count: int) -> int:
    """The index in ``transcript`` right after its ``count``-th model-visible message."""
    if count <= 0:
        return 0
    seen = 0
    for i, m in enumerate(transcript):
        if model_visible(m):
            seen += 1
            if seen == count:
                return i + 1
    return len(transcript)


class ShortTermMemory:
    """The conversation so far: the agent loads it before a run and appends each turn after it.

    Everything is stored; the policy only decides what :meth:`messages` returns, so changing
    the window later never loses history. When the window cuts the history, it opens on a user
    message: assistant and tool messages left at its start (answers whose question was cut off)
    are dropped too, because Anthropic's API rejects a conversation that starts with an
    assistant message, and many chat templates of local servers expect user first::

        memory = ShortTermMemory(storage=SQLiteStorage("chat.db"), policy=TokenWindow(8000))
        agent = Agent(provider=..., short_term_memory=memory)

    A compaction boundary (appended by :class:`~goagent_py.memory.compaction.Compactor`) marks
    the first ``covers`` messages of the transcript as summarised: :meth:`messages` then returns
    the latest boundary followed by the transcript messages after the ones it covers (the
    policy's window applies to those; when it cuts them, the boundary is left out too). The
    storage stays append-only and keeps everything.

    Args:
        storage: where messages are kept; a fresh :class:`InMemoryStorage` by default.
        policy: the window applied when reading; :class:`NoOp` (everything) by default.
    """

    def __init__(self, storage: Storage | None = None, policy: Policy | None = None) -> None:
        self.storage: Storage = storage if storage is not None else InMemoryStorage()
        self.policy: Policy = policy if policy is not None else NoOp()
        self.window_start = 0
        """How many model-visible transcript messages (see :func:`model_visible`) come before
        the first one the last :meth:`messages` call returned; a compactor maps positions with
        it."""

    async def messages(self) -> list[Message]:
        """The stored conversation after the policy's window, oldest first.

        A window that is a cut tail of the history starts on a user message (see the class
        docs); a history that itself starts with an assistant message (a greeting) is returned
        as the policy gives it. A window never cuts off the turn whose tool calls wait for
        decisions, nor one a crash left with calls without results: it is widened to that
        turn, from the user message that asked on (docs/approvals.md "Short-term memory
        windows").

        Raises:
            MemoryStoreError: the storage could not be read.
        """
        stored = await self._load()
        boundary = next((m for m in reversed(stored) if is_boundary(m)), None)
        transcript = [m for m in stored if not is_boundary(m)]
        start = 0
        head: list[Message] = []
        if boundary is not None:
            covers = boundary.metadata[COMPACTION_METADATA_KEY].get("covers", 0)
            start = _after_visible(transcript, int(covers))
            head = transcript[:start]
            transcript = transcript[start:]
        window = self.policy.apply(transcript)
        cut = len(transcript) - len(window)
        if window and cut > 0 and window[0] is transcript[cut]:  # a tail: the policy cut the start
            first = next((i for i, m in enumerate(window) if m.role == Role.USER), len(window))
            window = window[first:]
        # The window never cuts off the turn that waits for decisions (approve15): which calls
        # wait is the record's to say, and their resume sends that turn with its results; nor
        # one a crash left open, which the next run closes in the record first.
        whole = head + transcript if head else transcript
        held = holding_wait(window, whole, interrupted=True)
        if held is not window:
            window = held
            if len(window) > len(transcript):  # a compaction summed it up: the turn instead
                boundary = None
        cut_off = whole[: len(whole) - len(window)]
        self.window_start = sum(model_visible(m) for m in cut_off)
        if boundary is not None and len(window) == len(transcript):
            return [boundary, *window]  # the summary stands for what the window starts after
        return window

    async def transcript(self) -> list[Message]:
        """Every stored message except compaction boundaries: the full conversation.

        Raises:
            MemoryStoreError: the storage could not be read.
        """
        return [m for m in await self._load() if not is_boundary(m)]

    async def _load(self) -> list[Message]:
        try:
            return await self.storage.load()
        except MemoryStoreError:
            raise
        except Exception as exc:  # a third-party Storage that does not follow the protocol
            raise MemoryStoreError(f"loading short-term memory failed: {message_of(exc)}") from exc

    async def append(self, *messages: Message) -> None:
        """Store ``messages`` (one turn) at the end, atomically; nothing to store is a no-op.

        Raises:
            MemoryStoreError: the storage could not be written.
        """
        if not messages:
            return
        try:
            await self.storage.append(list(messages))
        except MemoryStoreError:
            raise
        except Exception as exc:
            raise MemoryStoreError(
                f"appending to short-term memory failed: {message_of(exc)}"
            ) from exc

    async def update_where(self, match: MessageMatch, update: MessageUpdate) -> Message | None:
        """Replace the newest stored message ``match`` accepts with ``update(message)``, in one
        transaction of the storage (see :class:`~goagent_py.memory.base.UpdatableMemory`).

        Raises:
            ConfigurationError: the storage cannot update a message (it has no
                ``update_where``: a third-party storage).
            MemoryStoreError: the storage failed.
        """
        method = getattr(self.storage, "update_where", None)
        if not callable(method):
            raise ConfigurationError(
                f"{type(self.storage).__name__} cannot update a stored message, which deciding "
                "a waiting tool call needs; use InMemoryStorage, SQLiteStorage or PostgresStorage"
            )
        found: Message | None = await method(match, update)
        return found

    async def clear(self) -> None:
        """Forget the conversation (in the storage)."""
        await self.storage.clear()

    def __repr__(self) -> str:
        return f"ShortTermMemory(storage={self.storage!r}, policy={self.policy!r})"
