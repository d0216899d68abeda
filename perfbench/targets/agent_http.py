"""The import path docs/agent-targets.md showed before the targets were split, kept so that
code written against it runs. New code: ``from perfbench.targets.http_agent import
AgentMapping, HttpAgent``."""

from perfbench.targets.agent_result import AgentMapping
from perfbench.targets.http_agent import HttpAgent

__all__ = ["AgentMapping", "HttpAgent"]
