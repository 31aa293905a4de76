"""Registered ids of the games (Wordle, Mastermind, Twenty Questions) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
