"""The tool protocol (`Tool`, `ToolInput`, `ToolResult`) at the cookbook's `tool_use.types` path;
defined in `llm_gym.tools`."""

from llm_gym.tools import Tool, ToolInput, ToolResult

__all__ = ["Tool", "ToolInput", "ToolResult"]
