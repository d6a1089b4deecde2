"""The goagent-py command: argument handling, the REPL's behaviour, bad input, exit codes.

Fast tests drive the REPL in-process through a real pipe with a scripted provider; the slow
ones run the real command in subprocesses on the embedded local model.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import goagent_py.cli._common as cli_common
from goagent_py.cli import main as cli
from goagent_py.errors import ToolArgumentsError
from goagent_py.memory import SQLiteStorage
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

ROOT = Path(__file__).resolve().parent.parent


# -- pure parts ------------------------------------------------------------------------------


def test_parse_provider() -> None:
    assert cli_common.parse_provider("anthropic:claude-x") == ("anthropic", "claude-x")
    assert cli_common.parse_provider("local") == ("local", cli_common.DEFAULT_MODELS["local"])
    assert cli_common.parse_provider("OpenAI") == ("openai", cli_common.DEFAULT_MODELS["openai"])
    with pytest.raises(cli.UsageError, match="use anthropic:MODEL"):
        cli_common.parse_provider("gemini:pro")


async def test_calculator_is_safe_and_correct() -> None:
    assert (await cli.calculator.execute({"expression": "2 * (3 + 4)"}))[0].text == "14"  # type: ignore[union-attr]
    assert (await cli.calculator.execute({"expression": "sqrt(16) / 8"}))[0].text == "0.5"  # type: ignore[union-attr]
    for bad in ("__import__('os').system('x')", "open('/etc/passwd')", "9 ** 99999", "a"):
        refused = r"unsupported|exponent|not an arithmetic|pattern"
        with pytest.raises((ValueError, ToolArgumentsError), match=refused):
            await cli.calculator.execute({"expression": bad})


async def test_current_time_rejects_unknown_zones() -> None:
    assert "T" in (await cli.current_time.execute({}))[0].text  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="unknown time zone"):
        await cli.current_time.execute({"timezone": "Mars/Olympus"})


def test_data_home_honours_goagent_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "h"))
    assert cli.data_home() == tmp_path / "h"


def test_unknown_provider_and_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["chat", "--provider", "nope:x", "--no-memory"]) == cli.EXIT_USAGE
    assert "unknown provider 'nope:x'" in capsys.readouterr().err
    assert cli.main(["frobnicate"]) == cli.EXIT_USAGE


async def test_auto_pick_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_common, "make_provider", lambda vendor, model, base_url=None: vendor)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert (await cli.pick_provider(None)).name == "anthropic"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert (await cli.pick_provider(None)).name == "openai"
    monkeypatch.delenv("OPENAI_API_KEY")

    async def up() -> bool:
        return True

    monkeypatch.setattr(cli_common, "_ollama_up", up)
    assert (await cli.pick_provider(None)).name == "ollama"

    async def down() -> bool:
        return False

    monkeypatch.setattr(cli_common, "_ollama_up", down)
    picked = await cli.pick_provider(None)
    assert (picked.name, picked.reason) == (
        "local",
        "no API key and no Ollama server: the embedded model",
    )


# -- the REPL, in-process --------------------------------------------------------------------


class Harness:
    """Runs ``run_chat`` with stdin on a real pipe and a given provider."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, provider: Any, db: Path) -> None:
        read_fd, self.write_fd = os.pipe()
        self.stdin = os.fdopen(read_fd, "rb", buffering=0)
        monkeypatch.setattr(sys, "stdin", self.stdin)
        monkeypatch.setattr(
            cli_common, "make_provider", lambda vendor, model, base_url=None: provider
        )
        self.embedder: Any = None
        self.long_term: Any = None
        monkeypatch.setattr(cli, "_make_embedder", lambda: self.embedder)

        self.decider: Any = None

        async def long_term(
            path: Path, embedder: Any, closers: list[Any], args: Any, *, decider: Any = None
        ) -> Any:
            self.decider = decider
            if self.long_term is not None:
                self.long_term.decider = decider
            return self.long_term

        monkeypatch.setattr(cli, "_long_term", long_term)
        self.out, self.err = io.StringIO(), io.StringIO()
        self.db = db

    def send(self, data: bytes) -> None:
        os.write(self.write_fd, data)

    def close_input(self) -> None:
        os.close(self.write_fd)

    def start(self, *extra: str) -> asyncio.Task[int]:
        if "--small-model" not in extra:
            extra = ("--small-model", "off", *extra)
        args = cli.build_parser().parse_args(
            ["chat", "--provider", "local", "--db", str(self.db), "--session", "t", *extra]
        )
        console = cli.Console(self.out, self.err, interactive=False)
        return asyncio.ensure_future(cli.run_chat(args, console))


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def make(provider: Any) -> Harness:
        h = Harness(monkeypatch, provider, tmp_path / "chat.db")
        made.append(h)
        return h

    yield make
    for h in made:
        h.stdin.close()


async def test_piped_lines_are_answered_and_stored(harness: Any) -> None:
    h = harness(
        ScriptedProvider(
            tool_call_response(("calculator", {"expression": "6*7"})), "It is 42.", "Bye."
        )
    )
    h.send(b"what is 6*7?\n\n   \nthanks\n")
    h.close_input()
    assert await h.start() == cli.EXIT_OK
    assert h.out.getvalue().split() == ["It", "is", "42.", "Bye."]
    assert "[tool] calculator(expression='6*7')" in h.err.getvalue()
    assert "[tool] -> ok: 42" in h.err.getvalue()
    stored = await SQLiteStorage(h.db, session_id="t").load()
    assert [m.role for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]


async def test_binary_input_is_refused_and_the_session_continues(harness: Any) -> None:
    h = harness(ScriptedProvider("fine"))
    h.send(b"\xff\xfe\x00garbage\nhello\n")
    h.close_input()
    assert await h.start() == cli.EXIT_TURN_FAILED
    assert "input is not UTF-8 text; line skipped" in h.err.getvalue()
    assert h.out.getvalue().strip() == "fine"


async def test_slash_commands(harness: Any) -> None:
    h = harness(ScriptedProvider("one"))
    h.send(b"hi\n/sessions\n/memory\n/bogus\n/reset\n/help\n/exit\nnever read\n")
    assert await h.start() == cli.EXIT_OK
    out = h.out.getvalue()
    assert "t\n" in out  # the session list
    assert "(long-term memory is off" in out  # and why (chat11)
    assert "unknown command /bogus" in out
    assert "(this session's conversation is forgotten)" in out
    assert "/memory" in out  # the help text
    assert await SQLiteStorage(h.db, session_id="t").load() == []


async def test_provider_failure_keeps_the_session_and_sets_the_exit_code(harness: Any) -> None:
    h = harness(ScriptedProvider(RuntimeError("connection refused"), "recovered"))
    h.send(b"first\nsecond\n")
    h.close_input()
    assert await h.start() == cli.EXIT_TURN_FAILED
    assert "connection refused" in h.err.getvalue()
    assert "recovered" in h.out.getvalue()
    stored = await SQLiteStorage(h.db, session_id="t").load()
    # a session records the user's message as the turn starts: the failed one stays on record
    assert [m.text for m in stored] == ["first", "second", "recovered"]


class SlowProvider:
    """Answers the first request only after a long wait (so it can be interrupted)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.calls = 0

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            await asyncio.sleep(3600)
        return text_response(f"answer to {request.messages[-1].text}")


async def test_ctrl_c_aborts_the_turn_and_the_next_turn_works(harness: Any) -> None:
    provider = SlowProvider()
    h = harness(provider)
    task = h.start()
    h.send(b"slow question\n")
    await asyncio.wait_for(provider.started.wait(), 10)
    os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends
    h.send(b"next question\n")
    h.close_input()
    assert await asyncio.wait_for(task, 10) == cli.EXIT_OK
    assert "(turn aborted and recorded as such; /continue resumes it)" in h.err.getvalue()
    assert "answer to next question" in h.out.getvalue()
    conn = sqlite3.connect(h.db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    stored = await SQLiteStorage(h.db, session_id="t").load()
    assert [m.text for m in stored] == [
        "slow question",
        "next question",
        "answer to next question",
    ]


async def test_continue_resumes_an_aborted_turn(harness: Any) -> None:
    provider = SlowProvider()
    h = harness(provider)
    task = h.start()
    h.send(b"slow question\n")
    await asyncio.wait_for(provider.started.wait(), 10)
    os.kill(os.getpid(), signal.SIGINT)
    h.send(b"/continue\n")
    h.close_input()
    assert await asyncio.wait_for(task, 10) == cli.EXIT_OK
    assert "answer to slow question" in h.out.getvalue()
    stored = await SQLiteStorage(h.db, session_id="t").load()
    assert [m.text for m in stored] == ["slow question", "answer to slow question"]


@pytest.mark.needs_extra("local")
def test_unusable_database_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "chat.db"
    bad.write_bytes(b"this is not a database" * 100)
    code = cli.main(["chat", "--provider", "local", "--db", str(bad)])
    assert code == cli.EXIT_DATABASE
    assert "goagent-py:" in capsys.readouterr().err


# -- the real command on the embedded model (slow) -------------------------------------------


def _run(
    args: list[str], stdin: str, home: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOAGENT_HOME": str(home)}
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "goagent_py", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


@pytest.mark.slow
@pytest.mark.needs_extra("local", "vector")
def test_a_fact_told_in_one_process_is_recalled_in_the_next(tmp_path: Path) -> None:
    first = _run(["chat", "--session", "ada"], "My cat is called Archimedes.\n", tmp_path)
    assert first.returncode == 0, first.stderr
    assert "provider local" in first.stderr
    second = _run(["chat", "--session", "ada"], "What is my cat called?\n/memory\n", tmp_path)
    assert second.returncode == 0, second.stderr
    recalled = [line for line in second.stdout.splitlines() if line.startswith("[")]
    assert recalled, second.stdout
    assert "My cat is called Archimedes." in recalled[0]
    history = asyncio.run(SQLiteStorage(tmp_path / "chat.db", session_id="ada").load())
    texts = [m.text for m in history]
    assert texts[0] == "My cat is called Archimedes."
    assert "What is my cat called?" in texts


@pytest.mark.slow
@pytest.mark.needs_extra("local", "vector")
def test_rag_index_then_ask_cites_the_right_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text(
        "# Deploying\n\nRun `make release` to build the release bundle. The deploy job "
        "uploads the bundle to the staging bucket and restarts the workers.\n"
    )
    (docs / "cooking.md").write_text(
        "# Pancakes\n\nMix flour, eggs and milk. Fry each pancake for two minutes a side.\n"
    )
    (docs / "errors.md").write_text(
        "# Error codes\n\nE1042 means the license key expired. Renew it in the admin panel.\n"
    )
    db = tmp_path / "rag.db"
    index = ["rag", "index", str(docs), "--db", str(db), "--root", str(tmp_path)]
    indexed = _run(index, "", tmp_path)
    assert indexed.returncode == 0, indexed.stderr
    assert "indexed 3 documents" in indexed.stdout
    assert "indexing [" in indexed.stderr  # the progress bar
    again = _run(index, "", tmp_path)
    assert "0 chunks written" in again.stdout
    answer = _run(["rag", "ask", "What does error E1042 mean?", "--db", str(db)], "", tmp_path)
    assert answer.returncode == 0, answer.stderr
    # The sources the answer's sentences rest on, or an honest "not in the documents" when the
    # model's answer rests on none of the passages.
    if "Sources:" in answer.stdout:
        listed = answer.stdout.split("Sources:")[1].strip().splitlines()
        assert "docs/errors.md" in listed[0], answer.stdout
    else:
        assert answer.stdout.strip() == _cli_rag_not_in_index(), answer.stdout
    assert "score" not in answer.stdout
    unanswerable = _run(
        ["rag", "ask", "Who won the 1998 football world cup?", "--db", str(db)], "", tmp_path
    )
    assert (
        unanswerable.stdout.strip()
        == "The indexed documents do not contain the answer to this question."
    )
    (docs / "cooking.md").unlink()
    pruned = _run(index, "", tmp_path)
    assert "1 documents removed" in pruned.stdout
    missing = _run(["rag", "ask", "x", "--db", str(tmp_path / "none.db")], "", tmp_path)
    assert missing.returncode == cli.EXIT_USAGE
    assert "run 'goagent-py rag index" in missing.stderr


def _cli_rag_not_in_index() -> str:
    from goagent_py.cli._rag import NOT_IN_INDEX

    return NOT_IN_INDEX


# -- base URL, the small-model kit, memory defaults --------------------------------------------


def test_base_url_needs_an_openai_compatible_vendor(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["chat", "--provider", "anthropic", "--base-url", "http://x/v1", "--no-memory"])
    assert code == cli.EXIT_USAGE
    assert "--base-url works with openai:MODEL" in capsys.readouterr().err


async def test_base_url_makes_an_unstreamed_one_round_openai_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from goagent_py.providers.openai import OpenAIProvider

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    picked = await cli.pick_provider("openai:smollm2", "http://127.0.0.1:9/v1")
    assert (picked.name, picked.model, picked.small) == ("openai", "smollm2", True)
    inner = picked.provider.provider  # limit_tool_rounds(OpenAIProvider(...), 1)
    assert isinstance(inner, OpenAIProvider)
    assert inner.base_url == "http://127.0.0.1:9/v1"
    assert picked.provider.rounds == 1
    await picked.provider.aclose()


async def test_openai_base_url_is_picked_when_no_key_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli_common, "make_provider", lambda vendor, model, base_url=None: vendor)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    picked = await cli.pick_provider(None)
    assert picked.name == "openai"
    assert "OPENAI_BASE_URL is set" in picked.reason
    assert picked.small


async def test_small_model_kit_offers_no_tool_for_chit_chat_and_answers_from_results(
    harness: Any,
) -> None:
    from goagent_py.testing import FakeEmbedder

    provider = ScriptedProvider(
        "Hello there!", tool_call_response(("calculator", {"expression": "6 * 7"}))
    )
    h = harness(provider)
    h.embedder = FakeEmbedder(64)
    h.send(b"hi, nice day\nwhat is 6 * 7\n")
    h.close_input()
    assert await h.start("--small-model", "on") == cli.EXIT_OK
    assert provider.requests[0].tools == []
    assert [t.name for t in provider.requests[1].tools] == ["calculator"]
    assert len(provider.requests) == 2  # the answer came from the result, not the model
    assert h.out.getvalue().splitlines() == ["Hello there!", "6 * 7 = 42"]


async def test_a_tool_error_is_shown_in_the_turn_not_logged(
    harness: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    provider = ScriptedProvider(
        tool_call_response(("current_time", {"timezone": "Mars/Olympus"})), "Sorry."
    )
    h = harness(provider)
    h.send(b"what time is it on mars\n")
    h.close_input()
    assert await h.start() == cli.EXIT_OK
    assert "[tool] current_time failed:" in h.err.getvalue()
    assert "unknown time zone 'Mars/Olympus'" in h.err.getvalue()
    assert "tool dispatch failed" not in capfd.readouterr().err


async def test_long_term_memory_keeps_the_users_statements_only(harness: Any) -> None:
    from goagent_py.memory.long_term import LongTermMemory
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.messages import TextBlock
    from goagent_py.testing import FakeEmbedder

    h = harness(ScriptedProvider("You live in Paris.", "Nice!"))
    h.embedder = FakeEmbedder(64)
    memory = LongTermMemory(h.embedder, InMemoryVectorStore(), score_threshold=-1.0)
    h.long_term = memory
    h.send(b"Where do I live?\nI live in Lisbon with my cat.\n")
    h.close_input()
    assert await h.start() == cli.EXIT_OK
    found = await memory.retrieve([TextBlock("live")], top_k=10, session="goagent-chat")
    assert [m.message.text for m in found] == ["I live in Lisbon with my cat."]


def test_memory_flags_have_documented_defaults() -> None:
    args = cli.build_parser().parse_args(["chat"])
    assert (args.remember, args.recall_threshold, args.small_model) == ("statements", 0.3, "auto")
    assert args.memory_decider == "rules"


# -- the clock says which zone its time is in (issue 37) --------------------------------------


async def test_the_clock_names_the_zone_of_its_answer() -> None:
    text = (await cli.current_time.execute({"timezone": "Asia/Tokyo"}))[0].text  # type: ignore[union-attr]
    assert text.endswith("+09:00 (Asia/Tokyo)")
    assert (await cli.current_time.execute({}))[0].text.endswith("+00:00 (UTC)")  # type: ignore[union-attr]


async def test_a_place_in_the_question_sets_the_clocks_zone() -> None:
    """'What time is it in Tokyo?' called the clock with timezone='UTC' (the small model is
    offered required parameters only) and the answer gave UTC as Tokyo's time."""
    from goagent_py.agent import Agent
    from goagent_py.cli._setup import TOOL_TEMPLATES
    from goagent_py.small_models.tool_answers import answer_from_tools

    provider = ScriptedProvider(
        tool_call_response(("current_time", {})),
        tool_call_response(("current_time", {"timezone": "UTC"})),
        tool_call_response(("current_time", {})),
    )
    agent = Agent(provider=answer_from_tools(provider, TOOL_TEMPLATES), tools=[cli.current_time])
    tokyo = (await agent.run("What time is it in Tokyo?")).text
    assert tokyo.startswith("It is ")
    assert tokyo.endswith("+09:00 (Asia/Tokyo).")
    new_york = (await agent.run("what's the time in new york right now?")).text
    assert "(America/New_York)" in new_york
    mars = (await agent.run("What time is it on Mars?")).text
    assert mars.endswith("+00:00 (UTC).")  # no place it knows: UTC, and it says so


# -- /continue after Ctrl-C mid-answer (issue 37) ----------------------------------------------


class HalfAnswerProvider:
    """Streams half an answer, then hangs until the turn is aborted; the next request gets the
    second half."""

    def __init__(self) -> None:
        self.requests: list[CompletionRequest] = []
        self.streaming = asyncio.Event()

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        raise AssertionError("the chat streams")

    async def stream(self, request: CompletionRequest) -> Any:
        from goagent_py.provider import StreamDone, TextDelta

        self.requests.append(request)
        if len(self.requests) == 1:
            yield TextDelta("Once upon a time, a fox")
            self.streaming.set()
            await asyncio.Event().wait()  # until Ctrl-C aborts the turn
        yield TextDelta(" found a golden key.")
        yield StreamDone(text_response(" found a golden key."))


async def test_continue_after_ctrl_c_mid_answer_finishes_the_answer(harness: Any) -> None:
    """The chat promised '/continue resumes it', then printed 'error: continue_(): the
    transcript ends with the assistant's answer...' whenever the abort landed in text."""
    provider = HalfAnswerProvider()
    h = harness(provider)
    task = h.start()
    h.send(b"tell me a story\n")
    await asyncio.wait_for(provider.streaming.wait(), 10)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, mid-answer
    h.send(b"/continue\n/continue\n")
    h.close_input()
    assert await asyncio.wait_for(task, 10) == cli.EXIT_OK
    err = h.err.getvalue()
    assert "(turn aborted and recorded as such; /continue resumes it)" in err
    assert "continue_()" not in err
    assert "error:" not in err
    assert "(nothing to continue: the last answer is complete)" in err  # the second /continue
    out = h.out.getvalue()
    assert "Once upon a time, a fox" in out
    assert "found a golden key." in out
    resumed = provider.requests[1].messages
    assert [m.role for m in resumed] == ["user", "assistant", "user"]
    assert resumed[1].text == "Once upon a time, a fox"
    assert "Once upon a time, a fox" in resumed[2].text  # asked to go on from the partial text


async def test_memory_shows_current_facts_and_their_history(harness: Any) -> None:
    from goagent_py.memory.deciders import RuleDecider
    from goagent_py.memory.long_term import LongTermMemory
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.testing import FakeEmbedder

    h = harness(ScriptedProvider("Nice.", "Nice."))
    h.embedder = FakeEmbedder(64)
    h.long_term = LongTermMemory(h.embedder, InMemoryVectorStore(), score_threshold=-1.0)
    h.send(
        b"I live in Lisbon.\nI moved to Porto last month.\n/memory\n/memory history\n"
        b"/memory recalled\n/memory bogus\n"
    )
    h.close_input()
    assert await h.start() == cli.EXIT_OK
    assert isinstance(h.decider, RuleDecider)
    out = h.out.getvalue().splitlines()
    facts = [line for line in out if line.startswith("[1] I live")]
    assert len(facts) == 1
    assert facts[0].startswith("[1] I live in Porto. (since ")
    history = "\n".join(out)
    assert "- I live in Lisbon. [superseded " in history
    assert "update by rules" in history
    assert "(was: I live in Lisbon.)" in history
    assert "superseded by rules" in history
    assert "by: I live in Porto." in history
    assert "usage: /memory [history|recalled]" in history
    (record,) = await h.long_term.records(session="goagent-chat")
    assert record.source_session == "t"  # the chat's --session


@pytest.mark.parametrize(
    "argv",
    [["serve", "--port", "99999"], ["serve", "--port", "-1"], ["mcp", "serve", "--port", "70000"]],
)
def test_a_port_out_of_range_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # uvicorn given port 99999 printed "open http://127.0.0.1:99999/" and hung.
    assert cli.main(argv) == cli.EXIT_USAGE
    assert "0 to 65535" in capsys.readouterr().err


def test_a_quit_while_the_model_loads_still_commits_the_writes_already_begun(
    tmp_path: Path,
) -> None:
    """The command ends at once while the embedder loads (``exit_if_loading``), but first
    waits, as a normal exit does, for a SQLite write already begun."""
    import subprocess
    import sys
    import textwrap

    db = tmp_path / "chat.db"
    script = textwrap.dedent(
        f"""
        import asyncio, sqlite3, threading, time
        from goagent_py._sqlite import write_in_file
        from goagent_py.cli import _setup

        sqlite3.connect({str(db)!r}).execute("CREATE TABLE t (x)").connection.commit()
        load = threading.Thread(target=time.sleep, args=(60,), daemon=True)
        load.start()
        _setup._LOADS.append(load)

        def slow(conn):
            time.sleep(0.5)
            conn.execute("INSERT INTO t VALUES (1)")

        async def main():
            asyncio.ensure_future(write_in_file({str(db)!r}, slow, busy_timeout=5))
            await asyncio.sleep(0.1)  # begun, not done

        asyncio.run(main())
        _setup.exit_if_loading(7)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True)
    assert done.returncode == 7, done.stderr.decode()
    assert sqlite3.connect(db).execute("SELECT count(*) FROM t").fetchone() == (1,)
