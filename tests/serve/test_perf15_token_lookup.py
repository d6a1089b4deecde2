"""TokenAuth finds a request's token by one lookup, not a comparison with every known token
(issue 36): the same user for every known token whatever its place among many, nothing for
any other, and the mapping given stays the one record (a token added to it later is known)."""

from __future__ import annotations

import time

from goagent_py.serve import TokenAuth


def _tokens(n: int) -> dict[str, str]:
    return {f"token-{i:04d}-{'x' * 16}": f"user{i}" for i in range(n)}


def test_every_known_token_gives_its_own_user_and_nothing_else_passes() -> None:
    tokens = _tokens(200)
    auth = TokenAuth(tokens, expires={"token-0007-" + "x" * 16: time.time() - 1})
    for token, user in tokens.items():
        found = auth.authenticate({"authorization": f"Bearer {token}"}, "127.0.0.1")
        assert found == (None if token.startswith("token-0007-") else user)
    for wrong in ["token-0001-" + "x" * 15, "token-0001-" + "x" * 17, "TOKEN-0001-" + "x" * 16]:
        assert auth.authenticate({"authorization": f"Bearer {wrong}"}, "127.0.0.1") is None
    # A token added to the mapping later is known at once (the mapping is the record).
    tokens["token-new-" + "y" * 16] = "newcomer"
    header = {"authorization": "Bearer token-new-" + "y" * 16}
    assert auth.authenticate(header, "127.0.0.1") == "newcomer"
    login = auth.login({"token": "token-0003-" + "x" * 16})
    assert login is not None
    assert login.user == "user3"
    assert auth.login({"token": "token-0003-" + "x" * 15}) is None
