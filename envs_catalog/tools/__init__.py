"""The `tools` family: multi-turn math tasks where the model may call a tool before answering.

`llm/Calculator-v0` (`calculator.py`: a safe arithmetic tool) and `llm/PythonTool-v0`
(`python_tool.py`: Python run in `llm_gym.sandbox`) share `base.py`: the episode is
`llm_gym.rl.tool_env.build_agent_tool_env`, the final answer is graded by `llm_gym.grading`
(`llm/Math-v0`'s answer policy), and each tool call costs `tool_call_cost`.
"""
