"""Registered ids of the multiagent (self-play) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
