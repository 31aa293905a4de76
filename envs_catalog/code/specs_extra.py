"""Registered ids of the code (additional envs) family (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/BugFix-v0", "source": "envs_catalog.code.bugfix:BugFixSource",
     "kwargs": {"families": "list,str,int", "min_transforms": 1, "max_transforms": 3,
                "num_tests": 10}},
    {"id": "llm/CodeOutput-v0", "source": "envs_catalog.code.code_output:CodeOutputSource",
     "kwargs": {"length": 3, "max_output_lines": 8}},
]
