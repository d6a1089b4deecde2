"""Pipeline: research -> write -> review, three agents in a row, each output feeding the next.

Run it:

    python examples/pipeline.py                                  # scripted models (offline)
    python examples/pipeline.py --provider anthropic:claude-sonnet-4-6 "tidal power"
    python examples/pipeline.py --provider ollama:llama3.2 "tidal power"

The pipeline prints each stage as it finishes (from the stream's ``NodeEnd`` events), then the
reviewed article and the tokens the three agents used together. With ``--provider scripted``
(the default) each agent replays a fixed answer, so the demo needs no network.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from goagent_py import Agent, Usage
from goagent_py.orchestration import FlowResult, Node, NodeEnd, Pipeline, StepFailedError
from goagent_py.testing import ScriptedProvider, text_response

SCRIPTS = {
    "researcher": "Notes: tidal power is predictable; barrages harm estuaries; costs are high.",
    "writer": "Tidal power is as predictable as the moon, but its barrages cost estuaries dear.",
    "reviewer": "APPROVED. Tidal power is as predictable as the moon; its barrages cost "
    "estuaries dear, and its price keeps it rare.",
}


def make_agent(name: str, system_prompt: str, spec: str) -> Agent:
    """An agent on the chosen provider (a scripted one by default)."""
    provider: Any
    if spec == "scripted":
        provider, model = ScriptedProvider(text_response(SCRIPTS[name], usage=Usage(40, 20))), "s"
    else:
        from goagent_py.cli.main import provider_from_spec

        provider, model = provider_from_spec(spec)
    return Agent(
        provider=provider, model=model, name=name, system_prompt=system_prompt, max_iterations=3
    )


def build(spec: str) -> Pipeline:
    """research -> write -> review; the writer and reviewer get their input through a template."""
    researcher = make_agent("researcher", "Collect the key facts as short notes.", spec)
    writer = make_agent("writer", "Write one clear paragraph from the notes you are given.", spec)
    reviewer = make_agent(
        "reviewer", "Correct the paragraph you are given; start with APPROVED when done.", spec
    )
    return Pipeline(
        researcher,
        Node(writer, input=lambda notes: f"Write a paragraph from these notes:\n{notes}"),
        Node(reviewer, input=lambda draft: f"Review and correct this paragraph:\n{draft}"),
        name="article",
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description="A research -> write -> review pipeline.")
    parser.add_argument(
        "--provider", default="scripted", help="scripted, anthropic:MODEL, openai:MODEL, ..."
    )
    parser.add_argument("topic", nargs="?", default="tidal power")
    args = parser.parse_args()
    pipeline = build(args.provider)
    result: FlowResult | None = None
    try:
        async for event in pipeline.stream(args.topic):
            if isinstance(event, NodeEnd) and event.result is not None:
                stage = "/".join(event.path)
                if len(event.path) > 1:
                    print(f"[{stage}] {event.result.text}")
                else:
                    result = event.result
    except StepFailedError as exc:
        print(f"stage {'/'.join(exc.path)} failed: {exc.cause}")
        return
    assert result is not None  # the stream ends with the pipeline's own NodeEnd
    print(f"\nfinal: {result.text}")
    print(f"stages: {' -> '.join(result.trace)}; tokens: {result.usage.total_tokens}")


if __name__ == "__main__":
    asyncio.run(main())
