"""goagent_py._paths: every escape from the root refused, before and at open time."""

from __future__ import annotations

import os
import pickle
import sys
import threading
from pathlib import Path

import pytest

from goagent_py._paths import PathEscapeError, open_in_root, resolve_in_root
from goagent_py.errors import ConfigurationError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks and dir fds")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/root (with sub/, a.txt, an inner link) beside tmp/root_evil and tmp/outside."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("inside a")
    (root / "sub" / "b.txt").write_text("inside b")
    (root / "inner_link").symlink_to("sub/b.txt")
    (root / "inner_dir_link").symlink_to("sub")
    (root / "abs_inner_link").symlink_to(root / "a.txt")
    (tmp_path / "root_evil").mkdir()
    (tmp_path / "root_evil" / "x.txt").write_text("SECRET evil")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "b.txt").write_text("SECRET outside")
    (root / "out_link").symlink_to(tmp_path / "outside" / "b.txt")
    (root / "out_dir_link").symlink_to("../outside")
    (root / "sub" / "up_link").symlink_to("../../outside/b.txt")
    (root / "loop").symlink_to("loop")
    return root


ESCAPES = {
    "dotdot": "../outside/b.txt",
    "dotdot_inside": "sub/../../outside/b.txt",
    "dotdot_backslash": "sub\\..\\..\\outside\\b.txt",
    "absolute": "/etc/passwd",
    "drive": "C:\\Windows\\win.ini",
    "unc": "\\\\server\\share\\x",
    "nul": "a.txt\x00.png",
    "sibling_prefix": "../root_evil/x.txt",
    "symlink_file_out": "out_link",
    "symlink_dir_out": "out_dir_link/b.txt",
    "relative_symlink_out": "sub/up_link",
    "empty": "",
    "root_itself": ".",
}


@pytest.mark.parametrize("name", ESCAPES)
def test_resolve_refuses_each_escape(tree: Path, name: str) -> None:
    with pytest.raises(PathEscapeError) as info:
        resolve_in_root(tree, ESCAPES[name])
    assert info.value.path == ESCAPES[name]
    assert "refused" in str(info.value)


@pytest.mark.parametrize("name", ESCAPES)
def test_open_refuses_each_escape(tree: Path, name: str) -> None:
    with pytest.raises(PathEscapeError):
        open_in_root(tree, ESCAPES[name]).close()


def test_sibling_prefix_root_is_outside(tree: Path) -> None:
    # A string-prefix check would let tmp/root_evil pass as being under tmp/root.
    evil = tree.parent / "root_evil"
    (tree / "to_evil").symlink_to(evil / "x.txt")
    with pytest.raises(PathEscapeError, match="outside the root"):
        resolve_in_root(tree, "to_evil")
    with pytest.raises(PathEscapeError):
        open_in_root(tree, "to_evil")


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("a.txt", "inside a"),
        ("sub/b.txt", "inside b"),
        ("./sub//b.txt", "inside b"),
        ("inner_link", "inside b"),
        ("inner_dir_link/b.txt", "inside b"),
        ("abs_inner_link", "inside a"),
    ],
)
def test_paths_inside_the_root_resolve_and_open(tree: Path, path: str, text: str) -> None:
    assert resolve_in_root(tree, path).read_text() == text
    with open_in_root(tree, path) as f:
        assert f.read() == text


def test_open_for_writing_creates_inside_and_refuses_through_a_link(tree: Path) -> None:
    with open_in_root(tree, "sub/new.txt", "w", encoding="utf-8") as f:
        f.write("hello")
    assert (tree / "sub" / "new.txt").read_text() == "hello"
    with pytest.raises(PathEscapeError):
        open_in_root(tree, "out_dir_link/created.txt", "w")
    assert not (tree.parent / "outside" / "created.txt").exists()
    with pytest.raises(PathEscapeError):
        open_in_root(tree, "out_link", "a")
    assert (tree.parent / "outside" / "b.txt").read_text() == "SECRET outside"


def test_symlink_loop_and_special_files_are_refused(tree: Path) -> None:
    with pytest.raises(PathEscapeError, match="too many symlinks"):
        open_in_root(tree, "loop")
    os.mkfifo(tree / "fifo")
    with pytest.raises(PathEscapeError, match="not a regular file"):
        open_in_root(tree, "fifo")  # refused at once: never blocks waiting for a writer
    with pytest.raises(PathEscapeError, match="not a regular file"):
        open_in_root(tree, "sub")


def test_misuse_is_a_configuration_error(tree: Path) -> None:
    with pytest.raises(ConfigurationError, match="not an existing directory"):
        resolve_in_root(tree / "a.txt", "x")
    with pytest.raises(ConfigurationError, match="mode must be"):
        open_in_root(tree, "a.txt", "rw")
    with pytest.raises(FileNotFoundError):
        open_in_root(tree, "missing.txt")


def test_the_error_survives_pickle(tree: Path) -> None:
    with pytest.raises(PathEscapeError) as info:
        resolve_in_root(tree, "../x")
    copy = pickle.loads(pickle.dumps(info.value))
    assert (type(copy), str(copy), copy.root, copy.path, copy.reason) == (
        PathEscapeError,
        str(info.value),
        info.value.root,
        "../x",
        info.value.reason,
    )


def test_a_symlink_swapped_in_and_out_1000_times_never_leads_outside(tree: Path) -> None:
    """One thread flips root/flip between an inner and an outer target; another opens through it.

    Each flip is an atomic rename of a fresh symlink over the old one, so at any instant
    root/flip is one of the two. A check-then-open would sometimes read the outer file.
    """
    outside = tree.parent / "outside"
    # A deep path after the flipping link: resolving it takes many system calls, so a
    # check-then-open has a wide window in which the link can flip (with resolve_in_root then
    # open(root / path) in place of open_in_root, this test read the outer file 37 and 52
    # times in two runs).
    deep = "/".join(f"d{i}" for i in range(30))
    for base, text in ((outside, "SECRET"), (tree / "sub", "inside")):
        (base / deep).mkdir(parents=True)
        (base / deep / "f").write_text(text)
    (tree / "flip").symlink_to("sub")
    (tree / "leaf").symlink_to(f"sub/{deep}/f")
    start = threading.Barrier(2)
    done = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        start.wait()
        try:
            for i in range(1000):
                target, leaf = (
                    ("sub", f"sub/{deep}/f") if i % 2 else (str(outside), str(outside / deep / "f"))
                )
                for name, to in (("flip", target), ("leaf", leaf)):
                    tmp = tree / f".{name}.tmp"
                    tmp.symlink_to(to)
                    os.replace(tmp, tree / name)
                swaps += 1
        finally:
            done.set()

    reads: dict[str, int] = {"inside": 0, "SECRET": 0, "refused": 0, "missing": 0}
    worker = threading.Thread(target=swap)
    worker.start()
    start.wait()
    while not done.is_set():
        for path in (f"flip/{deep}/f", "leaf"):
            try:
                with open_in_root(tree, path) as f:
                    reads[f.read()] += 1
            except PathEscapeError:
                reads["refused"] += 1
            except FileNotFoundError:
                reads["missing"] += 1
    worker.join()
    assert swaps == 1000
    assert reads["SECRET"] == 0, reads
    assert reads["inside"] + reads["refused"] > 0


def test_directories_open_and_are_made_only_inside(tree: Path) -> None:
    from goagent_py._paths import open_dir_in_root, relative_in_root, walk_files

    fd, real = open_dir_in_root(tree, "inner_dir_link")
    try:
        assert real == "sub"
        assert sorted(name for _, name, _ in walk_files(fd)) == ["b.txt"]  # up_link skipped
    finally:
        os.close(fd)
    fd, real = open_dir_in_root(tree, "./sub/new/deeper", create=True)
    os.close(fd)
    assert real == "sub/new/deeper"
    assert (tree / "sub" / "new" / "deeper").is_dir()
    outside = tree.parent / "outside"
    with pytest.raises(PathEscapeError):
        open_dir_in_root(tree, "out_dir_link/made", create=True)
    assert not (outside / "made").exists()
    with pytest.raises(NotADirectoryError):
        open_dir_in_root(tree, "a.txt")
    assert relative_in_root(tree, ".//inner_dir_link//b.txt") == "sub/b.txt"
