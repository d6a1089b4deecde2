"""A long streamed answer: the served streams keep its text in pieces and join them once.

``+=`` on an attribute copied the whole text at every delta (work that grows with the square
of the answer). These tests hold what the change must keep: every delta is forwarded as it
came, and the text the stream ends with (AG-UI's ``RUN_FINISHED``, the Responses API's
``output_text.done`` and its response object, also read while the message is still open) is
the whole answer.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from goagent_py.events import MessageDelta
from goagent_py.serve import _agui, _openai

PIECES = [f"word{i} é字 " for i in range(5000)]
WHOLE = "".join(PIECES)


def test_agui_forwards_every_delta_and_finishes_with_the_whole_text() -> None:
    out = _agui.WireList()
    mapper = _agui.AguiMapper("t1", "r1", out)
    for piece in PIECES:
        mapper.map(MessageDelta("text", piece))
    deltas = [e["delta"] for e in out if e["type"] == "TEXT_MESSAGE_CONTENT"]
    mapper.finished()
    assert deltas == PIECES
    assert out[-1]["type"] == "RUN_FINISHED"
    assert out[-1]["result"]["text"] == WHOLE


def _builder() -> Any:
    request = SimpleNamespace(model="m", tools_echo=[])
    return _openai._ResponseBuilder(request, SimpleNamespace(), "resp_1")  # type: ignore[arg-type]


def test_responses_forwards_every_delta_and_ends_with_the_whole_text() -> None:
    build = _builder()
    deltas = []
    for piece in PIECES[:2500]:
        deltas += [e["delta"] for e in build.text(piece) if e["type"].endswith(".delta")]
    # Read while the message is still being written (a run that fails now): the text so far.
    failed = build.response("failed")
    assert failed["output"][0]["content"][0]["text"] == "".join(PIECES[:2500])
    for piece in PIECES[2500:]:
        deltas += [e["delta"] for e in build.text(piece) if e["type"].endswith(".delta")]
    done = {e["type"]: e for e in build.close_text()}
    assert deltas == PIECES
    assert done["response.output_text.done"]["text"] == WHOLE
    assert done["response.content_part.done"]["part"]["text"] == WHOLE
    assert build.response("completed")["output"][0]["content"][0]["text"] == WHOLE
