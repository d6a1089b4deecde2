"""serve17 (issue 36): work a served turn no longer does, with what it did kept."""

from __future__ import annotations

from typing import Any


class _Listed(dict):  # type: ignore[type-arg]
    """The server's live threads, counting how often all of them are listed."""

    listed = 0

    def items(self) -> Any:
        _Listed.listed += 1
        return super().items()

    def values(self) -> Any:
        _Listed.listed += 1
        return super().values()


async def _thread(client: Any) -> str:
    created = await client.post("/api/threads", json={"title": "t"})
    return str(created.json()["id"])


async def test_a_runs_end_lists_no_live_thread_while_they_fit(echo_app: Any, helpers: Any) -> None:
    server = echo_app.server
    async with helpers.client_for(echo_app) as client:
        threads = [await _thread(client) for _ in range(3)]
        server.live = _Listed(server.live)
        _Listed.listed = 0
        for i, tid in enumerate(threads * 2):
            answer = await client.post(f"/api/threads/{tid}/runs", json={"message": f"m{i}"})
            assert helpers.sse_events(answer.text)[-1]["type"] == "RUN_FINISHED"
        assert _Listed.listed == 0
        assert list(server.live) == [("local", tid) for tid in threads]


async def test_past_max_live_the_least_recently_used_idle_threads_go(
    echo_app: Any, helpers: Any
) -> None:
    server = echo_app.server
    async with helpers.client_for(echo_app) as client:
        threads = [await _thread(client) for _ in range(4)]
        for tid in threads:
            await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
        server.max_live = 2
        # Used again: the second thread is now the most recently used of the four.
        await client.post(f"/api/threads/{threads[1]}/runs", json={"message": "again"})
        assert list(server.live) == [("local", threads[3]), ("local", threads[1])]
        for tid in threads:  # each rebuilt from storage on its next request
            msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
            assert msgs[:2] == [
                {**msgs[0], "text": "hi"},
                {**msgs[1], "text": "echo: hi"},
            ]
