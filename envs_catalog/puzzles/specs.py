"""Registered ids of the puzzles (Countdown, Sudoku, N-Queens, graph colouring) family (read by `envs_catalog.ENV_SPECS`; data only, no imports)."""

SPECS: list = []
