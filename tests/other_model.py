"""Another embedding model of the same size as the fake one (16 dimensions): other vectors for
the same text, under an identity of its own. For the tests of which embedder made the vectors
(rag16_embedder_identity, rag17_embedder_change, rag17_memory_embedder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from goagent_py.messages import ContentBlock
from goagent_py.testing import FakeEmbedder

DIMS = 16


class OtherModel(FakeEmbedder):
    """Another model of the same size: other vectors for the same text."""

    def __init__(self) -> None:
        super().__init__(DIMS)
        self.embedder_identity = f"fake:other-model:{DIMS}"

    def _vector(self, blocks: Sequence[ContentBlock]) -> Any:
        vector = super()._vector(blocks)
        return np.roll(vector[::-1], 3).astype(np.float32)
