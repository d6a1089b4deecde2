"""The coding agent's ApprovalPolicy as a deferred-approval rule on any Agent (issue 35):
what it allows runs, what it denies is denied with its message, what it would ask about waits
for a person's decision."""

from __future__ import annotations

from pathlib import Path

from goagent_py import Agent, Approve, Deny, Role, StopReason, ToolCall, validate_transcript
from goagent_py.coding import ApprovalPolicy, file_tools
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "notes").mkdir(parents=True)
    (root / "secrets").mkdir()
    (root / "src").mkdir()
    (root / "README.md").write_text("hello\n")
    return root


def batch() -> object:
    return tool_call_response(
        ToolCall("r", "read_file", {"path": "README.md"}),
        ToolCall("n", "write_file", {"path": "notes/todo.md", "content": "todo"}),
        ToolCall("s", "write_file", {"path": ".//secrets/key", "content": "x"}),
        ToolCall("m", "write_file", {"path": "src/main.py", "content": "print(1)"}),
    )


def coding_agent(root: Path, provider: ScriptedProvider, db: Path) -> Agent:
    tools = file_tools(root)
    policy = ApprovalPolicy(tools, deny=["*(secrets/**)"], allow=["write_file(notes/**)"])
    memory = ShortTermMemory(storage=SQLiteStorage(db, session_id="s"))
    return Agent(provider=provider, tools=tools, short_term_memory=memory, **policy.deferred())


async def test_what_the_policy_would_ask_about_waits_and_nothing_of_the_batch_runs(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    agent = coding_agent(root, ScriptedProvider(batch()), tmp_path / "chat.db")

    result = await agent.run("set the project up")

    assert result.stop_reason is StopReason.DEFERRED
    assert [(p.id, p.name, p.arguments["path"]) for p in result.pending] == [
        ("m", "write_file", "src/main.py")
    ]
    assert not (root / "notes" / "todo.md").exists()  # the batch waits as a whole
    assert not (root / "src" / "main.py").exists()


async def test_approve_runs_it_allowed_calls_run_denied_ones_get_the_policys_message(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    provider = ScriptedProvider(batch(), "Set up.")
    agent = coding_agent(root, provider, tmp_path / "chat.db")
    await agent.run("set the project up")

    result = await agent.resume({"m": Approve()})

    assert (root / "src" / "main.py").read_text() == "print(1)"
    assert (root / "notes" / "todo.md").read_text() == "todo"
    assert not (root / "secrets" / "key").exists()
    answers = {m.tool_call_id: m for m in provider.requests[-1].messages if m.role is Role.TOOL}
    assert "hello" in answers["r"].text
    assert not answers["n"].is_error
    assert answers["s"].is_error
    assert "write_file is not allowed on secrets/key (denied by policy)" in answers["s"].text
    assert not answers["m"].is_error
    assert result.text == "Set up."
    stored = await agent.options.short_term_memory.transcript()  # type: ignore[union-attr]
    assert validate_transcript(stored, allow_pending=False) == []


async def test_deny_leaves_the_file_unwritten_and_tells_the_model(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    provider = ScriptedProvider(batch(), "Understood.")
    agent = coding_agent(root, provider, tmp_path / "chat.db")
    await agent.run("set the project up")

    await agent.resume({"m": Deny("not in src/ yet")})

    assert not (root / "src" / "main.py").exists()
    answer = next(m for m in provider.requests[-1].messages if m.tool_call_id == "m")
    assert answer.is_error
    assert "not in src/ yet" in answer.text


async def test_a_policy_that_allows_everything_here_never_waits(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    tools = file_tools(root)
    policy = ApprovalPolicy(tools, allow=["write_file(src/**)"])
    provider = ScriptedProvider(
        tool_call_response(ToolCall("m", "write_file", {"path": "src/a.py", "content": "a"})),
        "Done.",
    )
    agent = Agent(provider=provider, tools=tools, **policy.deferred())

    result = await agent.run("write a")

    assert result.stop_reason is StopReason.END_TURN
    assert (root / "src" / "a.py").read_text() == "a"
