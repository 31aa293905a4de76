"""Registered ids of the tools (additional envs) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
