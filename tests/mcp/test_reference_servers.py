"""The PyPI reference servers mcp-server-time and mcp-server-git, started over stdio."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp_helpers import answer, offered, run_result, tool_results

from goagent_py import Agent
from goagent_py.mcp import MCPStdio, MCPToolError, mcp_tools
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.slow


async def test_time_server_tools_are_listed_and_called_through_an_agent(time_server: str) -> None:
    time = MCPStdio(time_server, ["--local-timezone", "UTC"], prefix="time_")
    p = ScriptedProvider(
        tool_call_response(("time_get_current_time", {"timezone": "Europe/Paris"})),
        "It is evening in Paris.",
    )
    async with Agent(provider=p, model="m", mcp_connectors=[time.connector()]) as agent:
        text = await answer(agent, "What time is it in Paris?")

    assert text == "It is evening in Paris."
    assert offered(p, 0) == {"time_get_current_time", "time_convert_time"}
    [result] = tool_results(p, 1)
    assert not result.is_error
    assert json.loads(result.text)["timezone"] == "Europe/Paris"


async def test_an_unknown_time_zone_is_an_error_result_the_model_reads(time_server: str) -> None:
    time = MCPStdio(time_server)
    p = ScriptedProvider(
        tool_call_response(("get_current_time", {"timezone": "Mars/Olympus_Mons"})),
        "That is not a time zone.",
    )
    async with Agent(provider=p, model="m", mcp_connectors=[time.connector()]) as agent:
        result = await run_result(agent, "What time is it on Mars?")

    assert result.text == "That is not a time zone."  # the run went on
    [tool_result] = tool_results(p, 1)
    assert tool_result.is_error
    assert "Mars/Olympus_Mons" in tool_result.text
    # The server's own words, once, without a wrapper naming an internal exception type.
    assert "Invalid timezone" in tool_result.text
    assert "MCPToolError" not in tool_result.text


async def test_a_direct_call_with_bad_arguments_raises_the_servers_error(time_server: str) -> None:
    async with MCPStdio(time_server) as time:
        [convert] = [t for t in await time.tools() if t.definition.name == "convert_time"]
        with pytest.raises(MCPToolError) as info:
            await convert.execute(
                {"source_timezone": "UTC", "time": "25:99", "target_timezone": "Asia/Tokyo"}
            )
    assert info.value.server == "mcp-server-time"
    assert info.value.tool_name == "convert_time"
    assert "25:99" in info.value.text or "time format" in info.value.text.lower()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (tmp_path / "notes.txt").write_text("first line\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add the notes"], check=True)
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    return tmp_path


async def test_git_server_lists_its_tools_and_answers_through_an_agent(
    git_server: str, repo: Path
) -> None:
    git = MCPStdio(git_server, ["--repository", str(repo)], prefix="git_", deny=["git_reset"])
    p = ScriptedProvider(
        tool_call_response(
            ("git_git_log", {"repo_path": str(repo), "max_count": 5}),
            ("git_git_diff_unstaged", {"repo_path": str(repo)}),
        ),
        "One commit; notes.txt has a new line.",
    )
    async with Agent(provider=p, model="m", mcp_connectors=[git.connector()]) as agent:
        await agent.run("What happened in this repository?")

    names = offered(p, 0)
    assert {"git_git_status", "git_git_log", "git_git_diff_unstaged"} <= names
    assert "git_git_reset" not in names  # deny= filters by the server's names
    assert len(names) == 11  # the git server lists 12 tools
    log, diff = tool_results(p, 1)
    assert not log.is_error
    assert "Add the notes" in log.text
    assert "+second line" in diff.text


async def test_two_servers_with_the_same_tool_names_keep_the_first_servers_tools(
    time_server: str,
) -> None:
    a, b = MCPStdio(time_server, name="a"), MCPStdio(time_server, name="b")
    try:
        # docs/mcp.md, "Name clashes": the later server's tools of the same names are left out.
        tools = await mcp_tools(a, b)
        assert sorted(t.definition.name for t in tools) == ["convert_time", "get_current_time"]
        assert {t.server_name for t in tools} == {"a"}
        b2 = MCPStdio(time_server, name="b2", prefix="b_")
        names = {t.definition.name for t in await mcp_tools(a, b2)}
        assert names == {"get_current_time", "convert_time", "b_get_current_time", "b_convert_time"}
        await b2.aclose()
    finally:
        await a.aclose()
        await b.aclose()
