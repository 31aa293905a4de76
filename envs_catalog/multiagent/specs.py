"""Registered ids of the multiagent (self-play) family (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/SelfPlayTicTacToe-v0",
     "source": "envs_catalog.multiagent.selfplay:SelfPlayTicTacToeSource",
     "kwargs": {"opponent": "random", "agent_first": "random"}},
    {"id": "llm/SelfPlayConnectFour-v0",
     "source": "envs_catalog.multiagent.selfplay:SelfPlayConnectFourSource",
     "kwargs": {"opponent": "random", "rows": 6, "cols": 7, "agent_first": "random"}},
    {"id": "llm/SelfPlayNim-v0",
     "source": "envs_catalog.multiagent.selfplay:SelfPlayNimSource",
     "kwargs": {"opponent": "random", "num_heaps": 3, "max_heap": 5, "misere": False,
                "start": "any"}},
]
