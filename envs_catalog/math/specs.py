"""The math family's registered ids (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS = [{'id': 'llm/Math-v0',
  'source': 'envs_catalog.math.arithmetic:MathSource',
  'kwargs': {'digits': 2, 'operators': '+', 'num_operands': 2, 'allow_negative': False}},
 {'id': 'llm/MathMulti-v0',
  'source': 'envs_catalog.math.arithmetic:MathMultiSource',
  'kwargs': {'digits': 2, 'operators': '+-*', 'num_operands': 4, 'allow_negative': True}}]
