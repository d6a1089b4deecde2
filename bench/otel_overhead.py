"""Per-run overhead of goagent_py.otel: uninstrumented vs no-op API vs SDK + in-memory exporter.

Run it::

    python bench/otel_overhead.py            # 2000 runs per variant
    python bench/otel_overhead.py 5000

Each run is a real Agent on a ScriptedProvider: one tool call, then a final answer (two model
calls, one tool call, so four spans when instrumented). Variants are interleaved run by run so
drift hits them alike; the table shows the median and p90 wall time per run in microseconds and
the median's difference from the uninstrumented agent.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from goagent_py import Agent, Hooks, Usage
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool_func

WARMUP = 200


async def add_async(args: dict[str, int]) -> str:
    return str(args["a"] + args["b"])


ADD = tool_func("add", "Add a and b.", None, add_async)


def script() -> ScriptedProvider:
    return ScriptedProvider(
        tool_call_response(("add", {"a": 2, "b": 3}), usage=Usage(50, 10)),
        text_response("5", usage=Usage(70, 2)),
    )


def make_agent(hooks: Hooks) -> Callable[[], Agent]:
    def build() -> Agent:
        return Agent(provider=script(), model="bench", name="bench", tools=[ADD], hooks=hooks)

    return build


async def time_run(build: Callable[[], Agent]) -> float:
    agent = build()  # built outside the timed region
    start = time.perf_counter()
    await agent.run("2 + 3?")
    return (time.perf_counter() - start) * 1e6


async def main(runs: int) -> None:
    exporter = InMemorySpanExporter()
    sdk_tracer = TracerProvider()
    sdk_tracer.add_span_processor(SimpleSpanProcessor(exporter))
    sdk_meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
    variants: dict[str, Callable[[], Agent]] = {
        "uninstrumented": make_agent(Hooks()),
        "no-op API": make_agent(
            instrument(NoOpTracerProvider(), NoOpMeterProvider(), provider_name="bench")
        ),
        "SDK + in-memory": make_agent(
            instrument(sdk_tracer, sdk_meter, provider_name="bench", capture_content=False)
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(WARMUP + runs):
        for name, build in variants.items():
            elapsed = await time_run(build)
            if i >= WARMUP:
                samples[name].append(elapsed)
        if i % 500 == 0:
            exporter.clear()  # keep memory flat; export cost stays in the timings
    base = statistics.median(samples["uninstrumented"])
    print(f"goagent_py.otel overhead, {runs} runs per variant (1 tool call, 2 model calls)")
    print(f"{'variant':<18}{'median µs':>12}{'p90 µs':>12}{'overhead µs':>14}")
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<18}{median:>12.1f}{p90:>12.1f}{median - base:>+14.1f}")
    sdk_tracer.shutdown()
    sdk_meter.shutdown()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    if count < 1000:
        raise SystemExit("use at least 1000 runs for a stable median")
    asyncio.run(main(count))
