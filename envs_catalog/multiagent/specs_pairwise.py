"""Registered ids of the multiagent (pairwise preference) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
