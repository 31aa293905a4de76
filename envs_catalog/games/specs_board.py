"""Registered ids of the games (Connect Four, Nim) family (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/ConnectFour-v0",
     "source": "envs_catalog.games.connect_four:ConnectFourSource",
     "kwargs": {"opponent": "random", "rows": 6, "cols": 7, "agent_first": "random"}},
    {"id": "llm/Nim-v0",
     "source": "envs_catalog.games.nim:NimSource",
     "kwargs": {"opponent": "random", "num_heaps": 3, "max_heap": 5, "misere": False,
                "start": "winning"}},
]
