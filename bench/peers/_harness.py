"""Shared measurement protocol for the peerbench scripts (stdlib only).

Every bench/peers/<name>.py script imports this module FIRST (it switches telemetry off and takes
bench/peers/ off sys.path, because script names such as agno.py or goagent_py.py would otherwise
shadow the packages they benchmark), then describes its framework to `bench(...)`:

    bench(
        framework="agno", dist="agno", import_stmt="from agno.agent import Agent",
        mode="async",                    # "async": awaited on one event loop; "sync": plain calls
        make_agent=...,                  # () -> agent, built from the raw `add` function
        make_agent_prebuilt=...,         # () -> agent, from a tool object built once (optional)
        make_run=...,                    # () -> thunk; called UNTIMED before each run; the thunk
                                         #    (one full agent run) is what gets timed
        make_run_async_tool=...,         # same with `async def add` (optional)
        verify=...,                      # () -> None; one untimed run that asserts the shape
    )

Standalone (`python <name>.py`), `bench` measures everything in one go and prints ONE JSON line
on stdout; progress goes to stderr. With PEERBENCH_WORKER=1 the script instead serves
interleave.py over stdin/stdout (JSON lines: warmup / runs / construct / memory / import / quit),
so the coordinator can alternate small blocks between frameworks; the figures come out in the
same JSON schema either way (`build_record`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any

# --- 1. telemetry / tracing off, before any framework is imported -------------------------------
TELEMETRY_OFF = {
    "OPENAI_AGENTS_DISABLE_TRACING": "1",  # openai-agents: no trace export
    "OPENAI_AGENTS_DONT_LOG_MODEL_DATA": "1",
    "OPENAI_AGENTS_DONT_LOG_TOOL_DATA": "1",
    "AGNO_TELEMETRY": "false",  # agno: no usage ping
    "AGNO_DEBUG": "false",
    "LANGCHAIN_TRACING_V2": "false",  # langsmith, old and new names
    "LANGCHAIN_TRACING": "false",
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "HF_HUB_OFFLINE": "1",  # smolagents / huggingface_hub: never reach the hub
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "ANONYMIZED_TELEMETRY": "false",
    "OTEL_SDK_DISABLED": "true",
    "GOAGENT_PY_TELEMETRY": "false",
}
for _k, _v in TELEMETRY_OFF.items():
    os.environ.setdefault(_k, _v)

# --- 2. keep bench/peers/ off sys.path so `import agno` finds the package, not agno.py ------------
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

# --- 3. knobs (environment) ---------------------------------------------------------------------
WARMUP = int(os.environ.get("PEERBENCH_WARMUP", "100"))
RUNS = int(os.environ.get("PEERBENCH_RUNS", "1000"))  # per invocation and variant; >= 300
# PEERBENCH_CLOCK=cpu times runs in the thread's CPU time, not wall time: on a loaded machine a
# longer run is descheduled more often, which wall time counts and CPU time does not (runs that
# hop to other threads are undercounted by it: use it only where a run stays on its thread).
CLOCK = time.thread_time_ns if os.environ.get("PEERBENCH_CLOCK") == "cpu" else time.perf_counter_ns
CONSTRUCT = int(os.environ.get("PEERBENCH_CONSTRUCT", "1000"))  # per invocation; >= 1000
MEM_AGENTS = int(os.environ.get("PEERBENCH_MEM_AGENTS", "1000"))
IMPORT_REPEATS = int(os.environ.get("PEERBENCH_IMPORT_REPEATS", "10"))

PROMPT = "What is 2+3?"
INSTRUCTIONS = "You add numbers with the add tool."
CITY_PROMPT = "Which is the largest city in France, and how many live there?"
EXPECTED = "5"


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


async def add_async(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


add_async.__name__ = "add"  # same tool name for the model in both variants
add_async.__qualname__ = "add"


def log(*args: Any) -> None:
    print("[peerbench]", *args, file=sys.stderr, flush=True)


# --- statistics -------------------------------------------------------------------------------
def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def summary_us(ns: list[int]) -> dict[str, float]:
    s = sorted(x / 1000.0 for x in ns)
    return {
        "median": round(statistics.median(s), 1),
        "p90": round(percentile(s, 90), 1),
        "min": round(s[0], 1),
        "mean": round(statistics.fmean(s), 1),
    }


# --- the measured parts ---------------------------------------------------------------------------
def _check(result: Any) -> None:
    text = result if isinstance(result, str) else str(result)
    if text.strip() != EXPECTED:
        raise AssertionError(f"run returned {result!r}, expected {EXPECTED!r}")


async def _time_runs_async(
    make_run: Callable[[], Callable[[], Awaitable[Any]]], n: int
) -> list[int]:
    out: list[int] = []
    clock = CLOCK
    for _ in range(n):
        thunk = make_run()
        t0 = clock()
        result = await thunk()
        t1 = clock()
        _check(result)
        out.append(t1 - t0)
    return out


def _time_runs_sync(make_run: Callable[[], Callable[[], Any]], n: int) -> list[int]:
    out: list[int] = []
    clock = CLOCK
    for _ in range(n):
        thunk = make_run()
        t0 = clock()
        result = thunk()
        t1 = clock()
        _check(result)
        out.append(t1 - t0)
    return out


def run_samples(
    mode: str,
    make_run: Callable[[], Callable[[], Any]],
    n: int,
    loop: asyncio.AbstractEventLoop | None = None,
) -> list[int]:
    """n timed runs one after another; async ones on `loop` (one loop for the whole process)."""
    if mode == "async":
        assert loop is not None
        return loop.run_until_complete(_time_runs_async(make_run, n))
    if mode == "sync":
        return _time_runs_sync(make_run, n)
    raise ValueError(f"mode must be 'async' or 'sync', not {mode!r}")


def construct_samples(make_agent: Callable[[], Any], n: int) -> list[int]:
    clock = time.perf_counter_ns
    ns: list[int] = []
    for _ in range(n):
        t0 = clock()
        agent = make_agent()
        t1 = clock()
        ns.append(t1 - t0)
        del agent  # freeing happens outside the timed region
    return ns


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_per_agent(make_agent: Callable[[], Any]) -> dict[str, float]:
    """tracemalloc delta of MEM_AGENTS live agents / MEM_AGENTS (plus an RSS cross-check).

    tracemalloc sees only allocations made through Python's allocators; memory that extension
    modules allocate themselves (e.g. pydantic-core's Rust validators) is invisible to it, which
    is why the RSS delta is reported next to it.
    """
    make_agent()
    # RSS first (no tracemalloc overhead in the process image)
    gc.collect()
    rss0 = _rss_bytes()
    keep = [make_agent() for _ in range(MEM_AGENTS)]
    gc.collect()
    rss1 = _rss_bytes()
    del keep
    gc.collect()
    # tracemalloc
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    keep = [make_agent() for _ in range(MEM_AGENTS)]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del keep
    gc.collect()
    return {
        "bytes_per_agent": round((after - before) / MEM_AGENTS),
        "rss_bytes_per_agent": round((rss1 - rss0) / MEM_AGENTS),
    }


def import_samples(import_stmt: str, n: int) -> list[float]:
    """Wall ms of `import_stmt` in n fresh interpreters (interpreter start-up itself excluded)."""
    code = (
        "import time\n"
        "t0 = time.perf_counter()\n"
        f"{import_stmt}\n"
        "t1 = time.perf_counter()\n"
        "print(repr((t1 - t0) * 1000.0))\n"
    )
    env = os.environ.copy()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # let a warm-up import write any missing .pyc
    env.pop("PEERBENCH_WORKER", None)
    samples: list[float] = []
    with tempfile.TemporaryDirectory() as cwd:  # an empty cwd: nothing local can shadow imports
        for _ in range(n):
            proc = subprocess.run(
                [sys.executable, "-c", code],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"import failed: {import_stmt}\n{proc.stderr[-2000:]}")
            samples.append(float(proc.stdout.strip().splitlines()[-1]))
    return samples


def dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def static_info(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything about a framework's record that is not a measurement."""
    return {
        "framework": spec["framework"],
        "version": dist_version(spec["dist"]),
        "dist": spec["dist"],
        "related_versions": {d: dist_version(d) for d in spec.get("related_dists", ())},
        "entry": spec.get("entry", ""),
        "import_stmt": spec["import_stmt"],
        "mode": spec["mode"],
        "fake_model": spec.get("fake_model", ""),
        "notes": spec.get("notes", ""),
        "python": platform.python_version(),
        "network_isolated": os.environ.get("PEERBENCH_IN_NETNS") == "1",
        "has_async_tool": spec.get("make_run_async_tool") is not None,
        "has_prebuilt": spec.get("make_agent_prebuilt") is not None,
    }


def build_record(
    static: dict[str, Any],
    *,
    runs: list[int],
    runs_async_tool: list[int] | None,
    construct: list[int],
    construct_prebuilt: list[int] | None,
    memory: dict[str, float],
    import_ms: list[float],
    protocol: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    run = summary_us(runs)
    thirds = [runs[i * len(runs) // 3 : (i + 1) * len(runs) // 3] for i in range(3)]
    run["thirds_median"] = [round(statistics.median(t) / 1000.0, 1) for t in thirds if t]
    run_async = summary_us(runs_async_tool) if runs_async_tool else None
    cons = summary_us(construct)
    cons_pre = summary_us(construct_prebuilt) if construct_prebuilt else None
    imp = sorted(import_ms)
    rec: dict[str, Any] = {
        "framework": static["framework"],
        "version": static["version"],
        "run_us_median": run["median"],
        "run_us_p90": run["p90"],
        "construct_us_median": cons["median"],
        "bytes_per_agent": memory["bytes_per_agent"],
        "import_ms_median": round(statistics.median(imp), 1),
        # supplementary
        "run_async_tool_us_median": run_async["median"] if run_async else None,
        "run_async_tool_us_p90": run_async["p90"] if run_async else None,
        "construct_prebuilt_tool_us_median": cons_pre["median"] if cons_pre else None,
        "rss_bytes_per_agent": memory["rss_bytes_per_agent"],
        "run_detail_us": run,
        "run_async_tool_detail_us": run_async,
        "construct_detail_us": cons,
        "import_detail_ms": {"median": round(statistics.median(imp), 1), "min": round(imp[0], 1)},
    }
    rec.update({k: v for k, v in static.items() if k not in rec and not k.startswith("has_")})
    rec["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rec["protocol"] = protocol
    rec["bench_seconds"] = round(time.perf_counter() - started, 1)
    return rec


def _new_loop(mode: str) -> asyncio.AbstractEventLoop | None:
    """The one event loop every async run of this process is awaited on (after verify's own)."""
    if mode != "async":
        return None
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def _protocol(**extra: Any) -> dict[str, Any]:
    return {
        "warmup": WARMUP,
        "runs": RUNS,
        "constructions": CONSTRUCT,
        "mem_agents": MEM_AGENTS,
        "import_repeats": IMPORT_REPEATS,
        **extra,
    }


def bench(**spec: Any) -> dict[str, Any] | None:
    """Measure one framework (see the module docstring for the arguments)."""
    for key in ("framework", "dist", "import_stmt", "mode", "make_agent", "make_run", "verify"):
        if key not in spec:
            raise TypeError(f"bench() needs {key}=")
    if os.environ.get("PEERBENCH_WORKER") == "1":
        _serve(spec)
        return None
    started = time.perf_counter()
    name, mode = spec["framework"], spec["mode"]
    make_run, make_run_async = spec["make_run"], spec.get("make_run_async_tool")
    make_agent, make_pre = spec["make_agent"], spec.get("make_agent_prebuilt")
    log(f"{name}: verify")
    spec["verify"]()
    loop = _new_loop(mode)
    log(f"{name}: runs warmup={WARMUP} runs={RUNS}")
    gc.collect()
    run_samples(mode, make_run, WARMUP, loop)
    gc.collect()
    runs = run_samples(mode, make_run, RUNS, loop)
    runs_async = None
    if make_run_async is not None:
        log(f"{name}: runs (async tool)")
        run_samples(mode, make_run_async, WARMUP, loop)
        gc.collect()
        runs_async = run_samples(mode, make_run_async, RUNS, loop)
    log(f"{name}: construct x{CONSTRUCT}")
    construct_samples(make_agent, min(100, CONSTRUCT))
    gc.collect()
    construct = construct_samples(make_agent, CONSTRUCT)
    construct_pre = None
    if make_pre is not None:
        construct_samples(make_pre, min(100, CONSTRUCT))
        gc.collect()
        construct_pre = construct_samples(make_pre, CONSTRUCT)
    log(f"{name}: memory x{MEM_AGENTS}")
    mem = memory_per_agent(make_agent)
    log(f"{name}: import x{IMPORT_REPEATS}")
    import_samples(spec["import_stmt"], 1)  # warm the .pyc and page caches
    imp = import_samples(spec["import_stmt"], IMPORT_REPEATS)
    rec = build_record(
        static_info(spec),
        runs=runs,
        runs_async_tool=runs_async,
        construct=construct,
        construct_prebuilt=construct_pre,
        memory=mem,
        import_ms=imp,
        protocol=_protocol(interleaved=False),
        started=started,
    )
    print(json.dumps(rec), flush=True)
    return rec


def _serve(spec: dict[str, Any]) -> None:
    """Worker mode for interleave.py: one JSON command per stdin line, one JSON reply per line."""
    proto = os.fdopen(os.dup(1), "w")  # the protocol channel is the real stdout ...
    os.dup2(2, 1)  # ... and anything the framework prints goes to stderr
    sys.stdout = sys.stderr

    def send(obj: Any) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    mode = spec["mode"]
    try:
        spec["verify"]()
    except BaseException as e:
        send({"error": f"verify failed: {type(e).__name__}: {e}"})
        raise
    loop = _new_loop(mode)
    send({"hello": static_info(spec)})
    runs_by_variant = {
        "sync_tool": spec["make_run"],
        "async_tool": spec.get("make_run_async_tool"),
        # typed_output.py's scenario: one model call answering text, or a small pydantic model
        "plain": spec.get("make_run_plain"),
        "typed": spec.get("make_run_typed"),
    }
    agents_by_variant = {"fn": spec["make_agent"], "prebuilt": spec.get("make_agent_prebuilt")}
    for line in sys.stdin:
        cmd = json.loads(line)
        c = cmd["cmd"]
        if c == "warmup":
            for fn in runs_by_variant.values():
                if fn is not None:
                    run_samples(mode, fn, WARMUP, loop)
            for fn in agents_by_variant.values():
                if fn is not None:
                    construct_samples(fn, min(100, CONSTRUCT))
            gc.collect()
            send({"ok": True})
        elif c == "runs" and runs_by_variant.get(cmd["variant"]) is not None:
            send({"ns": run_samples(mode, runs_by_variant[cmd["variant"]], cmd["n"], loop)})
        elif c == "construct" and agents_by_variant.get(cmd["variant"]) is not None:
            send({"ns": construct_samples(agents_by_variant[cmd["variant"]], cmd["n"])})
        elif c == "memory":
            send(memory_per_agent(spec["make_agent"]))
        elif c == "import":
            send({"ms": import_samples(spec["import_stmt"], cmd["n"])})
        elif c == "gc":
            gc.collect()
            send({"ok": True})
        elif c == "quit":
            send({"ok": True})
            break
        else:
            send({"error": f"unknown or unsupported command {cmd!r}"})
