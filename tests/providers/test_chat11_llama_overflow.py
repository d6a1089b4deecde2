"""The embedded model told a request past its context window in llama.cpp's words only
("Requested tokens (6244) exceed context window of 4096"): it now says what to do too
(docs/chat.md, "The default system prompt")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from goagent_py.errors import ProviderError
from goagent_py.messages import user_message
from goagent_py.provider import CompletionRequest

CHINESE = "我喜欢在公园里散步\uff0c看看花草树木\uff0c听听鸟儿唱歌。" * 100


@pytest.fixture(scope="module")
def local() -> Iterator[object]:
    from goagent_py.providers.llama_cpp import LlamaCppProvider

    provider = LlamaCppProvider(temperature=0.0, seed=0)
    asyncio.run(provider.load())
    yield provider
    provider.close()


@pytest.mark.needs_extra("local")
@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
async def test_a_request_past_the_window_says_what_to_do(local: object, stream: bool) -> None:
    request = CompletionRequest(model="", system_prompt="", messages=[user_message(CHINESE)])

    async def call() -> None:
        if stream:
            async for _ in local.stream(request):  # type: ignore[attr-defined]
                pass
        else:
            await local.complete(request)  # type: ignore[attr-defined]

    with pytest.raises(ProviderError) as caught:
        await call()
    error = caught.value
    message = str(error)
    assert "context window of 4096 tokens" in message
    assert "n_ctx" in message
    assert "token_estimator()" in message
    assert error.error_type == "context_length_exceeded"
