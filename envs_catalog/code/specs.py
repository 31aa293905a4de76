"""The code family's registered ids (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS = [{'id': 'llm/HumanEval-v0',
  'source': 'envs_catalog.code.humaneval:HumanEvalSource',
  'kwargs': {'problems': 'split', 'partial_credit': False}},
 {'id': 'llm/PyFunc-v0',
  'source': 'envs_catalog.code.pyfunc:PyFuncSource',
  'kwargs': {'families': 'list,str,int',
             'min_transforms': 1,
             'max_transforms': 3,
             'num_tests': 10}}]
