"""Registered ids of the games (Wordle, Mastermind, Twenty Questions) family
(read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/Wordle-v0", "source": "envs_catalog.games.wordle:WordleSource",
     "kwargs": {"max_turns": 6, "hard_mode": False}},
    {"id": "llm/Mastermind-v0", "source": "envs_catalog.games.mastermind:MastermindSource",
     "kwargs": {"pegs": 4, "colours": 6, "repeats": True, "max_turns": 10}},
    {"id": "llm/TwentyQuestions-v0",
     "source": "envs_catalog.games.twenty_questions:TwentyQuestionsSource",
     "kwargs": {"max_turns": 20}},
]
