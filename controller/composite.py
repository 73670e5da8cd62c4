"""Agents that run other agents: paths the guard must see through or refuse.

Why: the agent SDK runs an agent-tool (``Agent.as_tool()``) as one function call of
the outer agent, and the inner agent's own tools in the inner agent's own
function-invocation loop, with the inner agent's middleware only. A guard installed
on the outer agent alone would answer the outer call and never see the effects the
inner agent runs. So the guard treats an agent-tool as a path, not an effect: when
the inner agent carries the same guard (one run, one budget, however deep the
agents nest), the call passes through and each inner tool call is guarded as any
other; when it does not, the call is refused and names the agent it cannot guard.

A handoff workflow (agent-framework-orchestrations' ``HandoffBuilder``) runs several
agents in turn; each hands the conversation to the next through a generated routing
tool (``handoff_to_<agent>``) that runs nothing. The guard lets those through only for
a workflow it has checked (``unguarded_participant``: every agent the workflow runs
carries it, so every effect of the run comes back to it, under one budget); any other
handoff is refused.

The SDK keeps no public link from an agent-tool to its agent: ``agent_behind`` reads
the wrapper ``Agent.as_tool`` builds (agent-framework-core as pinned), and a tool it
does not recognise is an ordinary tool. ``is_handoff`` recognises the routing tool the
same way (agent-framework-orchestrations as pinned for the tests).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any


def agent_behind(tool: object) -> Any | None:
    """The agent an ``Agent.as_tool()`` tool runs, or None for any other tool."""
    func = getattr(tool, "func", None)
    if func is None or getattr(func, "__name__", "") != "_agent_wrapper":
        return None
    try:
        agent = inspect.getclosurevars(func).nonlocals.get("self")
    except (TypeError, ValueError):
        return None
    return agent if callable(getattr(agent, "run", None)) else None


def _tools_of(agent: Any) -> Iterable[object]:
    options = getattr(agent, "default_options", None) or {}
    tools = options.get("tools") if isinstance(options, dict) else None
    return tools if isinstance(tools, list | tuple) else ()


def _middleware_of(agent: Any) -> Iterable[object]:
    middleware = getattr(agent, "middleware", None)
    return middleware if isinstance(middleware, list | tuple) else ()


def unguarded_path(agent: Any, guard: object) -> str | None:
    """The first agent, inside ``agent`` (itself included), that runs tools without
    ``guard``: ``outer > inner`` names the path; None when every one carries it."""
    seen: set[int] = set()

    def walk(current: Any, path: tuple[str, ...]) -> str | None:
        if id(current) in seen:
            return None  # an agent reachable twice is checked once
        seen.add(id(current))
        here = (*path, str(getattr(current, "name", None) or "an unnamed agent"))
        tools = list(_tools_of(current))
        if tools and not any(item is guard for item in _middleware_of(current)):
            return " > ".join(here)
        for tool in tools:
            inner = agent_behind(tool)
            if inner is not None:
                found = walk(inner, here)
                if found is not None:
                    return found
        return None

    return walk(agent, ())


class UnguardedPath(ValueError):
    """A workflow runs an agent without the guard (one line naming it)."""


def is_handoff(tool: object) -> bool:
    """Whether ``tool`` is a handoff workflow's routing tool: it runs nothing, the
    workflow's next agent runs."""
    func = getattr(tool, "func", None)
    name = getattr(tool, "name", None)
    return (
        getattr(func, "__name__", "") == "_handoff_tool"
        and isinstance(name, str)
        and name.startswith("handoff_to_")
    )


def workflow_agents(workflow: Any) -> list[Any]:
    """The agents a workflow's executors run (as the workflow runs them: a handoff
    workflow's are clones of the agents it was built from)."""
    executors = getattr(workflow, "executors", None)
    if not isinstance(executors, dict):
        return []
    found = (getattr(executor, "agent", None) for executor in executors.values())
    return [agent for agent in found if agent is not None]


def handoff_tools(workflow: Any) -> set[str]:
    """The names of the routing tools of a workflow's agents."""
    return {
        str(tool.name)  # type: ignore[attr-defined]
        for agent in workflow_agents(workflow)
        for tool in _tools_of(agent)
        if is_handoff(tool)
    }


def unguarded_participant(workflow: Any, guard: object) -> str | None:
    """``workflow > agent > ...``: the first agent the workflow runs (or one it runs
    as a tool) without ``guard``; None when every one carries it."""
    name = str(getattr(workflow, "name", None) or "the workflow")
    for agent in workflow_agents(workflow):
        found = unguarded_path(agent, guard)
        if found is not None:
            return f"{name} > {found}"
    return None
