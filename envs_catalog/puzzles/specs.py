"""Registered ids of the puzzles (Countdown, Sudoku, N-Queens, graph colouring) family
(read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/Countdown-v0",
     "source": "envs_catalog.puzzles.countdown:CountdownSource",
     "kwargs": {"num_numbers": 3, "max_number": 10, "min_target": 10, "max_target": 50,
                "use_all": False}},
    {"id": "llm/Sudoku-v0",
     "source": "envs_catalog.puzzles.sudoku:SudokuSource",
     "kwargs": {"size": 4, "holes": 6, "unique": False}},
    {"id": "llm/NQueens-v0",
     "source": "envs_catalog.puzzles.nqueens:NQueensSource",
     "kwargs": {"n": 7, "preplaced": 2}},
    {"id": "llm/GraphColoring-v0",
     "source": "envs_catalog.puzzles.graph_coloring:GraphColoringSource",
     "kwargs": {"nodes": 6, "edge_prob": 0.5, "colors": 3}},
]
