"""Served approvals with wait tokens (durable11): the listing and the AG-UI interrupt carry the
wait's token, and a decision sent with the token of a wait that is over (a second tab, a
retried request) is a 409 that changes nothing, not a decision for a later call with the same
id (local models number calls per turn). docs/approvals.md ("Which wait a decision is for")."""

from __future__ import annotations

from typing import Any

from wiping import RAN, wipe, wipes  # tests/wiping.py

from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider

answer = wipes("llama-tool-0")


async def test_a_late_decision_for_an_earlier_card_with_the_same_call_id_is_refused(
    db: str, helpers: Any
) -> None:
    RAN.clear()
    app = create_app(helpers.factory_for(FunctionProvider(answer), [wipe]), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = str((await client.post("/api/threads", json={})).json()["id"])

        async def ask(text: str) -> dict[str, Any]:
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
            (interrupt,) = helpers.sse_events(r.text)[-1]["outcome"]["interrupts"]
            return dict(interrupt)

        def decide(call_id: str, token: str) -> Any:
            body = {"decisions": {call_id: {"decision": "approve", "token": token}}}
            return client.post(f"/api/threads/{tid}/decisions", json=body)

        first = await ask("disk")
        token = first["metadata"]["token"]
        listed = (await client.get(f"/api/threads/{tid}/messages")).json()["pending"]
        assert [p["token"] for p in listed] == [token]
        assert (await decide(first["id"], token)).status_code == 200
        second = await ask("backup")
        assert second["id"] == first["id"]
        assert second["metadata"]["token"] not in ("", token)

        # The first card's click sent again is answered as done (approve14); another
        # decision with its token is refused: neither is taken by the card that waits now.
        again = await decide(first["id"], token)
        assert again.status_code == 200, again.text
        body = {"decisions": {first["id"]: {"decision": "deny", "token": token}}}
        late = await client.post(f"/api/threads/{tid}/decisions", json=body)
        assert late.status_code == 409, late.text
        assert RAN == ["disk"]
        still = (await client.get(f"/api/threads/{tid}/messages")).json()["pending"]
        assert [(p["arguments"], p["token"]) for p in still] == [
            ({"target": "backup"}, second["metadata"]["token"])
        ]
        bad = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {first["id"]: {"decision": "approve", "token": 7}}},
        )
        assert bad.status_code == 400
        assert (await decide(second["id"], second["metadata"]["token"])).status_code == 200
    await app.aclose()
    assert RAN == ["disk", "backup"]
