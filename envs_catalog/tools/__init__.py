"""The `tools` family: multi-turn tasks where the model may call a tool before answering.

`llm/Calculator-v0` (`calculator.py`: a safe arithmetic tool), `llm/PythonTool-v0`
(`python_tool.py`: Python run in `llm_gym.sandbox`), `llm/Retrieval-v0` (`retrieval.py`: search
over a generated knowledge base) and `llm/SQL-v0` (`sql.py`: read-only SQL in the sandbox) share
`base.py` (and `episode.py` for per-episode tools): the episode is
`llm_gym.rl.tool_env.build_agent_tool_env`, the final answer is read by the env's answer contract
(`env.answer_contract`: a number, or a knowledge-base name) under the one answer policy of
`llm_gym.grading`, and each tool call costs `tool_call_cost`.
"""
