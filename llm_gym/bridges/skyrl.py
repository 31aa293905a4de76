"""SkyRL-gym environments as llm-gym envs: `skyrl/<id>` (`SkyRLSource`).

SkyRL-gym envs are made per task from a dataset row (`skyrl_gym.make(id, env_config=...,
extras=row)`), start from the row's chat `prompt` (`env.init(prompt)`) and return
`{"observations": [chat messages], "reward", "done", "metadata"}` from `step(text)`. SkyRL-gym ships
no data, so `dataset=` is required: a `.jsonl` (or `.json` list; `.parquet` with pandas installed) of
SkyRL rows, each with `prompt` (a list of `{"role", "content"}` messages) and the env's reward
fields (`reward_spec: {"ground_truth": ...}`; AIME's `reward_model` is filled from it when absent),
optionally `extra_info` and `split` ("train" / "test": rows with a split are used only for it).
`SkyRLEnv` is the string-env face `FromText` drives: `reset(seed)` picks row `seed // 2 % len(rows)`
of the split and makes a fresh SkyRL env for it. Rewards are the env's (gsm8k: 1 for a correct
`#### answer`, else 0; aime: 1 or -1); a reply that never reaches the env scores the lowest. Registered ids and the ones
left out (they need downloaded databases, a retrieval server, or run model-written code outside a
sandbox) are in `llm_gym.bridges.SKYRL`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_gym.bridges import SKYRL
from llm_gym.bridges._example import EXAMPLE_SEED, LazyCard, from_text_knobs, message
from llm_gym.env_source import EnvCard
from llm_gym.renderers import Renderer
from llm_gym.wrappers.from_text import StringEnvSource, _PrivateGlobalRNG

__all__ = ["SkyRLEnv", "SkyRLSource", "load_rows", "skyrl_card"]

REWARD_RANGES = {"aime": (-1.0, 1.0)}  # AIME scores a wrong answer -1; the others 0
ANSWER_FORMATS = {"aime": "Answer: {}"}  # the card example's answer; the others "#### {}"
_MAKE_DATA_HINT = (
    "SkyRL-gym ships no tasks: pass dataset=<path to a .jsonl of SkyRL rows with 'prompt' (chat "
    "messages) and 'reward_spec': {'ground_truth': ...}> (SkyRL's examples/gsm8k/gsm8k_dataset.py "
    "writes such rows for GSM8K)"
)


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """SkyRL dataset rows from a .jsonl, .json (a list) or .parquet file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset {str(path)!r} does not exist; {_MAKE_DATA_HINT}")
    if path.suffix == ".parquet":
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("reading a .parquet dataset needs pandas (and pyarrow); or use .jsonl") from None
        rows = pd.read_parquet(path).to_dict(orient="records")
    elif path.suffix == ".json":
        rows = json.loads(path.read_text(encoding="utf-8"))
    else:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), (list, str)):
            raise ValueError(f"{path}: row {i} has no 'prompt' (a list of chat messages); {_MAKE_DATA_HINT}")
    return rows


class SkyRLEnv:
    """The string-env face of a SkyRL-gym env over a list of dataset rows (see the module docstring)."""

    def __init__(self, env_name: str, rows: list[dict[str, Any]], env_config: dict[str, Any] | None = None) -> None:
        if not rows:
            raise ValueError(f"skyrl/{env_name}: the dataset has no rows for this split")
        self.env_name = env_name
        self.rows = rows
        self.env_config = dict(env_config or {})
        self.env: Any = None
        self.row: dict[str, Any] | None = None

    def reset(self, seed: int | None = None) -> tuple[Any, dict]:
        import skyrl_gym

        row = dict(self.rows[(seed or 0) // 2 % len(self.rows)])
        if "reward_model" not in row and "reward_spec" in row:  # AIME reads reward_model
            row["reward_model"] = row["reward_spec"]
        row.setdefault("extra_info", {})
        self.row = row
        self.env = skyrl_gym.make(self.env_name, env_config=self.env_config, extras=row)
        prompt = row["prompt"]
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        obs, info = self.env.init([dict(m) for m in prompt])
        return list(obs), dict(info or {})

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict]:
        out = self.env.step(action)
        metadata = out.get("metadata") or {}
        info = {k: v for k, v in metadata.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        return list(out.get("observations") or []), float(out["reward"]), bool(out["done"]), False, info


def skyrl_card(env_name: str) -> EnvCard:
    entry = SKYRL.entries.get(f"skyrl/{env_name}", {})
    return EnvCard(
        id=f"skyrl/{env_name}",
        family="skyrl-gym",
        description=(
            f"SkyRL-gym's `{env_name}` env over the rows of a SkyRL dataset (dataset= is required: "
            f"SkyRL-gym ships no data); {entry.get('note', '')}"
        ),
        multi_turn=entry.get("turns") == "multi",
        reward_range=REWARD_RANGES.get(env_name, (0.0, 1.0)),
        reward_meaning="the SkyRL env's reward (gsm8k: 1 for a correct '#### answer', else 0; "
        "gsm8k_multi_turn: per turn, 1 correct or a small format score; aime: 1 correct, -1 "
        "otherwise); the lowest reward for a reply that never reached the env",
        difficulty_knobs={
            "dataset": "path to a .jsonl / .json / .parquet of SkyRL rows (required)",
            "env_config": "SkyRL env_config dict (default {})",
            **from_text_knobs(system_prompt="a system message before the row's prompt (default None)"),
        },
        data_source="the dataset you pass (SkyRL-gym ships none)",
        license=f"{SKYRL.license} (SkyRL-gym code); the dataset's own",
    )


class SkyRLSource(StringEnvSource):
    """Episodes of one SkyRL-gym env (`env_name`) over the rows of `dataset`, through `FromText`."""

    card = LazyCard(StringEnvSource.card)

    def __init__(self, *, renderer: Renderer, split: str = "train", env_name: str,
                 dataset: str | None = None, env_config: dict[str, Any] | None = None,
                 **options: Any) -> None:
        self.card = skyrl_card(env_name)
        if dataset is None:
            raise ValueError(f"skyrl/{env_name} needs dataset=...: {_MAKE_DATA_HINT}")
        rows = load_rows(dataset)
        if any("split" in r for r in rows):
            rows = [r for r in rows if r.get("split") == split]
        self.env_name = env_name
        self.rows = rows
        self.env_config = env_config
        options.setdefault("reward_range", REWARD_RANGES.get(env_name, (0.0, 1.0)))
        super().__init__(renderer=renderer, split=split, **options)
        if not rows:
            raise ValueError(f"skyrl/{env_name}: {dataset} has no rows with split={split!r}")

    def make_string_env(self) -> SkyRLEnv:
        return SkyRLEnv(self.env_name, self.rows, self.env_config)

    # --- the card's example: the split's first row, answered (multi-turn: wrongly, then right) --
    def _example_key(self) -> tuple:
        first_row = json.dumps(self.rows[0], sort_keys=True, default=repr)  # the example's row
        return ("skyrl", self.env_name, first_row, repr(self.env_config), self.system_prompt)

    def _example_episode(self) -> list[dict[str, str]]:
        env = SkyRLEnv(self.env_name, self.rows, self.env_config)  # not a pooled env
        with _PrivateGlobalRNG(EXAMPLE_SEED).active():
            first, _ = env.reset(seed=EXAMPLE_SEED)
            truth = str((env.row or {}).get("reward_spec", {}).get("ground_truth", "")).strip()
            answer = ANSWER_FORMATS.get(self.env_name, "#### {}")
            replies = [answer.format(truth)]
            if self.card_multi_turn:
                replies.insert(0, answer.format("0" if truth != "0" else "1"))
            episode = [message("system", self.system_prompt)] if self.system_prompt else []
            episode += [message(m["role"], m.get("content") or "") for m in first
                        if m.get("role") != "assistant"]
            for i, reply in enumerate(replies):
                episode.append(message("assistant", reply))
                obs, _reward, done, _truncated, _info = env.step(reply)
                if done or i == len(replies) - 1:
                    break
                episode += [message(m["role"], m.get("content") or "") for m in obs
                            if m.get("role") != "assistant"]
        return [m for m in episode if m["content"]]

    @property
    def card_multi_turn(self) -> bool:
        return SKYRL.entries.get(f"skyrl/{self.env_name}", {}).get("turns") == "multi"
