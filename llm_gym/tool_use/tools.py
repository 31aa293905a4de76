"""`@tool`, `FunctionTool`, result helpers and `handle_tool_call` at the cookbook's
`tool_use.tools` path; defined in `llm_gym.tools`."""

from llm_gym.tools import FunctionTool, error_tool_result, handle_tool_call, simple_tool_result, tool

__all__ = ["FunctionTool", "error_tool_result", "handle_tool_call", "simple_tool_result", "tool"]
