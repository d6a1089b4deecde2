"""Orchestration against failing callbacks and unprintable errors (fix10)."""

from __future__ import annotations

import pickle

from goagent_py.orchestration import StepFailedError


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this error raises")


def test_a_step_failure_whose_cause_cannot_be_written_names_the_cause() -> None:
    error = StepFailedError(("a", "b"), UnprintableError())
    assert str(error).startswith("node 'a/b' failed: UnprintableError")
    assert isinstance(error.cause, UnprintableError)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)
