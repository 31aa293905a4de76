"""Registered ids of the multiagent (pairwise preference) family
(read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/PairwisePreference-v0",
     "source": "envs_catalog.multiagent.pairwise:PairwisePreferenceSource",
     "kwargs": {"max_words": 15, "num_keywords": 1, "matchup_group_size": 0}},
]
