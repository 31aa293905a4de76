"""Templates for `llm-gym new`: the files of a scaffolded env package, as Python strings.

Each template is a module with a `FILES` dict {relative path: text}; `llm_gym.cli.new` fills the
placeholders (`__NAME__` the package's short name, `__PKG__` its import name, `__CLASS__` the
CamelCase task name, `__ENV_ID__`, `__FAMILY__`, `__DIST__` the distribution name,
`__LLM_GYM_VERSION__` the running `llm_gym.__version__`, the least llm-gym the package requires)
and writes them. Generated code imports llm-gym's public modules only (`llm_gym.authoring`,
`llm_gym.env_source`, `llm_gym.rl`, ...), never `envs_catalog` or an underscore module.
`common.py` holds the files both kinds share (pyproject, README, the spec list);
`single_turn.py` a `ProblemEnv` task, `multi_turn.py` a `Continuation`-based game. They are
strings, not data files, so they ship in any install of llm-gym without package-data settings.
"""

from __future__ import annotations

PLACEHOLDERS = ("__NAME__", "__PKG__", "__CLASS__", "__ENV_ID__", "__FAMILY__", "__DIST__",
                "__LLM_GYM_VERSION__")


def render(text: str, values: dict[str, str]) -> str:
    """`text` with every placeholder replaced (`values` maps each of `PLACEHOLDERS` to text)."""
    for key in PLACEHOLDERS:
        text = text.replace(key, values[key])
    return text


__all__ = ["PLACEHOLDERS", "render"]
