"""The local embedder's first export in a child process (review5): what the parent does when
that child never finishes or is not this package's, and two first starts storing one export at
once. No model is loaded: the child is a stand-in script, the model a stand-in object."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from goagent_py.providers import sentence_transformers as st_module
from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None, reason="extra 'local'"
)


def test_a_first_export_child_that_hangs_is_killed_and_the_parent_loads_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "child.pid"
    child = tmp_path / "hanging python"  # a path with a space, as an interpreter may have
    # Stands in for the interpreter: never exports, and only exits 0 ("stored") much later.
    child.write_text(f"#!/bin/sh\necho $$ > '{pid_file}'\nexec sleep 20\n")
    child.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(child))
    monkeypatch.setattr(st_module, "_EXPORT_TIMEOUT", 2.0)
    embedder = SentenceTransformerEmbedder(
        str(tmp_path / "model dir"), onnx_cache=str(tmp_path / "cache")
    )
    assert embedder._export_in_child() is False  # nothing stored: the torch load follows
    # (A machine slow enough may kill it before it wrote its pid.)
    written = pid_file.read_text().strip() if pid_file.exists() else ""
    if written:
        with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
            os.kill(int(written), 0)


def test_the_first_export_child_imports_this_package_not_one_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder holding another goagent_py (an older checkout, say) as the working directory:
    # `python -m` puts the working directory first on the child's path, where this process may
    # have imported goagent_py from elsewhere.
    marker = tmp_path / "imposter ran"
    fake = tmp_path / "goagent_py" / "providers"
    fake.mkdir(parents=True)
    (tmp_path / "goagent_py" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "_st_first_export.py").write_text(
        f"import pathlib, sys\npathlib.Path({str(marker)!r}).write_text('x')\nsys.exit(0)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the real child finds no model, offline
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    embedder = SentenceTransformerEmbedder(
        str(tmp_path / "no model"), onnx_cache=str(tmp_path / "cache")
    )
    assert embedder._export_in_child() is False  # the real child: no model, nothing stored
    assert not marker.exists()


def test_an_export_placed_by_another_first_start_during_the_rename_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two first starts on one machine (chat and serve) each export: when the other one puts
    its export in place between this one's removal of the old folder and its rename, that
    export is kept and reported as stored (it was "nothing stored", and the parent loaded
    torch for good)."""
    import numpy as np
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    from goagent_py.providers import _st_export

    class Tok:
        pad_token_id = 0
        pad_token = "[PAD]"
        backend_tokenizer = Tokenizer(WordLevel({"[PAD]": 0, "[UNK]": 1}, unk_token="[UNK]"))

    class First:
        max_seq_length = 8
        do_lower_case = False

    class Model:
        tokenizer = Tok()

        def __getitem__(self, index: int) -> First:
            return First()

    cache = tmp_path / "cache"
    folder = cache / "key"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text("stale")
    real_rmtree = _st_export.shutil.rmtree

    def rmtree(path: object, *args: object, **kwargs: object) -> None:
        real_rmtree(path, *args, **kwargs)  # type: ignore[arg-type]
        if Path(str(path)) == folder:  # the other first start renames its export in now
            folder.mkdir()
            (folder / "meta.json").write_text("the other process's")

    monkeypatch.setattr(_st_export.shutil, "rmtree", rmtree)
    stored = _st_export.save_export(
        cache,
        "key",
        graph=b"graph",
        model=Model(),
        names=["input_ids", "attention_mask"],
        probes=("a probe",),
        reference=np.zeros((1, 4), dtype=np.float32),
    )
    assert stored == folder
    assert (folder / "meta.json").read_text() == "the other process's"
    assert [p.name for p in cache.iterdir()] == ["key"]  # no staging folder left
