"""The `check_env` row: Gymnasium's `check_env` on `env.unwrapped` of the id made through the
registry (it wants `env.spec`) with the user's kwargs; any warning, or an exception, fails it.
"""

from __future__ import annotations

import warnings

from llm_gym.checks.common import CheckRow, _one_line, _Target, _where


def _check_gym(target: _Target) -> CheckRow:
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    # Through the registry (check_env wants env.spec), with the user's kwargs.
    env = gym.make(target.env_id, **target.overrides)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
    except Exception as exc:
        return CheckRow("check_env", "fail", f"check_env raised {_one_line(exc)}{_where(exc)}")
    finally:
        env.close()
    messages = [f"{w.category.__name__}: {w.message}" for w in caught]
    if messages:
        return CheckRow("check_env", "fail", f"{len(messages)} warning(s): {messages[0]}",
                        {"warnings": messages})
    return CheckRow("check_env", "pass", "gymnasium check_env: no warnings")
