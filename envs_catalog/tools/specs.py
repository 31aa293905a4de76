"""The tools family's registered ids (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS = [{'id': 'llm/Calculator-v0',
  'source': 'envs_catalog.tools.calculator:CalculatorSource',
  'kwargs': {'digits': 3, 'max_turns': 4, 'max_tool_calls': 3, 'tool_call_cost': 0.05}},
 {'id': 'llm/PythonTool-v0',
  'source': 'envs_catalog.tools.python_tool:PythonToolSource',
  'kwargs': {'scale': 2, 'max_turns': 4, 'max_tool_calls': 3, 'tool_call_cost': 0.05}}]
