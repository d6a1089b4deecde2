"""Model and embedding backends, one module per vendor.

Imported lazily: ``from goagent_py.providers import AnthropicProvider`` loads only that vendor.
"""

from __future__ import annotations

import importlib
import typing

# public name -> module that defines it (filled in as providers land)
_LAZY: dict[str, str] = {
    "AnthropicProvider": "anthropic",
    "CohereEmbedder": "cohere",
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

__all__ = sorted([*_LAZY, "DEFAULT_MODELS", "provider_from_string"], key=str.casefold)

DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-4-6",
    "openai": "gpt-4o-mini",
    "ollama": "llama3.2",
    "local": "smollm2-135m-instruct",
}
"""The model each vendor gets when a spec names none."""


def provider_from_string(spec: str) -> tuple[typing.Any, str]:
    """Build a provider from ``"vendor:MODEL"`` and return it with the model name.

    ``"anthropic:claude-sonnet-4-6"``, ``"openai:gpt-4o"``, ``"ollama:qwen3"`` or ``"local"``
    (the embedded SmolLM2-135M; tuned for it: one tool round, short answers, a repeat
    penalty); ``"local:/path/to/model.gguf"`` runs that GGUF file with the same settings.
    Keys come from the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY). Only the named
    vendor's module is imported.

    Raises:
        ConfigurationError: an unknown vendor, a missing API key, or a ``local`` model that
            is not a file.
    """
    from goagent_py.errors import ConfigurationError

    vendor, _, model = spec.partition(":")
    vendor = vendor.strip().lower()
    if vendor not in DEFAULT_MODELS:
        raise ConfigurationError(
            f"unknown provider {spec!r}: use anthropic:MODEL, openai:MODEL, ollama:MODEL or local"
        )
    model = model.strip() or DEFAULT_MODELS[vendor]
    if vendor == "anthropic":
        provider: typing.Any = __getattr__("AnthropicProvider")()
    elif vendor == "openai":
        provider = __getattr__("OpenAIProvider")()
    elif vendor == "ollama":
        provider = __getattr__("OllamaProvider")()
    else:
        # "local:NAME" ran the default model whatever NAME was (and was shown as NAME): the
        # model part is the default's name or the path of a GGUF file.
        path = None
        if model != DEFAULT_MODELS["local"]:
            from pathlib import Path

            path = Path(model).expanduser()
            if not path.is_file():
                raise ConfigurationError(
                    f"local takes no model name, or the path of a GGUF file: {model!r} is not "
                    "a file (local:/path/to/model.gguf, or local for the embedded SmolLM2-135M)"
                )
            model = path.name
        # The shipped 135M model keeps calling tools once offered them (one round, then text)
        # and can loop on a phrase until the token limit: short answers, fewer repeats.
        provider = __getattr__("LlamaCppProvider")(
            path, max_tool_rounds=1, max_tokens=200, repeat_penalty=1.3
        )
    return provider, model


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'goagent_py.providers' has no attribute {name!r}")
    return getattr(importlib.import_module(f"goagent_py.providers.{module}"), name)
