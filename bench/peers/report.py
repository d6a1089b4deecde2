"""Merge the peerbench JSON lines into results.json and render RESULTS.md (stdlib only).

usage: python3 report.py RAW_DIR results.json RESULTS.md

RAW_DIR holds one <name>.r<round>.json per script and round (its single JSON line, or an
{"error"} / {"skipped"} record written by run_all.sh). Each metric of a framework is the median of
its rounds; the per-round records are kept under "rounds". Entries already in results.json for
frameworks not run this time are kept (each carries its own measured_at), so a partial run
updates only its rows.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

METRICS = [
    "run_us_median",
    "run_us_p90",
    "construct_us_median",
    "bytes_per_agent",
    "import_ms_median",
    "run_async_tool_us_median",
    "run_async_tool_us_p90",
    "construct_prebuilt_tool_us_median",
    "rss_bytes_per_agent",
]

ORDER = ["goagent_py", "agno", "openai-agents", "langgraph", "pydantic-ai", "smolagents"]


def machine() -> dict[str, object]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    os_name = platform.system()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": os_name,
        "kernel": platform.release(),
        "arch": platform.machine(),
    }


def reference_figures() -> dict[str, float]:
    """Bare-Python costs on this machine, for scale: a to_thread round trip, an awaited call."""
    import asyncio
    import statistics

    def add(a: int, b: int) -> int:
        return a + b

    async def add_async(a: int, b: int) -> int:
        return a + b

    async def main() -> dict[str, float]:
        clock = time.perf_counter_ns
        for _ in range(200):
            await asyncio.to_thread(add, 2, 3)
        hop, aw = [], []
        for _ in range(2000):
            t0 = clock()
            await asyncio.to_thread(add, 2, 3)
            t1 = clock()
            await add_async(2, 3)
            t2 = clock()
            hop.append(t1 - t0)
            aw.append(t2 - t1)
        return {
            "to_thread_roundtrip_us_median": round(statistics.median(hop) / 1000, 1),
            "awaited_call_us_median": round(statistics.median(aw) / 1000, 2),
        }

    return asyncio.run(main())


def load_raw(raw_dir: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in sorted(raw_dir.glob("*.json")):
        text = p.read_text().strip()
        stem = p.name.split(".r")[0]
        if not text:
            rec = {"framework": stem, "error": "no output"}
        else:
            try:
                rec = json.loads(text.splitlines()[-1])
            except json.JSONDecodeError as e:
                rec = {"framework": stem, "error": f"unparsable output: {e}: {text[-300:]}"}
        out.setdefault(rec.get("framework", stem), []).append(rec)
    return out


def aggregate(records: list[dict]) -> dict:
    ok = [r for r in records if "run_us_median" in r]
    if not ok:
        return records[0]
    agg = {
        k: v
        for k, v in ok[0].items()
        if k not in METRICS
        and not k.endswith("_detail_us")
        and k not in ("import_detail_ms", "bench_seconds", "measured_at")
    }
    for k in METRICS:
        vals = [r[k] for r in ok if r.get(k) is not None]
        agg[k] = round(statistics.median(vals), 1) if vals else None
        if len(vals) > 1:
            agg.setdefault("round_spread", {})[k] = [min(vals), max(vals)]
    agg["measured_at"] = max(r.get("measured_at", "") for r in ok)
    agg["rounds_ok"] = len(ok)
    agg["rounds_failed"] = len(records) - len(ok)
    if agg["rounds_failed"]:
        agg["round_errors"] = [r.get("error", "") for r in records if "run_us_median" not in r]
    thirds = (ok[0].get("run_detail_us") or {}).get("thirds_median")
    if len(ok) == 1 and thirds:
        agg["run_thirds_median_us"] = thirds
        agg["round_spread"] = {"run_us_median": [min(thirds), max(thirds)]}
    agg["rounds"] = ok
    return agg


def fmt(v: object, digits: int = 0) -> str:
    if v is None:
        return "–"
    if isinstance(v, (int, float)):
        return f"{v:,.{digits}f}"
    return str(v)


def render(doc: dict) -> str:
    m = doc["machine"]
    results = doc["results"]
    ok = [r for r in results if "run_us_median" in r]
    ok.sort(key=lambda r: r["run_us_median"])
    bad = [r for r in results if "run_us_median" not in r]
    base = next((r for r in ok if r["framework"] == "goagent_py"), None)
    pythons = sorted({r.get("python", "?") for r in ok})
    protos = {json.dumps(r.get("protocol", {}), sort_keys=True) for r in ok}
    proto = json.loads(next(iter(protos))) if len(protos) == 1 else None
    rounds = "/".join(sorted({str(r.get("rounds_ok", 1)) for r in ok})) or "1"

    L: list[str] = []
    L.append("# peerbench — agent-framework overhead, side by side")
    L.append("")
    L.append(
        f"Generated {doc['generated']} by `bench/peers/run_all.sh` (method: `bench/peers/README.md`)."
    )
    L.append("")
    L.append(
        f"Machine: {m['cpu']}, {m['logical_cpus']} logical CPUs, {m['memory_gib']} GiB RAM, "
        f"{m['os']} (kernel {m['kernel']}, {m['arch']}); CPython {', '.join(pythons) or '?'}; "
        "no network beyond the package index, so every model is a local fake."
    )
    if ok and all(all(x.get("network_isolated") for x in r.get("rounds", [r])) for r in ok):
        L.append("")
        L.append(
            "Every script ran inside an empty network namespace (`unshare -n`, only a downed "
            "loopback): none of the measured frameworks needed a network for any of this."
        )
    if proto and proto.get("interleaved"):
        L.append("")
        L.append(
            f"Protocol (interleaved): every framework's script runs as a worker in its own venv; "
            f"after {proto['warmup']} warm-up runs each, blocks of {proto['block']} timed runs go to "
            f"each framework in turn (order rotated every pass) until each has {proto['runs']} timed "
            f"runs per variant; likewise {proto['constructions']} constructions in blocks of "
            f"{proto['construct_block']}, and {proto['import_repeats']} fresh-interpreter imports one "
            f"at a time. Memory: {proto['mem_agents']} live agents, in a fresh worker process."
        )
    elif proto:
        L.append("")
        L.append(
            f"Protocol (sequential): {proto['warmup']} warm-up runs, then {proto['runs']} timed runs; "
            f"{proto['constructions']} timed constructions; {proto['mem_agents']} live agents for "
            f"memory; {proto['import_repeats']} fresh-interpreter imports — per round. Rounds: "
            f"{rounds}, the framework order rotated each round; every figure is the median over "
            "the rounds (per-round values in results.json)."
        )
    ref = doc.get("reference") or {}
    if ref:
        L.append("")
        L.append(
            f"Reference figures (bare CPython on this machine): one `asyncio.to_thread` round trip "
            f"{ref['to_thread_roundtrip_us_median']} µs median; one awaited `async def` call "
            f"{ref['awaited_call_us_median']} µs median."
        )
    L.append("")
    L.append("## Results (sorted by run overhead)")
    L.append("")
    L.append(
        "One run = prompt -> fake model asks for `add(a=2, b=3)` -> the framework runs the tool -> "
        "fake model answers `5`. Construction = an agent with one tool, from the plain `add` function."
    )
    L.append("")
    head = "| framework | version | run median µs | run p90 µs | construct median µs | bytes/agent | import median ms |"
    sep = "|---|---|---:|---:|---:|---:|---:|"
    if base:
        head += " run ÷ goagent_py | construct ÷ goagent_py |"
        sep += "---:|---:|"
    L.append(head)
    L.append(sep)
    for r in ok:
        row = (
            f"| {r['framework']} | {r['version']} | {fmt(r['run_us_median'])} | {fmt(r['run_us_p90'])} | "
            f"{fmt(r['construct_us_median'], 1)} | {fmt(r['bytes_per_agent'])} | {fmt(r['import_ms_median'])} |"
        )
        if base:
            row += (
                f" {r['run_us_median'] / base['run_us_median']:.1f}x |"
                f" {r['construct_us_median'] / base['construct_us_median']:.1f}x |"
            )
        L.append(row)
    L.append("")
    L.append("## Supplementary figures")
    L.append("")
    L.append(
        "| framework | run median µs: range over rounds (or over thirds of the runs) | run median µs, async tool | run p90 µs, async tool | "
        "construct µs, prebuilt tool | RSS bytes/agent | import statement timed | measured |"
    )
    L.append("|---|---|---:|---:|---:|---:|---|---|")
    for r in ok:
        spread = (r.get("round_spread") or {}).get("run_us_median")
        rng = f"{fmt(spread[0])} – {fmt(spread[1])}" if spread else "–"
        L.append(
            f"| {r['framework']} | {rng} | {fmt(r.get('run_async_tool_us_median'))} | "
            f"{fmt(r.get('run_async_tool_us_p90'))} | {fmt(r.get('construct_prebuilt_tool_us_median'), 1)} | "
            f"{fmt(r.get('rss_bytes_per_agent'))} | `{r.get('import_stmt', '')}` | {r.get('measured_at', '')} |"
        )
    L.append("")
    L.append("| framework | entry point | fake model | notes | related versions |")
    L.append("|---|---|---|---|---|")
    for r in ok:
        rel = ", ".join(f"{k} {v}" for k, v in (r.get("related_versions") or {}).items())
        L.append(
            f"| {r['framework']} | `{r.get('entry', '')}` | {r.get('fake_model', '')} | "
            f"{r.get('notes', '')} | {rel} |"
        )
    partial = [r for r in ok if r.get("rounds_failed")]
    if partial:
        L.append("")
        for r in partial:
            errs = " | ".join(" ".join(str(e).split())[:200] for e in r.get("round_errors", []))
            L.append(f"- {r['framework']}: {r['rounds_failed']} round(s) failed: {errs}")
    if bad:
        L.append("")
        L.append("## Not measured")
        L.append("")
        for r in bad:
            why = r.get("skipped") or r.get("error") or "unknown"
            why = " ".join(str(why).split())
            L.append(
                f"- **{r['framework']}**: {'skipped' if 'skipped' in r else 'failed'} — {why[:600]}"
            )
    L.append("")
    L.append(CAVEATS)
    return "\n".join(L) + "\n"


CAVEATS = """## How to read this / caveats

- **Same conversation everywhere**: user prompt, one model turn with one tool call `add(a=2, b=3)`,
  the tool result `5` fed back, one final model turn `5`; each script asserts that shape once
  before timing and checks the answer of every timed run. smolagents can only end a run through its
  `final_answer` tool, so its final turn is a `final_answer("5")` tool call.
- **Fakes**: each framework gets the cheapest faithful double its public API allows — pydantic-ai's
  own `FunctionModel`; langchain-core's own `GenericFakeChatModel` (plus `bind_tools` and a native
  `_agenerate`, which a real async chat model has and the double lacks: without it langchain runs the
  fake through a thread pool); a minimal `Model` subclass for openai-agents, agno and smolagents.
  Each builds a fresh response object per call, as a provider adapter would. The fake's own cost is
  a small share of every figure (for pydantic-ai, `FunctionModel.request` is under 10% of a run in a
  profile). goagent-py's row runs on its own `ScriptedProvider`, which records an independent
  snapshot of every request and response for test assertions — work no peer's fake does (about a
  third of its run); the "goagent_py-minimal" row, when present, is the same run on a minimal
  class implementing the public `Provider` protocol (a fresh response per call, nothing
  recorded), the double the peers get. Ratios stay against the ScriptedProvider row.
- **Sync tool = a thread hop**: `add` is a plain `def`. In async runs pydantic-ai, openai-agents,
  langgraph and agno run sync tools in a worker thread (anyio / `asyncio.to_thread`); smolagents is a
  sync framework and calls it inline. The "async tool" columns use `async def add` instead and so
  leave the hop out. The thread hop alone is given under "Reference figures": noise-level for the
  peers, but most of the budget of a framework that aims at ~100 µs per run.
- **Construction** times `Agent(...)` (or `create_agent(...)`) given the plain `add` function, so
  wrapping it into the framework's tool type is included (openai-agents `function_tool`,
  smolagents `tool` are called inside the timed region; pydantic-ai, agno and langchain accept the
  function directly). "prebuilt tool" gives the same with the tool object built once. The fake model
  instance is shared. agno defers tool parsing to run time, so its construction figure does not
  include any schema work; langchain compiles a LangGraph `StateGraph` per agent; smolagents parses
  its YAML prompt templates in every `ToolCallingAgent()`.
- **Memory per agent** is the tracemalloc delta over 1000 live agents / 1000: it sees only memory
  allocated through Python's allocators. The RSS column is the process-RSS delta for the same
  1000 agents, a cross-check that also catches allocations of native extensions (e.g.
  pydantic-core's Rust validators).
- **Import** is the median wall time of the listed statement in a fresh interpreter (interpreter
  start-up excluded; one untimed import first so the .pyc and page caches are warm). Heavier
  transitive imports (openai SDK, langsmith, rich, jinja2, …) count, as they do for users.
- **Noise**: a shared 2-core VM — back-to-back blocks of 100 identical runs can differ by 1.5x
  and a bare awaited call by 2x between minutes (host noise; pinning to one CPU narrows it but
  changes the thread-hop cost, so it is not used). Hence the interleaving (or, in sequential mode,
  rounds with a rotated order): every framework sees the same slow spells; the range column shows
  what is left of the noise. Default asyncio
  loop (no uvloop), GC enabled with a `gc.collect()` before each phase; p90 is noisier than the
  median (GC pauses, thread scheduling). Compare ratios from one `run_all.sh`, not figures from
  different runs or machines.
- **LangGraph** is measured through `langchain.agents.create_agent`, the LangGraph-built agent
  that replaces `langgraph.prebuilt.create_react_agent` (deprecated since LangGraph 1.0); both
  compile a `StateGraph` with a model node and a `ToolNode`.
- **Not covered**: streaming, real HTTP clients and serialization to a wire format, token counting,
  parallel tool calls, memory/persistence layers, tracing when switched on.
"""


def main() -> int:
    raw_dir, out_json, out_md = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    new = {name: aggregate(recs) for name, recs in load_raw(raw_dir).items()}
    merged: dict[str, dict] = {}
    if out_json.exists():
        try:
            for r in json.loads(out_json.read_text()).get("results", []):
                merged[r["framework"]] = r
        except (json.JSONDecodeError, KeyError, AttributeError):
            pass
    merged.update(new)
    results = sorted(
        merged.values(),
        key=lambda r: (
            ORDER.index(r["framework"]) if r["framework"] in ORDER else 99,
            r["framework"],
        ),
    )
    doc = {
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "reference": reference_figures(),
        "results": results,
    }
    out_json.write_text(json.dumps(doc, indent=2) + "\n")
    out_md.write_text(render(doc))
    print(f"wrote {out_json} and {out_md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
