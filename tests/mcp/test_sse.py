"""MCP's legacy HTTP+SSE transport (protocol 2024-11-05), both ways, over real localhost HTTP.

The official SDK's ``sse_client`` talks to goagent-py's server, and goagent-py's client talks to
a server built on the SDK's own SSE app: each side is checked against software we did not write.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_server import build_agent
from mcp.server.mcpserver import Context, MCPServer
from mcp_helpers import serving

from goagent_py.errors import ConfigurationError
from goagent_py.mcp import MCPHttp
from goagent_py.mcp.server import serve_agent, sse_app
from goagent_py.messages import TextBlock


def sdk_server() -> Any:
    """A small server written on the SDK alone: one tool that echoes, and reads a header."""
    server = MCPServer("sdk-echo", log_level="WARNING")

    @server.tool()
    async def echo(text: str, ctx: Context) -> str:
        """Echo the text back, with the X-Team header the client sent."""
        request = ctx.request_context.request
        team = request.headers.get("x-team", "") if request is not None else ""
        return f"{text} (team {team})"

    return server


@pytest.mark.slow
async def test_the_sdk_sse_client_asks_our_server() -> None:
    from mcp import Client
    from mcp.client.sse import sse_client

    app = sse_app(serve_agent(build_agent(), expose="both"))
    async with serving(app) as port, Client(sse_client(f"http://127.0.0.1:{port}/sse")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("ask", {"prompt": "What is 2 + 3?"})
        added = await client.call_tool("add", {"a": 40, "b": 2})
    assert names == {"ask", "add"}
    assert not result.is_error
    assert result.content[0].text == "2 + 3 = 5."
    assert added.content[0].text == "42"


@pytest.mark.slow
async def test_our_client_uses_an_sdk_sse_server_for_a_url_ending_in_sse() -> None:
    app = sdk_server().sse_app()
    async with serving(app) as port:
        conn = MCPHttp(f"http://127.0.0.1:{port}/sse", headers={"X-Team": "blue"})
        async with conn:
            assert conn.transport == "sse"
            [echo] = await conn.tools()
            assert echo.definition.name == "echo"
            assert await echo.execute({"text": "hello"}) == [TextBlock("hello (team blue)")]


@pytest.mark.slow
async def test_sse_is_chosen_by_name_for_any_path() -> None:
    app = sdk_server().sse_app(sse_path="/events")
    async with serving(app) as port:
        url = f"http://127.0.0.1:{port}/events"
        async with MCPHttp(url, transport="sse", name="echo") as conn:
            [echo] = await conn.tools()
            assert await echo.execute({"text": "hi"}) == [TextBlock("hi (team )")]


def test_the_transport_follows_the_url_unless_named() -> None:
    assert MCPHttp("http://h/mcp").transport == "streamable-http"
    assert MCPHttp("http://h/sse").transport == "sse"
    assert MCPHttp("http://h/sse/").transport == "sse"
    assert MCPHttp("http://h/sse?key=1").transport == "sse"
    assert MCPHttp("http://h/sse", transport="streamable-http").transport == "streamable-http"
    with pytest.raises(ConfigurationError, match="'sse' or 'streamable-http'"):
        MCPHttp("http://h/mcp", transport="websocket")  # type: ignore[arg-type]


@pytest.mark.needs_extra("temporal")
def test_a_durable_spec_keeps_the_transport_in_the_url() -> None:
    from goagent_py.durable._mcp import MCPServerSpec

    spec = MCPServerSpec.from_connection(MCPHttp("http://h/sse", name="legacy"))
    assert spec.connect().transport == "sse"
    with pytest.raises(ConfigurationError, match="ends in /sse"):
        MCPServerSpec.from_connection(MCPHttp("http://h/events", transport="sse", name="x"))


@pytest.mark.parametrize("bound", ["0.0.0.0", "::", "192.0.2.10"])
async def test_a_server_on_any_address_refuses_foreign_hosts_and_origins(bound: str) -> None:
    # The SDK turns its DNS-rebinding checks on only for a loopback host: `mcp serve --host
    # 0.0.0.0` answered any Host and Origin, so a page in the user's browser could run the
    # agent through a rebound name (review7c). Now every host gets them; the names it is
    # reached by on a network are given with allowed_hosts.
    import httpx

    app = sse_app(serve_agent(build_agent()), host=bound, allowed_hosts=["box.lan"])
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    url = "/messages/?session_id=" + "0" * 32
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
        rebound = await c.post(url, json={}, headers={"host": "evil.example:8000"})
        foreign = await c.post(url, json={}, headers={"origin": "http://evil.example"})
        named = await c.post(url, json={}, headers={"host": "box.lan:8000"})
        local = await c.post(url, json={}, headers={"origin": "http://127.0.0.1:8000"})
    assert [rebound.status_code, foreign.status_code] == [421, 403]
    # Past the checks: the SDK looks the (unknown) session up.
    assert named.status_code not in (421, 403)
    assert local.status_code not in (421, 403)


@pytest.mark.slow
async def test_streamable_http_on_any_address_refuses_foreign_hosts() -> None:
    import httpx

    from goagent_py.mcp.server import http_app

    app = http_app(serve_agent(build_agent()), host="0.0.0.0")
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"accept": "application/json, text/event-stream"}
    async with serving(app) as port, httpx.AsyncClient() as c:
        url = f"http://127.0.0.1:{port}/mcp"
        rebound = await c.post(url, json=body, headers={**headers, "host": "evil.example"})
        local = await c.post(url, json=body, headers=headers)
    assert rebound.status_code == 421
    assert local.status_code not in (421, 403)
