"""Registered ids of the puzzles (Knights & Knaves, cryptarithms, ARC) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
