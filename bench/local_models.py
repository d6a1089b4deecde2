"""Speed of the embedded local models on this machine.

Run it:

    python bench/local_models.py

Prints the chat model's load time and generation speed (tokens/s, SmolLM2-135M through
LlamaCppProvider), and the embedder's load time and throughput (sentences/s, all-MiniLM-L6-v2
through SentenceTransformerEmbedder), one at a time and in batches.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from goagent_py import CompletionRequest, TextBlock, user_message
from goagent_py.providers import LlamaCppProvider, SentenceTransformerEmbedder

SENTENCES = [
    f"Sentence number {i} talks about {topic} in a few plain words."
    for i, topic in enumerate(["weather", "databases", "cooking", "music", "travel"] * 40)
]


async def chat() -> None:
    provider = LlamaCppProvider(temperature=0.0, seed=0, max_tokens=128)
    start = time.perf_counter()
    await provider.complete(CompletionRequest(model="m", messages=[user_message("Hi")]))
    first = time.perf_counter() - start
    rates = []
    for prompt in ("Tell me about the sea.", "Describe a city at night.", "Explain rain."):
        start = time.perf_counter()
        response = await provider.complete(
            CompletionRequest(model="m", messages=[user_message(prompt)])
        )
        elapsed = time.perf_counter() - start
        rates.append(response.usage.output_tokens / elapsed)
    print("chat model (SmolLM2-135M-Instruct Q4_1, llama.cpp, CPU):")
    print(f"  load + first short answer: {first:.2f} s")
    print(f"  generation: {statistics.median(rates):.0f} tokens/s (median of 3, incl. prompt)")


async def embed() -> None:
    embedder = SentenceTransformerEmbedder()
    start = time.perf_counter()
    await embedder.load()
    load = time.perf_counter() - start
    start = time.perf_counter()
    for s in SENTENCES[:50]:
        await embedder.embed([TextBlock(s)])
    single = 50 / (time.perf_counter() - start)
    start = time.perf_counter()
    await embedder.embed_batch([[TextBlock(s)] for s in SENTENCES])
    batched = len(SENTENCES) / (time.perf_counter() - start)
    print("embedder (all-MiniLM-L6-v2, sentence-transformers, CPU):")
    print(f"  load: {load:.2f} s")
    print(
        f"  one at a time: {single:.0f} sentences/s;  batched ({len(SENTENCES)}): "
        f"{batched:.0f} sentences/s"
    )


if __name__ == "__main__":
    asyncio.run(chat())
    asyncio.run(embed())
