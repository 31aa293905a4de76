"""Code-writing environments graded in `llm_gym.sandbox`: `llm/HumanEval-v0` (`humaneval.py`) and
`llm/PyFunc-v0` (`pyfunc.py`). Both are single-turn `CodeEnv`s (`env.py`): the model's reply is
read as Python (`extract.py`), and `harness.py` runs it against tests it cannot see or forge."""
