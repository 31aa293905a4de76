"""The TextWorld family's registered ids (read by `envs_catalog.ALL_SPECS`; data only, no imports).
Registered only when the optional `textworld` package is importable."""

SPECS: list = [
    {"id": "llm/TextWorld-v0", "source": "envs_catalog.textworld.env:TextWorldSource",
     "kwargs": {"world_size": 2, "nb_objects": 4, "quest_length": 2, "max_turns": 12},
     "requires": "textworld"},
]
