"""The loop's contracts with user code, third pass: whose mistake an error a tool raises is
(the developer's fails the run, the data's is the model's to correct), and what a callback or
a stream consumer is given it may read but never change the record through (docs/agent.md,
"Errors a tool raises"; docs/approvals.md)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pytest

import goagent_py
from goagent_py import Agent, ConfigurationError, GoAgentError, tool
from goagent_py.errors import InvalidInputError
from goagent_py.testing import ScriptedProvider, tool_call_response


def _all_subclasses(base: type[BaseException]) -> set[type[BaseException]]:
    for info in pkgutil.walk_packages(goagent_py.__path__, "goagent_py."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue  # a module of an extra that is not installed
    found: set[type[BaseException]] = set()
    todo = [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("goagent_py") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


# Every error the developer or the data can cause, classified by hand: "developer" errors fail
# the run when a tool raises them (the model cannot fix them), "data" errors are the tool's
# error the model reads and can correct. A new subclass of either base must be added here.
CLASSIFIED: dict[str, str] = {
    "goagent_py.errors.MissingExtraError": "developer",
    "goagent_py.cli._common.UsageError": "developer",
    "goagent_py.durable._wire.PayloadTooLargeError": "developer",
    "goagent_py.errors.InvalidMediaTypeError": "data",
    "goagent_py._paths.PathEscapeError": "data",
}


def _name(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_configuration_or_input_error_is_classified_by_the_hierarchy() -> None:
    """PathEscapeError (a path the model chose, outside the root) was a ConfigurationError, so
    a tool that raised it failed the run as if the developer had erred."""
    found = _all_subclasses(ConfigurationError) | _all_subclasses(InvalidInputError)
    names = {_name(cls): cls for cls in found}
    unclassified = sorted(set(names) - set(CLASSIFIED))
    assert not unclassified, f"classify these in CLASSIFIED (developer or data): {unclassified}"
    for name, cls in names.items():
        data = issubclass(cls, InvalidInputError)
        assert data == (CLASSIFIED[name] == "data"), name
        assert data != issubclass(cls, ConfigurationError), name  # never both
        assert issubclass(cls, ValueError), name  # ``except ValueError`` still catches both


def _sample(name: str) -> BaseException:
    module, _, cls_name = name.rpartition(".")
    cls = getattr(importlib.import_module(module), cls_name)
    samples: dict[str, Callable[[], BaseException]] = {
        "MissingExtraError": lambda: cls("sqlite-vec", "vector"),
        "UsageError": lambda: cls("unknown provider 'foo'"),
        "PayloadTooLargeError": lambda: cls("tool 'read' result", 3_000_000, 2_000_000),
        "InvalidMediaTypeError": lambda: cls("image", "image/bmp", ("image/png",)),
        "PathEscapeError": lambda: cls("/work", "../etc/passwd", "it leaves the root"),
    }
    error: BaseException = samples[cls_name]()
    return error


def _params() -> list[object]:
    extras = {"goagent_py.durable.": "temporal"}
    return [
        pytest.param(
            name,
            marks=[pytest.mark.needs_extra(e) for p, e in extras.items() if name.startswith(p)],
        )
        for name in sorted(CLASSIFIED)
    ]


@pytest.mark.parametrize("name", _params())
def test_a_tool_raising_each_classified_error_does_what_its_class_says(name: str) -> None:
    error = _sample(name)

    @tool
    def read(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        raise error

    provider = ScriptedProvider(tool_call_response(("read", {"path": "x"})), "Sorry.")
    agent = Agent(provider=provider, tools=[read])
    if CLASSIFIED[name] == "data":
        result = agent.run_sync("Read it")
        assert result.output == "Sorry."
        told = provider.requests[1].messages[-1]
        assert told.is_error
        assert str(error) in told.text
        return
    with pytest.raises(type(error)) as caught:
        agent.run_sync("Read it")
    assert isinstance(caught.value, GoAgentError)
    assert caught.value.run_result is not None
    assert len(provider.requests) == 1  # the model is not asked to fix what it cannot


def test_a_path_outside_the_root_reaches_the_model_as_a_tool_error(tmp_path: Path) -> None:
    """A tool that resolves the model's path under its root: "../etc/passwd" failed the run
    with PathEscapeError (a ConfigurationError) instead of telling the model."""
    from goagent_py._paths import resolve_in_root

    @tool
    def read(path: str) -> str:
        """Read a file under the project.

        Args:
            path: the file, relative to the project.
        """
        return resolve_in_root(tmp_path, path).read_text()

    provider = ScriptedProvider(tool_call_response(("read", {"path": "../etc/passwd"})), "Sorry.")
    result = Agent(provider=provider, tools=[read]).run_sync("Read it")
    assert result.output == "Sorry."
    told = provider.requests[1].messages[-1]
    assert told.is_error
    assert "refused" in told.text
    assert "../etc/passwd" in told.text


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"query": "  "}, "non-empty"),
        ({"query": "tea", "top_k": 0}, "top_k"),
        ({"query": "tea", "mode": "fuzzy"}, "unknown search mode"),
        ({"query": "tea", "filter": {"bad key!": 1}}, "bad filter"),
    ],
)
def test_search_arguments_the_model_chose_badly_reach_it_as_a_tool_error(
    arguments: dict[str, object], said: str
) -> None:
    """A tool searching a knowledge base with the model's arguments: an empty query, a top_k of
    0, an unknown mode or a filter key no store can match was a ConfigurationError from the
    pipeline, so the run failed as if the developer had erred."""
    from goagent_py.rag import Pipeline
    from goagent_py.testing import FakeEmbedder

    pipeline = Pipeline.in_memory(FakeEmbedder(), hybrid=False)

    @tool
    async def search(
        query: str, top_k: int = 3, mode: str = "vector", filter: dict[str, int] | None = None
    ) -> str:
        """Search the notes.

        Args:
            query: what to look for.
            top_k: how many passages.
            mode: vector, keyword or hybrid.
            filter: metadata to match.
        """
        found = await pipeline.search(query, top_k=top_k, mode=mode, filter=filter)  # type: ignore[arg-type]
        return "\n".join(r.text for r in found)

    provider = ScriptedProvider(tool_call_response(("search", arguments)), "Nothing found.")
    result = Agent(provider=provider, tools=[search]).run_sync("Find tea")
    assert result.output == "Nothing found."
    told = provider.requests[1].messages[-1]
    assert told.is_error
    assert said in told.text
