"""Registered ids of the code (additional envs) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
