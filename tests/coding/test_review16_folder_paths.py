"""A write to a path that ends in ``/`` names a folder, and makes no file (docs/coding-agent.md).

``write_file {"path": "notes/", "content": ...}`` made a *file* named ``notes`` (the trailing
slash was dropped), answering "wrote notes/": the model believed it had made a folder, and its
next ``write_file notes/todo.md`` failed on a file where a folder should be. A path ending in
``/`` is now refused for a write, saying to name the file; nothing is made.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.coding import CodingToolError, file_tools


async def _run(tool: object, **args: object) -> str:
    blocks = await tool.execute(args)  # type: ignore[attr-defined]
    return "".join(getattr(b, "text", "") for b in blocks)


@pytest.mark.parametrize("path", ["notes/", "notes//", "notes\\", "a/b/"])
async def test_a_write_to_a_folder_path_is_refused_and_makes_nothing(
    tmp_path: Path, path: str
) -> None:
    tools = {t.definition.name: t for t in file_tools(tmp_path)}
    with pytest.raises(CodingToolError, match="ends with a slash"):
        await _run(tools["write_file"], path=path, content="x")
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 - a test's own folder, once
    # The file inside the folder is what works.
    folder = path.rstrip("/\\")
    assert "wrote" in await _run(tools["write_file"], path=f"{folder}/todo.md", content="x")
    assert (tmp_path / folder / "todo.md").read_text() == "x"
