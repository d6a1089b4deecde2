"""The HTTP endpoints of :func:`goagent_py.serve.create_app` (JSON API, SSE runs, the page,
OpenAI-compatible ``/v1``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from goagent_py._workers import to_thread
from goagent_py.approvals import record_of
from goagent_py.errors import ApprovalError, ConfigurationError
from goagent_py.serve._approvals import check_against, decisions_from_body, pending_json
from goagent_py.serve._cluster import Moved, OwnedElsewhere
from goagent_py.serve._server import (
    COOKIE,
    HttpError,
    Run,
    Server,
    error_body,
    memory_scope,
    prompt_text,
    static_file,
)
from goagent_py.serve._sse import LastChunk, RunStream, frames_of, sse_frame, to_json
from goagent_py.serve._threads import message_json

__all__ = ["table"]

Endpoint = Callable[[Request], Awaitable[Response]]
_TITLE = "New chat"


def _guarded(fn: Endpoint) -> Endpoint:
    async def wrapper(request: Request) -> Response:
        try:
            return await fn(request)
        except OwnedElsewhere as exc:  # serve --workers: the worker that runs it answers
            return Moved(request.scope, [exc.pid])
        except HttpError as exc:
            status, body = error_body(exc.status, exc.message, path=request.url.path, code=exc.code)
            return JSONResponse(body, status_code=status)

    return wrapper


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # OpenAI content parts
        return "".join(
            p.get("text", "") for p in value if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def table(server: Server) -> list[tuple[str, Endpoint, list[str]]]:
    """The routes: (path, endpoint, methods)."""

    def sse(run: Run) -> Response:
        async def frames() -> AsyncIterator[bytes]:
            # One JSON line per event, the ready ones in one chunk; the last batch ends the
            # response in the same write.
            async for batch, last in server.event_batches(run):
                data = frames_of(batch)
                yield LastChunk(data) if last else data

        return RunStream(server, run, frames())

    async def follow(request: Request) -> Response:
        # The thread's run now, from its first event, for a tab or client that did not start
        # it (docs/serve.md, "Several tabs"); leaving stops the run only when nobody else
        # reads it.
        user = await server.user(request)
        thread_id = request.path_params["thread_id"]
        await server.thread(user, thread_id)
        live = server.live.get((user, thread_id))
        run = live.run if live is not None else None
        if run is None:
            raise HttpError(409, "no run in progress in this thread; read its messages")

        # While it reads, the run goes on when the stream that started it is gone (a closed
        # tab): the run stops when its last reader leaves (Server.leave).
        reader = server.join(run)

        async def frames() -> AsyncIterator[bytes]:
            first = True
            async for batch in run.queue.follow():
                if first:  # RUN_STARTED, then where the run goes on from
                    first = False
                    told = run.mapper.following(run.stored_before, run.message)
                    batch = [batch[0], told, *batch[1:]]
                yield frames_of(batch)

        return RunStream(server, run, frames(), reader=reader)

    async def changes(request: Request) -> Response:
        # The changes to the user's threads as they happen (docs/serve.md, "Several tabs"):
        # another tab's or client's run starting and ending, a thread made, renamed, deleted.
        # It opens with "hello": a client reloads what it shows then (what it missed).
        user = await server.user(request)
        queue = server.watch(user)

        async def frames() -> AsyncIterator[bytes]:
            try:
                yield sse_frame('{"type":"hello"}')
                while (event := await queue.get()) is not None:
                    yield sse_frame(to_json(event))
            finally:
                server.unwatch(user, queue)

        return RunStream(server, None, frames())

    async def page(request: Request) -> Response:
        body, media = static_file("index.html")
        return Response(body, media_type=media)

    async def static(request: Request) -> Response:
        body, media = static_file(request.path_params["name"])
        return Response(body, media_type=media, headers={"cache-control": "no-cache"})

    async def me(request: Request) -> Response:
        # Always 200 (the page asks before it knows whether to show the login form; a 401
        # here would log a console error on every visit). Only the no-auth check of the peer
        # address refuses outright, before routing.
        try:
            user = await server.user(request)
        except HttpError as exc:
            return JSONResponse(
                {
                    "authenticated": False,
                    "login": server.auth.requires_login,
                    "error": exc.message,
                }
            )
        # "session": the user came with a login session (the cookie), which the page's
        # Log out ends; without auth the cookie is never read.
        session = server.auth.requires_login and bool(request.cookies.get(COOKIE))
        return JSONResponse({"authenticated": True, "user": user, "session": session})

    async def login(request: Request) -> Response:
        body = await server.body(request)
        # A password's scrypt is ~50 ms of CPU: on the loop, a flood of wrong passwords from
        # anyone stalled every stream (hashlib.scrypt lets go of the GIL in a thread).
        found = await to_thread(server.auth.login, body)
        if found is None:
            raise HttpError(401, "wrong credentials")
        token, seconds = await server.open_session(found)
        response = JSONResponse({"user": found.user})
        response.set_cookie(
            COOKIE,
            token,
            max_age=max(1, int(seconds)),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    async def logout(request: Request) -> Response:
        await server.body(request)  # JSON only, like every POST (a form post is a 415)
        await server.close_session(request.cookies.get(COOKIE, ""))
        response = JSONResponse({"ok": True})
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def threads(request: Request) -> Response:
        user = await server.user(request)
        if request.method == "GET":
            listed = await server.threads.list(user)
            for t in listed:  # a run going on in it (another tab's, another client's)
                t["running"] = server.running(user, t["id"])
            return JSONResponse({"threads": listed})
        body = await server.body(request)
        title = body.get("title", _TITLE)
        if not isinstance(title, str) or len(title) > 200:
            raise HttpError(400, "title must be a string of at most 200 characters")
        made = await server.threads.create(user, title or _TITLE)
        server.changed(user, "created", made["id"])
        return JSONResponse(made, 201)

    async def thread(request: Request) -> Response:
        user = await server.user(request)
        thread_id = request.path_params["thread_id"]
        found = await server.thread(user, thread_id)
        if request.method == "DELETE":
            await server.drop(user, thread_id)
            await server.threads.delete(user, thread_id)
            server.changed(user, "deleted", thread_id)
            return JSONResponse({"deleted": thread_id})
        if request.method == "PATCH":
            body = await server.body(request)
            title = body.get("title")
            if not isinstance(title, str) or not title or len(title) > 200:
                raise HttpError(400, "title must be a non-empty string of at most 200 characters")
            await server.threads.update(user, thread_id, title)
            server.changed(user, "renamed", thread_id, title=title)
            found["title"] = title
        found["running"] = server.running(user, thread_id)
        return JSONResponse(found)

    async def messages(request: Request) -> Response:
        user = await server.user(request)
        thread_id = request.path_params["thread_id"]
        await server.thread(user, thread_id)
        live = await server.live_of(user, thread_id)
        stored = await live.session.agent.options.short_term_memory.transcript()  # type: ignore[union-attr]
        if request.query_params.get("format") == "agui":
            from goagent_py.serve._agui import messages_snapshot

            return JSONResponse(messages_snapshot(stored))
        durations = await server.threads.durations(user, thread_id)
        return JSONResponse(
            {
                "messages": [message_json(m, durations) for m in stored],
                "pending": pending_json(stored),
            }
        )

    async def _message_of(request: Request) -> tuple[str, str, str]:
        user = await server.user(request)
        thread_id = request.path_params["thread_id"]
        body = await server.body(request)
        text = prompt_text(body.get("message"), 'send {"message": "..."} with a non-empty string')
        return user, thread_id, text

    async def run(request: Request) -> Response:
        user, thread_id, text = await _message_of(request)
        found = await server.thread(user, thread_id)
        if found["title"] == _TITLE:
            title = text.strip()[:60]
            await server.threads.update(user, thread_id, title)
            server.changed(user, "renamed", thread_id, title=title)
        started = await server.start_run(user, thread_id, text)
        return sse(started)

    async def decide(request: Request) -> Response:
        # serve/_approvals.py: the person's decisions on the thread's waiting calls.
        user = await server.user(request)
        thread_id = request.path_params["thread_id"]
        body = await server.body(request)
        await server.thread(user, thread_id)
        try:
            decisions = decisions_from_body(body)
            live = await server.live_of(user, thread_id)
            if live.run is not None:
                raise HttpError(409, "a run is in progress in this thread")
            memory = live.session.agent.options.short_term_memory
            assert memory is not None  # a served thread always has its SQLite memory
            check_against(await record_of(memory), decisions)
            started = await server.start_run(user, thread_id, "", decisions=decisions)
        except ApprovalError as exc:
            raise HttpError(409, str(exc)) from exc
        except ConfigurationError as exc:
            raise HttpError(400, str(exc)) from exc
        return sse(started)

    async def steer(request: Request) -> Response:
        user, thread_id, text = await _message_of(request)
        await server.thread(user, thread_id)
        live = server.live.get((user, thread_id))
        if live is None or live.run is None:
            raise HttpError(409, "no run in progress; send a message instead")
        live.session.steer(text)
        return JSONResponse({"steered": True, "runId": live.run.run_id})

    async def stop(request: Request) -> Response:
        user = await server.user(request)
        await server.body(request)  # JSON only, like every POST (a form post is a 415)
        thread_id = request.path_params["thread_id"]
        await server.thread(user, thread_id)
        live = server.live.get((user, thread_id))
        current = live.run if live is not None else None
        return JSONResponse({"stopped": current is not None and server.stop(current)})

    async def stop_run(request: Request) -> Response:
        user = await server.user(request)
        await server.body(request)
        found: Run | None = server.runs.get(request.path_params["run_id"])
        if found is None and server.cluster is not None:
            others = server.cluster.others()  # a run of another worker's (serve --workers)
            if others:
                return Moved(request.scope, others)
        if found is None or found.user != user:
            raise HttpError(404, "no such run")
        return JSONResponse({"stopped": server.stop(found)})

    # -- long-term memories ---------------------------------------------------------------

    def _ltm() -> Any:
        if server.long_term_memory is None:
            raise HttpError(404, "this server has no long-term memory")
        return server.long_term_memory

    async def memories(request: Request) -> Response:
        from goagent_py.memory.long_term import LongTermMemory
        from goagent_py.messages import TextBlock

        scope = memory_scope(await server.user(request))
        ltm = _ltm()
        query = request.query_params.get("q", "").strip()
        if not query:
            raise HttpError(400, "search your memories with ?q=...")
        k = request.query_params.get("k", "20")
        top_k = min(int(k), 100) if k.isdigit() and int(k) > 0 else 20
        kwargs: dict[str, Any] = (
            {"score_threshold": -1.0} if isinstance(ltm, LongTermMemory) else {}
        )
        found = await ltm.retrieve([TextBlock(query)], top_k=top_k, session=scope, **kwargs)
        return JSONResponse(
            {
                "memories": [
                    {"id": m.id, "text": m.message.text, "score": round(float(m.score), 4)}
                    for m in found
                ]
            }
        )

    async def memory_history(request: Request) -> Response:
        from goagent_py.errors import ConfigurationError
        from goagent_py.memory.long_term import LongTermMemory
        from goagent_py.memory.records import CURRENT, DELETED, SUPERSEDED

        # 200 with "enabled": false when there is nothing to list, as /api/me answers 200
        # either way: the page asks on every load, and a 404 would be a console error.
        scope = memory_scope(await server.user(request))
        ltm = server.long_term_memory
        off = {"enabled": False, "memories": []}
        if ltm is None:
            return JSONResponse({**off, "reason": "this server has no long-term memory"})
        if not isinstance(ltm, LongTermMemory):
            reason = f"{type(ltm).__name__} keeps no history (use LongTermMemory)"
            return JSONResponse({**off, "reason": reason})
        everything = request.query_params.get("all", "") in ("1", "true", "yes")
        states = (CURRENT, SUPERSEDED, DELETED) if everything else (CURRENT,)
        try:
            records = await ltm.records(session=scope, states=states)
        except ConfigurationError as exc:  # a store that cannot list its entries
            return JSONResponse({**off, "reason": str(exc)})
        return JSONResponse({"enabled": True, "memories": [r.to_json() for r in records]})

    async def forget(request: Request) -> Response:
        from goagent_py.memory.long_term import LongTermMemory

        scope = memory_scope(await server.user(request))
        ltm = _ltm()
        memory_id = request.path_params["memory_id"]
        # Ids are "<scope>:<digest>:<chunk>": another user's id is not found.
        if not memory_id.startswith(scope + ":"):
            raise HttpError(404, "no such memory")
        if isinstance(ltm, LongTermMemory):
            # Through the memory, not its store: a fact this one replaced takes its place, and
            # no other memory's history keeps its words.
            await ltm.forget_ids([memory_id], session=scope)
            return JSONResponse({"forgotten": memory_id})
        store = getattr(ltm, "vector_store", None)
        if store is None:
            raise HttpError(501, "this long-term memory cannot forget by id")
        await store.delete(memory_id)
        return JSONResponse({"forgotten": memory_id})

    # -- OpenAI-compatible -----------------------------------------------------------------

    async def models(request: Request) -> Response:
        await server.user(request)
        model = {"id": server.model_name, "object": "model", "created": 0, "owned_by": "goagent"}
        return JSONResponse({"object": "list", "data": [model]})

    async def completions(request: Request) -> Response:
        from goagent_py.serve import _openai

        user = await server.user(request)
        body = await server.body(request)
        asked = _openai.parse_chat(request.headers, body, server.model_name)
        return await _openai.chat_completions(server, user, asked)

    async def responses(request: Request) -> Response:
        from goagent_py.serve import _openai

        user = await server.user(request)
        body = await server.body(request)
        asked = _openai.parse_responses(request.headers, body, server.model_name)
        return await _openai.responses(server, user, asked)

    async def unknown(request: Request) -> Response:
        raise HttpError(404, f"Invalid URL ({request.method} {request.url.path})")

    t = "/api/threads/{thread_id:str}"
    plain: list[tuple[str, Endpoint, list[str]]] = [
        ("/", page, ["GET"]),
        ("/static/{name:str}", static, ["GET"]),
        ("/api/me", me, ["GET"]),
        ("/api/events", changes, ["GET"]),
        ("/api/login", login, ["POST"]),
        ("/api/logout", logout, ["POST"]),
        ("/api/threads", threads, ["GET", "POST"]),
        (t, thread, ["GET", "PATCH", "DELETE"]),
        (t + "/messages", messages, ["GET"]),
        (t + "/runs", run, ["POST"]),
        (t + "/steer", steer, ["POST"]),
        (t + "/follow", follow, ["GET"]),
        (t + "/decisions", decide, ["POST"]),
        (t + "/stop", stop, ["POST"]),
        ("/api/runs/{run_id:str}/stop", stop_run, ["POST"]),
        ("/api/memories", memories, ["GET"]),
        ("/api/memories/history", memory_history, ["GET"]),
        ("/api/memories/{memory_id:str}", forget, ["DELETE"]),
        ("/v1/models", models, ["GET"]),
        ("/v1/chat/completions", completions, ["POST"]),
        ("/v1/responses", responses, ["POST"]),
        ("/v1/{rest:path}", unknown, ["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]
    return [(path, _guarded(fn), methods) for path, fn, methods in plain]
