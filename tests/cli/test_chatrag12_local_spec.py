"""``--provider local:NAME`` named a model the chat then did not run.

``local:qwen`` printed "provider local (qwen)" and ran SmolLM2 all the same: the model part of
a ``local`` spec was ignored. ``local:PATH`` now runs that GGUF file, and a name that is not
a file is refused, saying what ``local`` takes (docs/cli.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.cli import main as cli
from goagent_py.errors import ConfigurationError


@pytest.mark.needs_extra("local")
def test_local_with_a_name_that_is_no_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "home"))
    code = cli.main(["chat", "--provider", "local:qwen", "--no-memory"])
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "'qwen' is not a file" in err
    assert "local:/path/to/model.gguf" in err


@pytest.mark.needs_extra("local")
def test_local_with_a_gguf_path_runs_that_file(tmp_path: Path) -> None:
    from goagent_py.providers import DEFAULT_MODELS, default_model_path, provider_from_string

    model = default_model_path()
    provider, name = provider_from_string(f"local:{model}")
    assert provider.model_path == model
    assert name == model.name
    provider, name = provider_from_string("local")
    assert name == DEFAULT_MODELS["local"]
    with pytest.raises(ConfigurationError, match="not a file"):
        provider_from_string(f"local:{tmp_path / 'nope.gguf'}")


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_rag_top_k_must_be_a_positive_number(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --top-k 0 silently became the default, and -1 sliced the passages from the end.
    code = cli.main(["rag", "ask", "q", "--top-k", value, "--db", str(tmp_path / "none.db")])
    assert code == cli.EXIT_USAGE
    assert f"argument --top-k: {value!r} is not a positive whole number" in (
        capsys.readouterr().err
    )
