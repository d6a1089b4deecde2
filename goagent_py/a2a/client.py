"""A remote A2A agent, called from goagent-py: as a tool of an agent, or directly::

    remote = A2AAgent("http://127.0.0.1:9000")
    agent = Agent(provider=p, model="m", tools=[remote.as_tool(name="travel")])
    reply = await remote.send("Plan a day in Lisbon")      # or directly

The card is read from ``<url>/.well-known/agent-card.json`` on first use; the SDK's client
picks the interface the card offers (JSON-RPC, or HTTP+JSON) and streams when the card says the
agent can. Each tool call is a new A2A conversation (context); :meth:`A2AAgent.send` can
continue one (``context_id=``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from goagent_py._frozen import freeze
from goagent_py.a2a._mapping import Reply, user_request
from goagent_py.a2a._sdk import require
from goagent_py.a2a.errors import A2AError
from goagent_py.errors import ConfigurationError
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import ToolDefinition

__all__ = ["A2AAgent", "A2ATool"]

_log = logging.getLogger("goagent_py.a2a")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_FAILED = {"failed": "failed", "rejected": "refused the task", "canceled": "canceled the task"}
# Seconds a cancelled call waits for the remote CancelTask it sends.
_CANCEL_TIMEOUT = 5.0


def _origin(url: str) -> str:
    """``scheme://host:port`` of ``url``, lower-cased, with the scheme's default port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


def _checked_origin(url: str) -> bool:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"header_origins takes http(s) origins, got {url!r}")
    return True


class A2AAgent:
    """A remote agent that speaks A2A (protocol 1.0; 0.3 servers through the SDK's compat).

    Args:
        url: the agent's base URL (its card is at ``<url>/.well-known/agent-card.json``).
        headers: headers sent with every request to the agent's own origin (e.g. an API key
            the agent expects): the scheme, host and port of ``url``. A card naming an
            endpoint on another origin gets them only if that origin is in ``header_origins``
            (a card is the remote's word: it must not be able to send your key elsewhere).
        header_origins: more origins (``https://host[:port]``) the headers may go to.
        timeout: seconds one send may take, the remote agent's work included (past it the
            remote task is canceled and the send raises :class:`A2AError`).
        streaming: stream when the card allows it (progress reaches the tool's events).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        header_origins: Sequence[str] = (),
        timeout: float = 300.0,
        streaming: bool = True,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"A2AAgent needs the agent's http(s) URL, got {url!r}")
        if timeout <= 0:
            raise ConfigurationError(f"timeout must be > 0, got {timeout!r}")
        self.url = url
        self.headers = dict(headers or {})
        self.header_origins = frozenset(
            _origin(o) for o in (url, *header_origins) if _checked_origin(o)
        )
        self._warned: set[str] = set()
        self.timeout = timeout
        self.streaming = streaming
        self._card: Any = None

    def _http(self) -> Any:
        httpx: Any = require("httpx")
        return httpx.AsyncClient(auth=self._with_headers, timeout=self.timeout)

    def _with_headers(self, request: Any) -> Any:
        """``request`` with the configured headers when it goes to one of their origins."""
        if not self.headers:
            return request
        origin = _origin(str(request.url))
        if origin in self.header_origins:
            request.headers.update(self.headers)
        elif origin not in self._warned:
            self._warned.add(origin)
            _log.warning(
                "A2A agent %s: not sending its headers to %s, another origin its card named "
                "(add it to A2AAgent(header_origins=...) if it should get them)",
                self.url,
                origin,
            )
        return request

    @property
    def name(self) -> str:
        """The card's name once it is known, else the URL."""
        return str(self._card.name) if self._card is not None else self.url

    async def card(self) -> Any:
        """The agent's card (an ``a2a.types.AgentCard``), fetched once and kept.

        Raises:
            A2AError: the card could not be fetched or read.
        """
        if self._card is None:
            client: Any = require("a2a.client")
            async with self._http() as http:
                try:
                    self._card = await client.A2ACardResolver(http, self.url).get_agent_card()
                except Exception as exc:
                    raise A2AError(
                        self.url, f"could not reach the A2A agent's card: {_describe(exc)}"
                    ) from exc
        return self._card

    async def send(
        self,
        text: str,
        *,
        context_id: str = "",
        on_update: Callable[[str], Any] | None = None,
    ) -> Reply:
        """Send ``text`` and wait for the agent's reply.

        Args:
            text: the message.
            context_id: continue this conversation ("" starts a new one).
            on_update: called with each progress note ("working: ...") while it streams.

        Returns:
            The :class:`~goagent_py.a2a.Reply`: ``answer()``, ``state``, ``context_id``.

        Raises:
            A2AError: the agent could not be reached, or its task failed, was rejected or was
                canceled (``state`` says which; the message carries what the agent said).
        """
        card = await self.card()
        client_mod: Any = require("a2a.client")
        reply = Reply()
        async with self._http() as http:
            config = client_mod.ClientConfig(streaming=self.streaming, httpx_client=http)
            try:
                client = await client_mod.create_client(card, client_config=config)
            except Exception as exc:  # the card offers no interface the SDK's client speaks
                raise A2AError(self.name, f"cannot talk to the agent: {_describe(exc)}") from exc
            try:
                # The whole send: httpx's timeout bounds each read only, and a remote agent
                # that streams a note every moment would otherwise hold the call forever.
                async with asyncio.timeout(self.timeout):
                    async for response in client.send_message(
                        user_request(text, context_id=context_id)
                    ):
                        note = reply.fold(response)
                        if note is not None and on_update is not None:
                            on_update(note)
            except asyncio.CancelledError:
                if reply.task_id and not reply.finished:
                    await _cancel_remote(client, reply.task_id)
                raise
            except TimeoutError:
                if reply.task_id and not reply.finished:
                    await _cancel_remote(client, reply.task_id)
                raise A2AError(
                    self.name,
                    f"no answer within timeout={self.timeout:g}s (the remote task was canceled)",
                    state=reply.state,
                ) from None
            except Exception as exc:
                raise A2AError(self.name, f"the request failed: {_describe(exc)}") from exc
            finally:
                await client.close()
        if reply.state in _FAILED:
            why = reply.note or "no reason given"
            raise A2AError(self.name, f"{_FAILED[reply.state]}: {why}", state=reply.state)
        return reply

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> A2ATool:
        """This agent as a tool (``prompt`` in, the agent's answer out).

        The name and description default to the card's when it was fetched (``await
        agent.card()`` first), else to ones made from the URL.
        """
        card = self._card
        default = _UNSAFE.sub("_", card.name).strip("_") if card is not None else ""
        if not default:
            default = "a2a_" + _UNSAFE.sub("_", urlsplit(self.url).netloc).strip("_")
        tool_name = name or default[:64]
        if not _NAME_RE.match(tool_name):
            raise ConfigurationError(f"invalid tool name {tool_name!r}: use [A-Za-z0-9_-]{{1,64}}")
        if description is None:
            about = (
                f"{card.description} " if card is not None and card.description else ""
            ) or f"A remote agent at {self.url}. "
            description = about + (
                "Send it a task or question in plain language; it answers in text."
            )
        return A2ATool(self, ToolDefinition(tool_name, description, _PROMPT_SCHEMA))


# Frozen: every A2A tool holds this one schema (see goagent_py/_frozen.py).
_PROMPT_SCHEMA: dict[str, Any] = freeze(
    {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "the task or question, self-contained"}
        },
        "required": ["prompt"],
    }
)


class A2ATool:
    """A remote A2A agent as a goagent-py :class:`~goagent_py.tools.Tool`.

    Each call sends its ``prompt`` in a new conversation and returns the answer; progress
    becomes ``ToolExecutionUpdate`` events; a cancelled call cancels the remote task; a task
    that failed is an error the model reads.
    """

    def __init__(self, agent: A2AAgent, definition: ToolDefinition) -> None:
        self.agent = agent
        self._definition = definition

    @property
    def definition(self) -> ToolDefinition:
        """The name, description and ``prompt`` parameter shown to the model."""
        return self._definition

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Send ``args["prompt"]`` and return the remote agent's answer as text."""
        context = current_tool_context()
        reply = await self.agent.send(
            str(args["prompt"]), on_update=None if context is None else context.report
        )
        text = reply.answer()
        if reply.state in ("input_required", "auth_required"):
            need = "more input" if reply.state == "input_required" else "authorization"
            text = f"[the remote agent needs {need} to go on] {text}"
        return [TextBlock(text)]

    def __repr__(self) -> str:
        return f"A2ATool({self._definition.name!r}, url={self.agent.url!r})"


async def _cancel_remote(client: Any, task_id: str) -> None:
    """Ask the remote agent to cancel ``task_id`` (best effort, bounded, never raises)."""
    types: Any = require("a2a.types")
    with contextlib.suppress(Exception):
        request = types.CancelTaskRequest(id=task_id)
        await asyncio.shield(asyncio.wait_for(client.cancel_task(request), _CANCEL_TIMEOUT))


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
