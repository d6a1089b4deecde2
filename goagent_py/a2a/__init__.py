"""A2A (Agent2Agent) for goagent-py, on the official ``a2a-sdk`` (``pip install
"goagent-py[a2a]"``; protocol 1.0, SDK 1.3).

Server: :func:`a2a_app` serves an agent (agent card, send, stream, tasks with cancel) as an
ASGI app; :func:`run_a2a` runs it. Client: :class:`A2AAgent` calls a remote agent, and
``A2AAgent(url).as_tool()`` makes it a tool of yours. The SDK is imported only when an app is
built or an agent is called; the mapping between the two worlds is in one module
(:mod:`goagent_py.a2a._mapping`).
"""

from goagent_py.a2a._mapping import Reply
from goagent_py.a2a.client import A2AAgent, A2ATool
from goagent_py.a2a.errors import A2AError
from goagent_py.a2a.server import a2a_app, run_a2a

__all__ = ["A2AAgent", "a2a_app", "A2AError", "A2ATool", "Reply", "run_a2a"]
