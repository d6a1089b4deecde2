"""Served approvals (issue 35): a waiting tool call ends the run with an AG-UI interrupt, the
record survives a restart, the page's decision resumes it, "always for this thread" sticks."""

from __future__ import annotations

from typing import Any

from wiping import RAN, wipe, wipes  # tests/wiping.py

from goagent_py import Role, tool, validate_transcript
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.serve import create_app
from goagent_py.serve._threads import session_key
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

answer = wipes()


def make_app(db: str, helpers: Any) -> Any:
    return create_app(helpers.factory_for(FunctionProvider(answer), [wipe]), storage_path=db)


async def _thread(client: Any) -> str:
    r = await client.post("/api/threads", json={})
    assert r.status_code == 201
    return str(r.json()["id"])


async def _stored(db: str, user: str, tid: str) -> list[Any]:
    async with SQLiteStorage(db, session_id=session_key(user, tid)) as storage:
        return await ShortTermMemory(storage).transcript()


async def test_a_waiting_call_survives_a_restart_and_the_decision_resumes_it(
    db: str, helpers: Any
) -> None:
    RAN.clear()
    app = make_app(db, helpers)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "disk"})
        events = helpers.sse_events(r.text)
        user = (await client.get("/api/me")).json().get("user", "local")
    await app.aclose()

    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert finished["outcome"]["type"] == "interrupt"
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["metadata"] == {
        "toolName": "wipe",
        "arguments": {"target": "disk"},
        "kind": "approval",
        "token": interrupt["metadata"]["token"],  # the wait's (durable11)
        "resolved": "",  # not a file tool's call (approve14)
    }
    assert interrupt["metadata"]["token"]
    assert not [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert RAN == []

    again = make_app(db, helpers)  # the server restarted between the question and the click
    async with helpers.client_for(again) as client:
        shown = (await client.get(f"/api/threads/{tid}/messages")).json()
        assert [p["id"] for p in shown["pending"]] == [interrupt["toolCallId"]]
        r = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {interrupt["toolCallId"]: {"decision": "approve"}}},
        )
        assert r.status_code == 200, r.text
        resumed = helpers.sse_events(r.text)
        twice = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {interrupt["toolCallId"]: {"decision": "approve"}}},
        )
        after = (await client.get(f"/api/threads/{tid}/messages")).json()
    await again.aclose()

    results = [e for e in resumed if e["type"] == "TOOL_CALL_RESULT"]
    assert [(e["toolCallId"], e["content"]) for e in results] == [
        (interrupt["toolCallId"], "wiped disk")
    ]
    assert resumed[-1]["type"] == "RUN_FINISHED"
    assert resumed[-1]["result"]["text"] == "after: wiped disk"
    assert twice.status_code == 409
    assert RAN == ["disk"]
    assert after["pending"] == []
    stored = await _stored(db, user, tid)
    assert validate_transcript(stored, allow_pending=False) == []


async def test_deny_through_agui_resume_and_always_for_this_thread(db: str, helpers: Any) -> None:
    RAN.clear()
    app = make_app(db, helpers)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)

        async def ask(text: str) -> list[dict[str, Any]]:
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
            return list(helpers.sse_events(r.text))

        first = (await ask("a"))[-1]["outcome"]["interrupts"][0]["id"]
        r = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"resume": [{"interruptId": first, "status": "cancelled", "payload": {}}]},
        )
        denied = helpers.sse_events(r.text)
        result = next(e for e in denied if e["type"] == "TOOL_CALL_RESULT")
        assert "denied" in result["content"]

        second = (await ask("b"))[-1]["outcome"]["interrupts"][0]["id"]
        r = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {second: {"decision": "approve", "always": True}}},
        )
        assert helpers.sse_events(r.text)[-1]["result"]["text"] == "after: wiped b"

        third = await ask("c")  # approved by the server: always for this thread
        bad = await client.post(f"/api/threads/{tid}/decisions", json={"decisions": []})
    await app.aclose()

    assert third[-1]["type"] == "RUN_FINISHED"
    assert third[-1].get("outcome") is None
    assert third[-1]["result"]["text"] == "after: wiped c"
    assert RAN == ["b", "c"]
    assert bad.status_code == 400


async def test_a_new_message_while_a_call_waits_denies_it_and_runs(db: str, helpers: Any) -> None:
    RAN.clear()
    app = make_app(db, helpers)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        await client.post(f"/api/threads/{tid}/runs", json={"message": "a"})
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "b"})
        events = helpers.sse_events(r.text)
        user = (await client.get("/api/me")).json().get("user", "local")
    await app.aclose()

    results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1
    assert "new message instead of deciding" in results[0]
    assert events[-1]["outcome"]["type"] == "interrupt"  # "b" asks in its turn
    assert RAN == []
    stored = await _stored(db, user, tid)
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.USER,
        Role.ASSISTANT,
    ]
    assert validate_transcript(stored) == []


async def test_the_openai_endpoint_returns_waiting_calls_as_tool_calls(
    db: str, helpers: Any
) -> None:
    RAN.clear()
    app = make_app(db, helpers)
    headers = {"X-Thread-Id": "approvals"}
    async with helpers.client_for(app) as client:
        asked = [{"role": "user", "content": "disk"}]
        r = await client.post(
            "/v1/chat/completions", json={"model": "m", "messages": asked}, headers=headers
        )
        choice = r.json()["choices"][0]
        (call,) = choice["message"]["tool_calls"]
        followed = [
            *asked,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "approve"},
        ]
        done = await client.post(
            "/v1/chat/completions", json={"model": "m", "messages": followed}, headers=headers
        )
        again = await client.post(
            "/v1/chat/completions", json={"model": "m", "messages": followed}, headers=headers
        )
    await app.aclose()

    assert choice["finish_reason"] == "tool_calls"
    assert call["function"] == {"name": "wipe", "arguments": '{"target": "disk"}'}
    answer = done.json()["choices"][0]
    assert answer["finish_reason"] == "stop"
    assert answer["message"]["content"].endswith("after: wiped disk")
    assert 'name="wipe"' in answer["message"]["content"]
    assert RAN == ["disk"]
    # The same request again (a client that lost the answer): answered as done, from the
    # record; nothing runs twice (approve14).
    assert again.status_code == 200, again.text
    assert again.json()["choices"][0]["message"]["content"] == "after: wiped disk"
    assert RAN == ["disk"]


@tool(requires_approval=True)
def shell(command: str) -> str:
    """Run a command.

    Args:
        command: the command line.
    """
    RAN.append(command)
    return f"ran {command}"


def run_commands(request: Any) -> Any:
    last = request.messages[-1]
    if last.role is Role.TOOL:
        return text_response(f"after: {last.text}")
    return tool_call_response(("shell", {"command": last.text}))


async def test_always_for_a_command_tool_approves_that_command_only(db: str, helpers: Any) -> None:
    # "Always" on `ls` approved every later command of the thread (`rm -rf ~` too): the coding
    # agent's "always" remembers the exact command since issue 29; the page did not.
    RAN.clear()
    factory = helpers.factory_for(FunctionProvider(run_commands), [shell])
    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)

        async def ask(text: str) -> list[dict[str, Any]]:
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
            return list(helpers.sse_events(r.text))

        first = (await ask("ls"))[-1]["outcome"]["interrupts"][0]["id"]
        r = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {first: {"decision": "approve", "always": True}}},
        )
        assert helpers.sse_events(r.text)[-1]["result"]["text"] == "after: ran ls"
        again = await ask("ls")  # the same command: approved by the server
        other = await ask("rm -rf ~")  # another one: asked about
    await app.aclose()

    assert again[-1].get("outcome") is None
    assert again[-1]["result"]["text"] == "after: ran ls"
    assert [i["toolCallId"] for i in other[-1]["outcome"]["interrupts"]]
    assert RAN == ["ls", "ls"]


@tool(requires_approval=True)
def edit(path: str, text: str = "") -> str:
    """Edit a file.

    Args:
        path: the file.
        text: what to write.
    """
    RAN.append(f"edit {path}")
    return f"edited {path}"


@tool(requires_approval=True)
def run(argv: list[str], cwd: str = ".") -> str:
    """Run a program.

    Args:
        argv: the program and its arguments.
        cwd: the folder to run it in.
    """
    RAN.append(f"{' '.join(argv)} in {cwd}")
    return "ran"


def call_as_asked(request: Any) -> Any:
    # The user line is the call: "edit PATH" or "run FOLDER WORD...".
    last = request.messages[-1]
    if last.role is Role.TOOL:
        return text_response(f"after: {last.text}")
    verb, first, *rest = last.text.split()
    if verb == "edit":
        return tool_call_response(("edit", {"path": first}))
    return tool_call_response(("run", {"argv": rest, "cwd": first}))


async def test_always_is_scoped_to_the_file_and_the_folder_the_person_saw(
    db: str, helpers: Any
) -> None:
    # review8 on the page's "always for this thread": "always" on edit a.txt approved every
    # file of the tool, and on `rm -rf build` in scratch/ the same argv in any folder.
    RAN.clear()
    factory = helpers.factory_for(FunctionProvider(call_as_asked), [edit, run])
    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)

        async def ask(text: str) -> list[dict[str, Any]]:
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
            return list(helpers.sse_events(r.text))

        async def always(events: list[dict[str, Any]]) -> None:
            first = events[-1]["outcome"]["interrupts"][0]["id"]
            await client.post(
                f"/api/threads/{tid}/decisions",
                json={"decisions": {first: {"decision": "approve", "always": True}}},
            )

        await always(await ask("edit a.txt"))
        same = await ask("edit ./a.txt")  # the same file: approved by the server
        other = await ask("edit .git/hooks/pre-commit")  # another file: asked about
        await always(await ask("run scratch rm -rf build"))
        here = await ask("run scratch/. rm -rf build")  # the same folder
        root = await ask("run . rm -rf build")  # the same argv elsewhere: asked about
    await app.aclose()

    assert same[-1].get("outcome") is None
    assert other[-1]["outcome"]["interrupts"]
    assert here[-1].get("outcome") is None
    assert root[-1]["outcome"]["interrupts"]
    assert RAN == [
        "edit a.txt",
        "edit ./a.txt",
        "rm -rf build in scratch",
        "rm -rf build in scratch/.",
    ]
