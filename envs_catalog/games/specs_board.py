"""Registered ids of the games (Connect Four, Nim) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
