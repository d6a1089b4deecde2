"""An output validator may change the answer (redact it, normalise it); the run's text is then
the changed answer, as its output is (docs/typed-output.md, "Validation, retries and output
validators"). Before the fix ``result.output`` held the validator's answer while
``result.text``, ``str(result)``, the streamed ``AgentEnd`` result (what ``mcp serve`` and the
A2A server send), the text an output guardrail reads and the answer long-term memory stores
all kept the model's answer from before the validator: a redacting validator redacted only
``result.output``.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from goagent_py import Agent
from goagent_py.events import AgentEnd
from goagent_py.guardrails import GuardrailContext
from goagent_py.memory import InMemoryVectorStore, LongTermMemory
from goagent_py.testing import FakeEmbedder, ScriptedProvider, tool_call_response

CARD = "4111111111111111"


def redact(text: str) -> str:
    return text.replace(CARD, "****1111")


async def test_a_text_answer_changed_by_a_validator_is_the_runs_text_everywhere() -> None:
    judged: list[str] = []

    def look(output: object, ctx: GuardrailContext) -> None:
        judged.append(ctx.text)

    memory = LongTermMemory(embedder=FakeEmbedder(), store=InMemoryVectorStore())
    agent = Agent(
        provider=ScriptedProvider(f"Your card is {CARD}.", f"Your card is {CARD}."),
        output_validators=[redact],
        output_guardrails=[look],
        long_term_memory=memory,
    )
    result = await agent.run("Which card is on file?")
    assert result.output == "Your card is ****1111."
    assert result.text == result.output
    assert str(result) == result.output
    assert judged == ["Your card is ****1111."]
    assert not any(CARD in r.text for r in await memory.records())
    ended = [e async for e in agent.stream("Which card is on file?") if isinstance(e, AgentEnd)]
    assert ended[0].result.text == "Your card is ****1111."


class Payment(BaseModel):
    amount: float
    card: str


def mask(payment: Payment) -> Payment:
    payment.card = "****" + payment.card[-4:]  # changed in place: the text follows too
    return payment


async def test_a_typed_answer_changed_by_a_validator_is_the_runs_text() -> None:
    provider = ScriptedProvider(
        tool_call_response(("final_result", {"amount": 12.5, "card": CARD}), text="Here it is.")
    )
    agent = Agent(provider=provider, output_type=Payment, output_validators=[mask])
    result = await agent.run("Last payment?")
    assert result.output == Payment(amount=12.5, card="****1111")
    sentence, _, answer = result.text.partition("\n\n")
    assert sentence == "Here it is."
    assert json.loads(answer) == {"amount": 12.5, "card": "****1111"}
    assert CARD not in result.text


async def test_a_validator_that_changes_nothing_leaves_the_models_text() -> None:
    raw = '{"amount": 3, "card": "x"}'
    agent = Agent(
        provider=ScriptedProvider(raw),
        output_type=Payment,
        output_mode="prompted",
        output_validators=[lambda p: p],
    )
    assert (await agent.run("Last payment?")).text == raw
