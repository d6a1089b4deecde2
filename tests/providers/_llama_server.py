"""Runs llama-cpp-python's OpenAI-compatible server (``llama_cpp.server``) for the tests.

A test helper, not part of the package. It takes ``llama_cpp.server``'s own command line
(``--model``, ``--port``, ``--chat_format``, ...) and differs from ``python -m llama_cpp.server``
in one way: llama.cpp's extra CPU buffer types are switched off while the model loads, as
:class:`~goagent_py.providers.LlamaCppProvider` does in-process (on virtual machines that
advertise AMX they crash the process on the first prompt of more than one token)::

    python tests/providers/_llama_server.py --model SmolLM2.gguf --port 8080 \\
        --chat_format chatml-function-calling --n_ctx 2048 --n_threads 2
"""

from __future__ import annotations

from goagent_py.providers.llama_cpp import _model_params


def main() -> None:
    from llama_cpp.server.__main__ import main as serve

    # The server loads its model in create_app(), inside serve(): keep the patch on throughout.
    with _model_params(extra_buffer_types=False):
        serve()


if __name__ == "__main__":
    main()
