"""Calculator: an agent that calls a typed tool, and reads a tool error as data.

Run it:

    python examples/calculator.py                       # the embedded local model (offline)
    python examples/calculator.py --provider scripted   # a scripted model: a fixed demo
    python examples/calculator.py --provider anthropic:claude-sonnet-4-6

The scripted model asks for ``calculate(op="div", a=10, b=0)``, reads the division-by-zero
error, then asks for ``7 * 6`` and answers. The embedded model (SmolLM2-135M, from the
``local`` extra) is tiny: it calls the tool, but its arithmetic answers are not to be trusted.
"""

from __future__ import annotations

import argparse
import asyncio
import enum

from goagent_py import Agent, Hooks, MaxIterationsError, ToolCall, ToolResult, tool
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


class Op(enum.StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"


@tool
def calculate(op: Op, a: float, b: float) -> float:
    """Apply an arithmetic operation to two numbers.

    Args:
        op: the operation: add, sub, mul or div.
        a: the left operand.
        b: the right operand.
    """
    if op is Op.DIV and b == 0:
        raise ZeroDivisionError("division by zero")
    return {Op.ADD: a + b, Op.SUB: a - b, Op.MUL: a * b, Op.DIV: a / b if b else 0.0}[op]


def scripted_model() -> ScriptedProvider:
    """A stand-in model that uses the tool the way a real one would."""
    return ScriptedProvider(
        tool_call_response(ToolCall("c1", "calculate", {"op": "div", "a": 10, "b": 0})),
        tool_call_response(ToolCall("c2", "calculate", {"op": "mul", "a": 7, "b": 6})),
        text_response("10 / 0 is undefined, but 7 x 6 = 42."),
    )


def show(result: ToolResult) -> None:
    """Print each tool call as it finishes."""
    status = "error" if result.is_error else "ok"
    text = " ".join(getattr(b, "text", "") for b in result.content)
    print(f"  tool {result.call.name}({result.call.arguments}) -> [{status}] {text}")


async def main() -> None:
    parser = argparse.ArgumentParser(description="An agent with a calculator tool.")
    parser.add_argument(
        "--provider",
        default="local",
        help="scripted, local, anthropic:MODEL, openai:MODEL or ollama:MODEL",
    )
    parser.add_argument("question", nargs="?", default="What is 10 divided by 0, and 7 times 6?")
    args = parser.parse_args()
    if args.provider == "scripted":
        provider, model = scripted_model(), "scripted"
    else:
        from goagent_py.cli.main import provider_from_spec

        provider, model = provider_from_spec(args.provider)
    agent = Agent(
        provider=provider,
        model=model,
        max_iterations=4,
        tools=[calculate],
        system_prompt="You are a careful calculator. Use the tool for arithmetic.",
        hooks=Hooks(on_tool_result=show),
    )
    try:
        result = await agent.run(args.question)
    except MaxIterationsError as exc:
        print(f"no final answer after {exc.iterations} model calls; last: {exc.last_thought}")
        return
    print(f"answer: {result.text}")
    print(f"({result.iterations} model calls, {result.tool_calls} tool calls)")


if __name__ == "__main__":
    asyncio.run(main())
