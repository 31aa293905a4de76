"""Registered ids of the text family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
