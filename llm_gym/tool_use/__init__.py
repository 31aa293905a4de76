"""Tool-using agents, under the cookbook's module names (`tinker_cookbook.tool_use`).

The implementation lives where llm_gym's other modules use it: the tool protocol, `@tool` and the
call handler in `llm_gym.tools`, the agent episode in `llm_gym.rl.tool_env`. This package gives
them the cookbook's paths (`tool_use.types`, `tool_use.tools`, `tool_use.agent_tool_message_env`)
so a cookbook user's `from tinker_cookbook.tool_use import tool, build_agent_tool_env` keeps
working after the import switch.
"""

from llm_gym.renderers.base import ToolSpec
from llm_gym.tool_use.agent_tool_message_env import AgentToolMessageEnv, build_agent_tool_env
from llm_gym.tool_use.tools import FunctionTool, error_tool_result, handle_tool_call, simple_tool_result, tool
from llm_gym.tool_use.types import Tool, ToolInput, ToolResult

__all__ = [
    "AgentToolMessageEnv",
    "build_agent_tool_env",
    "FunctionTool",
    "Tool",
    "ToolInput",
    "ToolResult",
    "ToolSpec",
    "error_tool_result",
    "handle_tool_call",
    "simple_tool_result",
    "tool",
]
