"""The whole mapping between goagent-py and A2A, in one module: the spec moved twice in a year
(0.2 -> 0.3 -> 1.0), so a change of version is a change here and in the pin, nowhere else.

Written against protocol 1.0 as the ``a2a-sdk`` 1.3 spells it (protobuf types; JSON-RPC methods
``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``; the server also answers
the 0.3 names ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``).

- **Parts in** (server): text -> text; ``raw`` bytes with an image type -> an image block, with
  ``application/pdf`` or ``text/plain`` -> a document block; ``data`` -> its JSON as text;
  ``url`` -> a line naming the file (we do not fetch it). Anything else is refused before a
  task exists, with the spec's error (``ContentTypeNotSupportedError``, -32005) whose message
  says which kinds are accepted; so is a message past ``max_running`` (-32603, "send it again
  when one has ended").
- **A run out** (server): a Task (submitted), WORKING, a status note per tool call
  ("calling tool X") and per turn after the first, the answer's text as an artifact named
  "answer" (streamed in chunks with ``append``, then the whole text with ``last_chunk``), then
  COMPLETED; an aborted run is CANCELED; a failed run is FAILED with the error as its message.
- **A reply in** (client): the artifacts' text (else the final message's text) is the answer;
  COMPLETED is success, INPUT_REQUIRED / AUTH_REQUIRED come back as the question asked,
  FAILED / REJECTED / CANCELED raise :class:`~goagent_py.a2a.errors.A2AError`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from goagent_py._prompt import to_messages
from goagent_py.a2a._sdk import require
from goagent_py.errors import InvalidInputError
from goagent_py.events import AgentEvent, ToolExecutionStart, TurnStart
from goagent_py.messages import (
    DOCUMENT_MEDIA_TYPES,
    IMAGE_MEDIA_TYPES,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
)

__all__ = [
    "ANSWER_ARTIFACT",
    "PROTOCOL_VERSION",
    "Reply",
    "agent_card",
    "answer_parts",
    "blocks_of",
    "busy_error",
    "progress_note",
    "user_request",
]

PROTOCOL_VERSION = "1.0"
ANSWER_ARTIFACT = "answer"
# A2A names a state in its JSON as the lower-case word after TASK_STATE_ (0.3 and 1.0 alike).
_STATE_PREFIX = "TASK_STATE_"
_STOPPED = frozenset(
    {"", "completed", "failed", "canceled", "rejected", "input_required", "auth_required"}
)


def _types() -> Any:
    return require("a2a.types")


def _errors() -> Any:
    return require("a2a.utils.errors")


# -- server side -------------------------------------------------------------------------------


def agent_card(
    *,
    name: str,
    description: str,
    url: str,
    version: str,
    streaming: bool,
    tools: Sequence[str],
) -> Any:
    """The agent card: one JSON-RPC interface at ``url``, one skill "ask" tagged with the
    agent's tool names, text in and out (images and PDFs also accepted in)."""
    types = _types()
    return types.AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=[
            types.AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION
            )
        ],
        capabilities=types.AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            types.AgentSkill(
                id="ask",
                name="ask",
                description=description,
                tags=list(tools) or ["agent"],
                input_modes=["text/plain", *IMAGE_MEDIA_TYPES, "application/pdf"],
                output_modes=["text/plain"],
            )
        ],
    )


def blocks_of(message: Any) -> list[ContentBlock]:
    """A user message's parts as our content blocks (see the module docstring).

    Raises:
        a2a.utils.errors.ContentTypeNotSupportedError: a part of a kind the agent cannot
            read (the client gets JSON-RPC error -32005, saying which kinds it can send).
        a2a.utils.errors.InvalidParamsError: a message without parts, or whose parts are
            only empty text (-32602): the agent would be run on nothing.
    """
    blocks: list[ContentBlock] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            blocks.append(TextBlock(part.text))
        elif kind == "data":
            data = require("google.protobuf.json_format").MessageToDict(part.data)
            blocks.append(TextBlock(json.dumps(data, ensure_ascii=False)))
        elif kind == "url":
            blocks.append(TextBlock(f"[file {part.filename or ''} at {part.url}]"))
        elif kind == "raw" and part.media_type in IMAGE_MEDIA_TYPES:
            blocks.append(ImageBlock(part.raw, part.media_type))
        elif kind == "raw" and part.media_type in DOCUMENT_MEDIA_TYPES:
            blocks.append(DocumentBlock(part.raw, part.media_type, title=part.filename))
        else:
            raise _errors().ContentTypeNotSupportedError(
                f"an A2A part of kind {kind!r} ({part.media_type or 'no media type'}) cannot be "
                f"sent to the agent: send text, data, a url, or raw {', '.join(IMAGE_MEDIA_TYPES)}"
                f" or {', '.join(DOCUMENT_MEDIA_TYPES)}"
            )
    if not blocks:
        raise _errors().InvalidParamsError(
            "the A2A message has no parts: send at least one text part"
        )
    try:
        to_messages(blocks, "the A2A message")  # the rule every run's prompt follows
    except InvalidInputError:
        raise _errors().InvalidParamsError(
            "the A2A message's text is empty: send the task or question in a text part"
        ) from None
    return blocks


def busy_error(running: int) -> Exception:
    """What a message past the server's ``max_running`` gets: the spec's error for a server
    that is temporarily unavailable (JSON-RPC -32603), saying when to send it again."""
    error: Exception = _errors().InternalError(
        f"the server is running {running} tasks already (its max_running): send the message "
        "again when one has ended"
    )
    return error


def answer_parts(text: str) -> list[Any]:
    """The parts of an answer (or of a note): one text part."""
    return [_types().Part(text=text)]


def progress_note(event: AgentEvent) -> str | None:
    """The status note a run's event becomes (None: the event is not reported)."""
    if isinstance(event, ToolExecutionStart):
        return f"calling tool {event.call.name}"
    if isinstance(event, TurnStart) and event.iteration > 0:
        return f"turn {event.iteration + 1}"
    return None


# -- client side -------------------------------------------------------------------------------


def user_request(text: str, *, context_id: str = "") -> Any:
    """A SendMessageRequest carrying ``text`` as one user message (in ``context_id``, if set)."""
    types = _types()
    message = types.Message(
        role=types.Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        parts=[types.Part(text=text)],
    )
    return types.SendMessageRequest(message=message)


def _text(parts: Any) -> str:
    return "\n".join(p.text for p in parts if p.WhichOneof("content") == "text")


def _state_name(state: int) -> str:
    name: str = _types().TaskState.Name(state)
    return name.removeprefix(_STATE_PREFIX).lower()


@dataclass(slots=True)
class Reply:
    """A remote agent's reply, folded from the responses of one send.

    Attributes:
        text: the answer (the artifacts' text, else the last agent message's text).
        state: the task's last state as A2A's JSON names it ("completed", "failed", ...);
            "" when the agent answered with a plain message and no task.
        task_id: the task's id ("" without a task).
        context_id: the conversation's id, to continue it.
        note: the text of the last status message (a question, or why it failed).
    """

    text: str = ""
    state: str = ""
    task_id: str = ""
    context_id: str = ""
    note: str = ""
    # artifact id -> its text in the chunks it came in (joined once, in answer(): adding each
    # chunk to one string copied the whole text each time, minutes of CPU for a few MB)
    _artifacts: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)

    @property
    def finished(self) -> bool:
        """Whether the remote agent stopped working: a final or interrupted state, or a plain
        message instead of a task."""
        return self.state in _STOPPED

    def fold(self, response: Any) -> str | None:
        """Take one StreamResponse in; returns a progress note for the caller, if any."""
        kind = response.WhichOneof("payload")
        if kind == "message":
            self.context_id = response.message.context_id or self.context_id
            self.text = _text(response.message.parts)
            self.state = ""
            return None
        if kind == "task":
            task = response.task
            self.task_id, self.context_id = task.id, task.context_id
            for artifact in task.artifacts:
                self._artifacts[artifact.artifact_id] = [_text(artifact.parts)]
            return self._status(task.status)
        if kind == "status_update":
            return self._status(response.status_update.status)
        if kind == "artifact_update":
            update = response.artifact_update
            artifact = update.artifact
            chunks = self._artifacts.get(artifact.artifact_id) if update.append else None
            if chunks is None:
                chunks = self._artifacts[artifact.artifact_id] = []
            chunks.append(_text(artifact.parts))
        return None

    def _status(self, status: Any) -> str | None:
        self.state = _state_name(status.state)
        note = _text(status.message.parts) if status.HasField("message") else ""
        if note:
            self.note = note
        return f"{self.state}: {note}" if note else None

    def answer(self) -> str:
        """The answer's text: the artifacts', else the last status message's."""
        texts = ("".join(chunks) for chunks in self._artifacts.values())
        artifacts = "\n".join(t for t in texts if t)
        return artifacts or self.text or self.note
