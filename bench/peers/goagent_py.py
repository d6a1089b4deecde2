"""peerbench: goagent_py (this project) on its own ScriptedProvider — same protocol as the peers.

Placeholder until goagent_py is importable; run_all.sh skips it while `import goagent_py` fails.
Written against the public API:

    import goagent_py as ga
    from goagent_py.testing import ScriptedProvider   # ScriptedProvider(*responses)
    agent = ga.Agent(ga.with_provider(provider), ga.with_tool(add))
    text = await agent.run(prompt)

Fake model: ScriptedProvider replays [tool call add(a=2, b=3), final "5"] and then runs out, so
one agent is given a `Cycling` provider that starts a fresh two-step ScriptedProvider at the
start of every run (the fresh-provider cost is inside the timed run, like the peers' fakes that
build their response objects per call). Set PEERBENCH_GOAGENT_PROVIDER=function to use
`FunctionProvider(fn)` instead (the analogue of pydantic-ai's FunctionModel), or
PEERBENCH_GOAGENT_PROVIDER=minimal for `MinimalProvider`: a small class implementing the public
Provider protocol that builds a fresh response per call from the last message and records
nothing, as the agno and openai-agents fakes do (their minimal Model subclasses). ScriptedProvider
snapshots every request and response for test assertions, work no peer's fake does; report the
two figures side by side, labelled (`goagent_py_minimal.py` runs this variant as its own worker,
framework "goagent_py-minimal").
If the API drifts, fix only the marked ADAPT lines.
"""

import asyncio
import copy
import os

import _harness as h  # before any framework: telemetry off, bench/peers/ off sys.path

import goagent_py as ga
from goagent_py.testing import FunctionProvider, ScriptedProvider


def tool_call_response():
    return ga.CompletionResponse(  # ADAPT
        message=ga.Message(
            role=ga.Role.ASSISTANT,
            content=[],
            tool_calls=[ga.ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})],
        ),
        stop_reason=ga.StopReason.TOOL_USE,
    )


def final_response(text="5"):
    return ga.CompletionResponse(
        message=ga.assistant_message(text), stop_reason=ga.StopReason.END_TURN
    )  # ADAPT


class Cycling:
    """Provider protocol (`async complete(request)`): a fresh 2-step ScriptedProvider per run."""

    def __init__(self):
        self._current = None
        self._left = 0

    @property
    def last_script(self):
        """The ScriptedProvider of the latest run (its `.requests` are independent snapshots)."""
        return self._current

    async def complete(self, request):
        if self._left == 0:
            self._current = ScriptedProvider(tool_call_response(), final_response())
            self._left = 2
        self._left -= 1
        return await self._current.complete(request)

    def __getattr__(self, name):  # anything else the Provider protocol grows: delegate
        if name.startswith("_"):
            raise AttributeError(name)
        if self._current is None:
            self._current = ScriptedProvider(tool_call_response(), final_response())
            self._left = 2
        return getattr(self._current, name)


def _tool_message_text(request):
    for m in reversed(list(request.messages)):  # ADAPT: CompletionRequest.messages
        if (
            getattr(m, "tool_call_id", "") == "call_1"
            or "tool" in str(getattr(m, "role", "")).lower()
        ):
            return getattr(m, "text", None) or str(m)
    return None


def function_fn(request):
    text = _tool_message_text(request)
    return final_response(text) if text is not None else tool_call_response()


class MinimalProvider:
    """The public Provider protocol, nothing more: a fresh response per call, built with the
    public constructors from the request's last message (a tool result -> the final text, else
    the call of add), no recording, no copies. The double the peers get (agno's `CannedModel`,
    openai-agents' `CannedModel`)."""

    async def complete(self, request):
        last = request.messages[-1]
        if last.role == ga.Role.TOOL:
            return final_response(last.text)
        return tool_call_response()


PROVIDER_KIND = os.environ.get("PEERBENCH_GOAGENT_PROVIDER", "scripted")


def make_provider():
    if PROVIDER_KIND == "function":
        return FunctionProvider(function_fn)
    if PROVIDER_KIND == "minimal":
        return MinimalProvider()
    return Cycling()


SHARED_PROVIDER = make_provider()  # construction only; never run


def _tool_option(fn):
    """`with_tool(add)` on the plain function if accepted, else through the `@tool` decorator."""
    try:
        ga.Agent(ga.with_provider(SHARED_PROVIDER), ga.with_tool(fn))
        return lambda f: ga.with_tool(f)
    except Exception:
        return lambda f: ga.with_tool(ga.tool(f))


WITH_TOOL = _tool_option(h.add)
ADD_TOOL = ga.tool(h.add)


def make_agent():
    return ga.Agent(
        ga.with_provider(SHARED_PROVIDER), WITH_TOOL(h.add), ga.with_system_prompt(h.INSTRUCTIONS)
    )


def make_agent_prebuilt():
    return ga.Agent(
        ga.with_provider(SHARED_PROVIDER),
        ga.with_tool(ADD_TOOL),
        ga.with_system_prompt(h.INSTRUCTIONS),
    )


PROVIDER = make_provider()
AGENT = ga.Agent(
    ga.with_provider(PROVIDER), WITH_TOOL(h.add), ga.with_system_prompt(h.INSTRUCTIONS)
)
AGENT_ASYNC_TOOL = ga.Agent(
    ga.with_provider(make_provider()), WITH_TOOL(h.add_async), ga.with_system_prompt(h.INSTRUCTIONS)
)


def _text(out):
    """run() returns the answer text, or a result object carrying it (.text / .output)."""
    if isinstance(out, str):
        return out
    return getattr(out, "text", None) or getattr(out, "output", None) or str(out)


async def _run(agent):
    return _text(await agent.run(h.PROMPT))  # ADAPT: the run entry point


def make_run():
    return lambda: _run(AGENT)


def make_run_async_tool():
    return lambda: _run(AGENT_ASYNC_TOOL)


# -- the typed-output scenario (typed_output.py): one model call, text or a small model ---------

from pydantic import BaseModel  # noqa: E402  (after _harness, as every import here)


class City(BaseModel):
    name: str
    population: int


CITY = {"name": "Paris", "population": 2102650}


def city_fn(request):
    """A final_result call with the city when the run asks for typed output, else the text."""
    if any(t.name == "final_result" for t in request.tools):  # ADAPT: the tool mode's tool
        return ga.CompletionResponse(
            message=ga.Message(
                role=ga.Role.ASSISTANT,
                content=[],
                tool_calls=[ga.ToolCall(id="call_1", name="final_result", arguments=dict(CITY))],
            ),
            stop_reason=ga.StopReason.TOOL_USE,
        )
    return final_response("Paris")


PLAIN_AGENT = ga.Agent(provider=FunctionProvider(city_fn), system_prompt=h.INSTRUCTIONS)
TYPED_AGENT = ga.Agent(
    provider=FunctionProvider(city_fn), system_prompt=h.INSTRUCTIONS, output_type=City
)


async def _output(agent):
    return (await agent.run(h.CITY_PROMPT)).output


async def _checked(agent, expected):
    # The harness checks each run's result against "5" (untimed); this comparison is timed,
    # and the same for every framework.
    output = await _output(agent)
    return h.EXPECTED if output == expected else output


def make_run_plain():
    return lambda: _checked(PLAIN_AGENT, "Paris")


def make_run_typed():
    return lambda: _checked(TYPED_AGENT, City(**CITY))


def verify_typed():
    assert asyncio.run(_output(PLAIN_AGENT)) == "Paris"
    city = asyncio.run(_output(TYPED_AGENT))
    assert isinstance(city, City) and city.model_dump() == CITY, city


class _Recording:
    """Records the requests ``inner`` gets (for verify only: never in a timed run)."""

    def __init__(self, inner):
        self.inner = inner
        self.requests = []

    async def complete(self, request):
        self.requests.append(request)
        return await self.inner.complete(request)


def verify():
    provider = Cycling()
    agent = ga.Agent(
        ga.with_provider(provider), WITH_TOOL(h.add), ga.with_system_prompt(h.INSTRUCTIONS)
    )
    out = asyncio.run(_run(agent))
    requests = list(provider.last_script.requests)  # ADAPT: ScriptedProvider.requests
    if PROVIDER_KIND == "minimal":  # the variant measured: its requests as the loop sent them
        recording = _Recording(MinimalProvider())
        agent = ga.Agent(
            ga.with_provider(recording), WITH_TOOL(h.add), ga.with_system_prompt(h.INSTRUCTIONS)
        )
        out = asyncio.run(_run(agent))
        requests = [copy.deepcopy(r) for r in recording.requests]
        assert requests[1].messages[-1].tool_call_id == "call_1", requests[1]
    assert out == "5", out
    assert len(requests) == 2, requests  # two model calls, the script fully consumed
    assert _tool_message_text(requests[0]) is None, requests[0]
    assert _tool_message_text(requests[1]) == "5", requests[1]  # add ran; its result went back
    verify_typed()


if __name__ == "__main__":
    h.bench(
        framework="goagent_py-minimal" if PROVIDER_KIND == "minimal" else "goagent_py",
        dist="goagent-py",
        related_dists=("pydantic", "pydantic-core", "httpx"),
        import_stmt="import goagent_py",
        entry="goagent_py.Agent(...).run()",
        fake_model={
            "function": "goagent_py.testing.FunctionProvider",
            "minimal": "minimal Provider class (fresh response per call, no recording)",
        }.get(PROVIDER_KIND, "goagent_py.testing.ScriptedProvider, fresh 2-step script per run"),
        mode="async",
        make_agent=make_agent,
        make_agent_prebuilt=make_agent_prebuilt,
        make_run=make_run,
        make_run_async_tool=make_run_async_tool,
        make_run_plain=make_run_plain,
        make_run_typed=make_run_typed,
        verify=verify,
        notes="sync tools run in reused daemon worker threads",
    )
