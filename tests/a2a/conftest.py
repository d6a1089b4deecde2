"""The A2A tests need the a2a extra (the official a2a-sdk with its HTTP server)."""

from __future__ import annotations

import pytest

pytest.importorskip("a2a.server.routes", reason='needs the "a2a" extra')
