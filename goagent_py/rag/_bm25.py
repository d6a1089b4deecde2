"""BM25 scoring of the in-memory keyword index with numpy: a snapshot of its postings as arrays.

The index keeps its postings in dictionaries (cheap to update one entry at a time). Scoring a
query from them walks every posting of every query token in Python: ~3.5 ms at 10k chunks, on
the event loop and holding the GIL, while a hybrid search embeds its query in a worker thread
that needs the GIL too. The snapshot numbers the entries and turns the postings of the tokens
queried into arrays, so a query's scores are a few vector operations (~0.1 ms at 10k). It is
made on the first search after a write, and a token's arrays on the first query that uses it;
every write drops it. The scores are the dictionary walk's, to the bit: the same float64
operations in the same order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Snapshot"]


class Snapshot:
    """The index's entries numbered, their lengths, and the queried tokens' postings as arrays.

    Args:
        tf: the term frequencies by entry id (the index's own; read, never changed).
        lengths: the token count by entry id.
        postings: the entry ids by token.
    """

    __slots__ = ("_arrays", "_lengths", "_number", "_postings", "_tf", "ids")

    def __init__(
        self,
        tf: Mapping[str, Counter[str]],
        lengths: Mapping[str, int],
        postings: Mapping[str, set[str]],
    ) -> None:
        import numpy as np

        self.ids: list[str] = list(tf)
        self._number = {id: i for i, id in enumerate(self.ids)}
        self._lengths: NDArray[np.float64] = np.fromiter(
            (lengths[id] for id in self.ids), dtype=np.float64, count=len(self.ids)
        )
        self._tf = tf
        self._postings = postings
        self._arrays: dict[str, tuple[NDArray[np.intp], NDArray[np.float64]]] = {}

    def _posting(self, token: str) -> tuple[NDArray[np.intp], NDArray[np.float64]] | None:
        arrays = self._arrays.get(token)
        if arrays is None:
            import numpy as np

            posting = self._postings.get(token)
            if not posting:
                return None
            ids = list(posting)
            rows = np.fromiter((self._number[id] for id in ids), dtype=np.intp, count=len(ids))
            tf = np.fromiter((self._tf[id][token] for id in ids), dtype=np.float64, count=len(ids))
            arrays = self._arrays[token] = (rows, tf)
        return arrays

    def scores(
        self, tokens: Sequence[str], *, k1: float, b: float, avgdl: float
    ) -> tuple[Any, Any]:
        """The rows that match any of ``tokens`` and their BM25 scores (float64)."""
        import numpy as np

        n = len(self.ids)
        scores = np.zeros(n, dtype=np.float64)
        matched = np.zeros(n, dtype=bool)
        for token in tokens:
            arrays = self._posting(token)
            if arrays is None:
                continue
            rows, tf = arrays
            df = rows.shape[0]
            idf = float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
            norm = k1 * (1.0 - b + b * self._lengths[rows] / avgdl)
            scores[rows] += idf * tf * (k1 + 1.0) / (tf + norm)
            matched[rows] = True
        found = np.flatnonzero(matched)
        return found, scores[found]
