"""Registered ids of the tools (additional envs) family (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/Retrieval-v0", "source": "envs_catalog.tools.retrieval:RetrievalSource",
     "kwargs": {"hops": 1, "num_entities": 200, "top_k": 3, "max_turns": 5, "max_tool_calls": 4,
                "require_tool": True}},
    {"id": "llm/SQL-v0", "source": "envs_catalog.tools.sql:SQLSource",
     "kwargs": {"num_rows": 30, "complexity": 1, "max_turns": 4, "max_tool_calls": 3,
                "require_tool": True}},
]
