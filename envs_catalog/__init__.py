"""llm-gym's environment catalog: families of environments written against the seed API.

This module stays light: it imports no environment module and only lists `ENV_SPECS`, which
`import llm_gym` reads through the `llm_gym.envs` entry point and registers with Gymnasium under
string entry points. Each spec names an id, the `EnvSource` class that implements it
("module:Class", imported only by `gym.make`) and the default knobs. `CATALOG.md` is generated from
the sources' cards by `python -m envs_catalog.catalog`.
"""

from __future__ import annotations

from typing import Any

ENV_SPECS: list[dict[str, Any]] = [
    {
        "id": "llm/Math-v0",
        "source": "envs_catalog.math.arithmetic:MathSource",
        "kwargs": {"digits": 2, "operators": "+", "num_operands": 2, "allow_negative": False},
    },
    {
        "id": "llm/MathMulti-v0",
        "source": "envs_catalog.math.arithmetic:MathMultiSource",
        "kwargs": {"digits": 2, "operators": "+-*", "num_operands": 4, "allow_negative": True},
    },
    {
        "id": "llm/GuessNumber-v0",
        "source": "envs_catalog.games.guess_number:GuessNumberSource",
        "kwargs": {"max_number": 20, "max_turns": 8},
    },
    {
        "id": "llm/TicTacToe-v0",
        "source": "envs_catalog.games.tictactoe:TicTacToeSource",
        "kwargs": {"opponent": "random", "agent_first": "random"},
    },
    {
        "id": "llm/HumanEval-v0",
        "source": "envs_catalog.code.humaneval:HumanEvalSource",
        "kwargs": {"problems": "split", "partial_credit": False},
    },
    {
        "id": "llm/PyFunc-v0",
        "source": "envs_catalog.code.pyfunc:PyFuncSource",
        "kwargs": {"families": "list,str,int", "min_transforms": 1, "max_transforms": 3,
                   "num_tests": 10},
    },
    {
        "id": "llm/Calculator-v0",
        "source": "envs_catalog.tools.calculator:CalculatorSource",
        "kwargs": {"digits": 3, "max_turns": 4, "max_tool_calls": 3, "tool_call_cost": 0.05},
    },
    {
        "id": "llm/PythonTool-v0",
        "source": "envs_catalog.tools.python_tool:PythonToolSource",
        "kwargs": {"scale": 2, "max_turns": 4, "max_tool_calls": 3, "tool_call_cost": 0.05},
    },
]

__all__ = ["ENV_SPECS"]
