"""Model and embedding backends, one module per vendor.

Imported lazily: ``from goagent_py.providers import AnthropicProvider`` loads only that vendor.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it (filled in as providers land)
_LAZY: dict[str, str] = {
    "AnthropicProvider": "anthropic",
    "LlamaCppProvider": "llama_cpp",
    "OllamaEmbedder": "ollama",
    "OllamaProvider": "ollama",
    "OpenAIEmbedder": "openai",
    "OpenAIProvider": "openai",
    "SentenceTransformerEmbedder": "sentence_transformers",
    "VoyageEmbedder": "voyage",
    "default_embedding_model_path": "sentence_transformers",
    "default_model_path": "llama_cpp",
    "ollama_reachable": "ollama",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'goagent_py.providers' has no attribute {name!r}")
    return getattr(importlib.import_module(f"goagent_py.providers.{module}"), name)
