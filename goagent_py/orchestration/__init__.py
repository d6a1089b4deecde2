"""Orchestration the application's code controls: pipeline, parallel, router, loop, graph,
supervisor.

Every node has one shape, a :data:`Runnable`: an :class:`~goagent_py.Agent`, an orchestration,
or a plain ``async (input: str) -> str`` function (:class:`Node` names one and gives it an input
mapping and a retry policy). Every orchestration returns a :class:`FlowResult` and streams
:data:`FlowEvent`\\ s whose ``path`` names the node from the root, so patterns nest freely::

    flow = Pipeline(researcher, writer, reviewer)
    result = await flow.run("solid-state batteries")
    print(result.text, result.usage.total_tokens, result.trace)
"""

from goagent_py.orchestration._core import (
    Flow,
    FlowEvent,
    FlowResult,
    FlowState,
    FlowTool,
    MaxStepsError,
    Node,
    NodeEnd,
    NodeStart,
    NodeTimeoutError,
    OrchestrationError,
    Runnable,
    Step,
    StepFailedError,
    current_flow_state,
)
from goagent_py.orchestration.graph import END, Branch, Graph, GraphState
from goagent_py.orchestration.handoff import HandoffRefusedError, Handoffs, transfer_tool_name
from goagent_py.orchestration.patterns import Loop, Parallel, Pipeline, RouteError, Router
from goagent_py.orchestration.supervisor import Supervisor

__all__ = [
    "END",
    "Branch",
    "Flow",
    "FlowEvent",
    "FlowResult",
    "FlowState",
    "FlowTool",
    "Graph",
    "GraphState",
    "HandoffRefusedError",
    "Handoffs",
    "Loop",
    "MaxStepsError",
    "Node",
    "NodeEnd",
    "NodeStart",
    "NodeTimeoutError",
    "OrchestrationError",
    "Parallel",
    "Pipeline",
    "RouteError",
    "Router",
    "Runnable",
    "Step",
    "StepFailedError",
    "Supervisor",
    "current_flow_state",
    "transfer_tool_name",
]
