"""The checks a registered llm-gym environment must pass, as a library (`llm-gym check` is their
command line, `llm_gym.cli.check`, as Gymnasium keeps `utils/env_checker.py` apart from any
command). `check_env_id(env_id, ...)` runs the rows named in `CHECK_NAMES` on any id registered
with `llm_gym.text_env:TextEnv` (the built-in catalog, bridges, a third-party `llm_gym.envs`
entry point, an id registered in-process) and returns one `CheckRow` (name, "pass" / "fail" /
"skip", a one-line detail, JSON-ready data, seconds) per check; `validate_env_id` refuses an
unknown id or kwargs the env refuses (`ValueError`, one line) before any check runs. One module
per check: `check_env` (Gymnasium's `check_env`, zero warnings), `determinism` (whole episodes
agree across two processes and differ across seeds), `fuzz` (random actions: no crash, rewards
in range), `card` (the `EnvCard` complete and matching the constructor), `scripted` (the
source's scripted cases score as declared), `adversarial` (the generic audit built from the gold
cases), `split` (no task in both splits, and a multi-turn env's test split holds at least
`HELD_OUT_EPISODES` distinct episodes; `task_identity` names an episode's task), `context` (the
longest observation against the declared bound) and `throughput` (informational); `common`
holds what they share and `runner` puts the rows together. Torch-free.
"""

from llm_gym.checks.common import CHECK_NAMES, CheckRow
from llm_gym.checks.runner import check_env_id, validate_env_id
from llm_gym.checks.split import HELD_OUT_EPISODES, task_identity

__all__ = ["CHECK_NAMES", "HELD_OUT_EPISODES", "CheckRow", "check_env_id", "task_identity",
           "validate_env_id"]
