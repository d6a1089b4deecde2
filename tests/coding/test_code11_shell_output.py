"""The shell tool's output as the model and the user see it: counted in characters, and never
split inside a character (code11)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from goagent_py import Agent
from goagent_py.coding import shell_tool
from goagent_py.events import AgentEnd, ToolExecutionUpdate
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")
PY = sys.executable


async def _run(tool: object, **args: object) -> str:
    blocks = await tool.execute(args)  # type: ignore[attr-defined]
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_max_output_chars_counts_characters_not_bytes(tmp_path: Path) -> None:
    # "é" is 2 bytes in UTF-8, "€" 3: a cap of 100 characters keeps 50 at each end.
    sh = shell_tool(tmp_path, max_output_chars=100)
    code = "import sys; sys.stdout.write('é' * 5000 + '€' * 5000)"
    out = await _run(sh, argv=[PY, "-c", code])
    head, _, rest = out.partition("\n[... ")
    marker, _, tail = rest.partition("\n")
    assert head == "é" * 50
    assert tail.removesuffix("\nexit code: 0") == "€" * 50
    assert marker == "9900 characters of output cut ...]"
    assert "\ufffd" not in out


async def test_live_output_never_splits_a_character(tmp_path: Path) -> None:
    # The program writes "a" and the first byte of "é", waits until the user saw that much
    # (the test makes the file "go"), then writes the second byte and "b": two reads, the
    # character split between them.
    code = (
        "import os, sys, time\n"
        "out = sys.stdout.buffer\n"
        "out.write(b'a\\xc3'); out.flush()\n"
        "while not os.path.exists('go'): time.sleep(0.01)\n"
        "out.write(b'\\xa9b'); out.flush()\n"
    )
    sh = shell_tool(tmp_path)
    provider = ScriptedProvider(tool_call_response(("shell", {"argv": [PY, "-c", code]})), "done")
    agent = Agent(provider=provider, tools=[sh])
    live: list[str] = []
    result = None
    async for ev in agent.stream("run it"):
        update = ev.update if isinstance(ev, ToolExecutionUpdate) else None
        if isinstance(update, dict) and "output" in update:
            live.append(update["output"])
            (tmp_path / "go").touch()
        if isinstance(ev, AgentEnd):
            result = ev.result
    assert result is not None
    assert "".join(live) == "aéb"
    assert all("\ufffd" not in part for part in live)


async def test_a_working_folder_swapped_for_a_link_after_the_check_does_not_lead_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import goagent_py.coding.shell as shell_module
    from goagent_py.coding import CodingToolError

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    real = shell_module.resolve_in_root

    def resolve_then_swap(base: object, path: object) -> Path:
        resolved = real(base, path)  # type: ignore[arg-type]
        if (root / "sub").is_dir() and not (root / "sub").is_symlink():
            (root / "sub").rename(root / "sub.old")  # another process swaps it meanwhile
            (root / "sub").symlink_to(outside)
        return resolved

    monkeypatch.setattr(shell_module, "resolve_in_root", resolve_then_swap)
    sh = shell_tool(root)
    # Refused: the folder opened is not the one checked (it now leads outside the root).
    with pytest.raises(CodingToolError, match="refused"):
        await _run(sh, argv=[PY, "-c", "import os; print(os.getcwd())"], cwd="sub")


async def test_a_nul_byte_in_a_command_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    from goagent_py.coding import ApprovalPolicy, CodingToolError
    from goagent_py.messages import ToolCall

    asked: list[object] = []
    sh = shell_tool(tmp_path, allow_shell=True)
    policy = ApprovalPolicy([sh], ask=lambda r: asked.append(r) or "allow")
    for args in ({"argv": ["echo", "a\x00b"]}, {"command": "echo a\x00b"}):
        reason = await policy(ToolCall("c1", "shell", args))
        assert reason is not None
        assert "NUL" in reason
        with pytest.raises(CodingToolError, match="NUL"):
            await _run(sh, **args)
    assert asked == []


async def test_an_argument_list_too_long_is_a_clear_error(tmp_path: Path) -> None:
    from goagent_py.coding import CodingToolError

    sh = shell_tool(tmp_path)
    with pytest.raises(CodingToolError, match="cannot run"):
        await _run(sh, argv=["echo", "x" * 300_000])  # past Linux's 128 KiB per argument


async def test_arguments_no_program_can_take_are_clear_errors(tmp_path: Path) -> None:
    from goagent_py.coding import CodingToolError

    sh = shell_tool(tmp_path)
    with pytest.raises(CodingToolError, match="lone surrogate"):
        await _run(sh, argv=["echo", "\ud800"])
    with pytest.raises(CodingToolError, match="not a directory of the workspace"):
        await _run(sh, argv=["ls"], cwd="x" * 5000)  # was: a bare OSError (name too long)


async def test_a_shell_call_runs_in_the_folder_it_was_approved_in(tmp_path: Path) -> None:
    from goagent_py.coding import ApprovalPolicy, ApprovalRequest

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "other").mkdir()

    def ask(request: ApprovalRequest) -> str:
        # While the user reads the question, a process makes "sub" a link to "other".
        (root / "sub").rename(root / "sub.old")
        (root / "sub").symlink_to("other")
        return "allow"

    sh = shell_tool(root)
    call = ("shell", {"argv": [PY, "-c", "open('ran-here', 'w')"], "cwd": "sub"})
    provider = ScriptedProvider(tool_call_response(call), "done")
    agent = Agent(provider=provider, tools=[sh], before_tool_call=ApprovalPolicy([sh], ask=ask))
    await agent.run("run it")
    # was: it ran in "other", a folder nobody was asked about
    assert not (root / "other" / "ran-here").exists()
    result = next(m for m in provider.requests[-1].messages if m.role.value == "tool")
    assert "not to the folder it named when the call was checked" in result.text


async def test_a_blocked_calls_folder_does_not_hold_a_later_call_with_the_same_id(
    tmp_path: Path,
) -> None:
    from goagent_py.coding import ApprovalPolicy, ApprovalRequest
    from goagent_py.messages import ToolCall

    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    answers = iter(["deny", "allow"])

    def ask(request: ApprovalRequest) -> str:
        return next(answers)

    sh = shell_tool(root)
    policy = ApprovalPolicy([sh], ask=ask)
    touch = [PY, "-c", "open('ran-here', 'w')"]
    for cwd in ("a", "b"):  # the same call id in both runs, as models do
        call = ToolCall("call_1", "shell", {"argv": touch, "cwd": cwd})
        provider = ScriptedProvider(tool_call_response(call), "done")
        await Agent(provider=provider, tools=[sh], before_tool_call=policy).run("run it")
    assert not (root / "a" / "ran-here").exists()  # denied
    assert (root / "b" / "ran-here").exists()  # allowed, and run where it said
