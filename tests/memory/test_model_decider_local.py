"""The model decider against the real embedded model (SmolLM2-135M through llama.cpp).

Whatever the small model answers, consolidation keeps the issue's promise: a valid answer is
applied, and an invalid one (not JSON, an unknown id, ...) after the retry leaves every fact
added as said, with a warning; nothing is ever lost. The model's figures on the labelled set
are in docs/memory.md (``bench/memory_truth/run.py --deciders model --model local``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from goagent_py.memory.consolidation import ConsolidationReport
from goagent_py.memory.deciders import ModelDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import CURRENT, DELETED, SUPERSEDED
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import user_message
from goagent_py.testing import FakeEmbedder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local() -> Iterator[Any]:
    pytest.importorskip("llama_cpp", reason='needs the "local" extra')
    from goagent_py.providers.llama_cpp import LlamaCppProvider

    provider = LlamaCppProvider(temperature=0.0, seed=0)
    asyncio.run(provider.load())
    yield provider
    provider.close()


async def test_the_real_small_model_never_loses_a_fact(
    local: Any, caplog: pytest.LogCaptureFixture
) -> None:
    decider = ModelDecider(local, model="local", max_tokens=120)
    reports: list[ConsolidationReport] = []
    memory = LongTermMemory(
        FakeEmbedder(64), InMemoryVectorStore(), decider=decider, on_consolidation=reports.append
    )
    await memory.store([user_message("I live in Lisbon.")], session="alice")
    assert decider.calls == 0  # no candidates yet: nothing to ask
    with caplog.at_level(logging.WARNING, logger="goagent_py.memory"):
        await memory.store([user_message("I moved to Porto last month.")], session="alice")
    assert 1 <= decider.calls <= 2  # one answer, and one retry if it was invalid
    assert decider.usage.input_tokens > 0
    everything = await memory.records(session="alice", states=(CURRENT, SUPERSEDED, DELETED))
    texts = {r.text: r.state for r in everything}
    report = reports[-1]
    if report.warning:
        # An answer that could not be applied: both statements kept, as without a decider,
        # and said on the memory's logger.
        assert texts == {"I live in Lisbon.": CURRENT, "I moved to Porto last month.": CURRENT}
        assert [d.op for d in report.decisions] == ["ADD"]
        assert report.warning in caplog.text
    else:
        # A valid answer was applied: Lisbon is still there (current, or kept as replaced or
        # retracted), and the new fact is there unless the model called it already known.
        assert "I live in Lisbon." in texts
        ops = [d.op for d in report.decisions]
        assert ops == ["NOOP"] or any("Porto" in t for t in texts), (ops, texts)
