"""The tool-using agent episode at the cookbook's `tool_use.agent_tool_message_env` path; defined
in `llm_gym.rl.tool_env`."""

from llm_gym.rl.tool_env import AgentToolMessageEnv, RewardFn, build_agent_tool_env

# The result a reward function gives: the episode reward and its metrics.
RewardResult = tuple[float, dict[str, float]]

__all__ = ["AgentToolMessageEnv", "RewardFn", "RewardResult", "build_agent_tool_env"]
