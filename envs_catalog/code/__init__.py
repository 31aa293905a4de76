"""Code environments: `llm/HumanEval-v0` (`humaneval.py`), `llm/PyFunc-v0` (`pyfunc.py`) and
`llm/BugFix-v0` (`bugfix.py`) are single-turn `CodeEnv`s (`env.py`) graded in `llm_gym.sandbox`:
the reply's program is read by their answer contract (`contract.SolutionAnswer`, under the one
answer policy of `llm_gym.grading`), and `harness.py` runs that program against tests it cannot
see or forge. `llm/CodeOutput-v0` (`code_output.py`) asks for a program's exact output, read by
an exact-text contract; no model code runs there."""
