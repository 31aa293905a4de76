"""SkyRL-gym environments as llm-gym envs: `skyrl/<id>` (`SkyRLSource`).

SkyRL-gym envs are made per task from a dataset row (`skyrl_gym.make(id, env_config=...,
extras=row)`), start from the row's chat `prompt` (`env.init(prompt)`) and return
`{"observations": [chat messages], "reward", "done", "metadata"}` from `step(text)`. SkyRL-gym ships
no data, so training needs `dataset=`: a `.jsonl` (or `.json` list; `.parquet` with pandas installed) of
SkyRL rows, each with `prompt` (a list of `{"role", "content"}` messages) and the env's reward
fields (`reward_spec: {"ground_truth": ...}`; AIME's `reward_model` is filled from it when absent),
optionally `extra_info` and `split` ("train" / "test": rows with a split are used only for it).
`SkyRLEnv` is the string-env face `FromText` drives: `reset(seed)` picks row `seed // 2 % len(rows)`
of the split and makes a fresh SkyRL env for it. Without `dataset=` (or with `dataset="demo"`) the
env runs on `demo_rows`: 200 synthetic arithmetic word problems generated here, in the env's answer
format, split by question hash -- enough for `gym.make` with no arguments, smoke tests and
`llm-gym check` (the card says so); they are not a benchmark. Rewards are the env's (gsm8k: 1 for a correct
`#### answer`, else 0; aime: 1 or -1); a reply that never reaches the env scores the lowest, and so
does one whose answer llm-gym's one answer policy (`llm_gym.grading.POLICY`) cannot read as one
number -- two declared answers, or a last line such as "Alternatively #### 6" -- since SkyRL's
readers take the first or last match and would pay it (info `answer_refused`). Registered ids and the ones
left out (they need downloaded databases, a retrieval server, or run model-written code outside a
sandbox) are in `llm_gym.bridges.SKYRL`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from llm_gym.bridges import SKYRL
from llm_gym.bridges._example import EXAMPLE_SEED, LazyCard, from_text_knobs, message
from llm_gym.env_source import EnvCard
from llm_gym.grading import AnswerStatus, extract_answer
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase
from llm_gym.wrappers.from_text import StringEnvSource, _PrivateGlobalRNG

__all__ = ["DEMO", "SkyRLEnv", "SkyRLSource", "demo_rows", "load_rows", "skyrl_card"]

_EMPHASIS = re.compile(r"\*\*|__")
_REFUSED = (AnswerStatus.CONFLICTING, AnswerStatus.CONFUSABLE, AnswerStatus.MALFORMED)
REWARD_RANGES = {"aime": (-1.0, 1.0)}  # AIME scores a wrong answer -1; the others 0
ANSWER_FORMATS = {"aime": "Answer: {}"}  # the card example's answer; the others "#### {}"
_MAKE_DATA_HINT = (
    "SkyRL-gym ships no tasks: pass dataset=<path to a .jsonl of SkyRL rows with 'prompt' (chat "
    "messages) and 'reward_spec': {'ground_truth': ...}> (SkyRL's examples/gsm8k/gsm8k_dataset.py "
    "writes such rows for GSM8K)"
)


DEMO = "demo"
_DEMO_ROWS = 200
_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana")
_INSTRUCTIONS = {
    "aime": "Give the final answer on its own line as 'Answer: <number>'.",
}
_GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def demo_rows(env_name: str, n: int = _DEMO_ROWS) -> list[dict[str, Any]]:
    """`n` synthetic arithmetic word problems as SkyRL rows for `env_name` (its answer format in
    the prompt), the same on every call; each row's `split` is its question's (`split_of`)."""
    import random

    from llm_gym.authoring import split_of

    rng = random.Random(0)
    instruction = _INSTRUCTIONS.get(env_name, _GSM8K_INSTRUCTION)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(rows) < n:
        name, kind = rng.choice(_NAMES), rng.randrange(4)
        a, b = rng.randint(2, 60), rng.randint(2, 12)
        if kind == 0:
            question = f"{name} has {a} marbles and finds {b} more. How many marbles does {name} have now?"
            answer = a + b
        elif kind == 1:
            question, answer = f"A shelf holds {a + b} books. {b} are taken away. How many are left?", a
        elif kind == 2:
            question, answer = f"{name} buys {b} boxes of {a} pencils. How many pencils is that?", a * b
        else:
            question = (f"{a * b} apples are shared equally among {b} children. How many apples does "
                        "each child get?")
            answer = a
        if question in seen:
            continue
        seen.add(question)
        rows.append({"prompt": [{"role": "user", "content": f"{question} {instruction}"}],
                     "reward_spec": {"method": "rule", "ground_truth": str(answer)},
                     "split": split_of(question)})
    return rows


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

    def __init__(self, env_name: str, rows: list[dict[str, Any]], env_config: dict[str, Any] | None = None,
                 low: float | None = None) -> None:
        if not rows:
            raise ValueError(f"skyrl/{env_name}: the dataset has no rows for this split")
        self.env_name = env_name
        self.rows = rows
        self.env_config = dict(env_config or {})
        self.low = REWARD_RANGES.get(env_name, (0.0, 1.0))[0] if low is None else low  # no credit
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
        """SkyRL's step on the reply with markdown emphasis removed (AIME's reader refuses
        "Answer: **75**"); llm-gym's one answer policy on top: a reply whose answer
        `llm_gym.grading.extract_answer` cannot read as one number (conflicting, malformed,
        confusable) earns no more than the lowest reward, whatever SkyRL's reader took from it
        (info `answer_refused`)."""
        out = self.env.step(_EMPHASIS.sub("", action))
        metadata = out.get("metadata") or {}
        info = {k: v for k, v in metadata.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        reward = float(out["reward"])
        refused = extract_answer(action).status in _REFUSED
        info["answer_refused"] = float(refused and reward > self.low)
        if refused:
            reward = min(reward, self.low)
        return list(out.get("observations") or []), reward, bool(out["done"]), False, info


def skyrl_card(env_name: str) -> EnvCard:
    entry = SKYRL.entries.get(f"skyrl/{env_name}", {})
    return EnvCard(
        id=f"skyrl/{env_name}",
        family="skyrl-gym",
        description=(
            f"SkyRL-gym's `{env_name}` env over the rows of a SkyRL dataset (pass dataset=: "
            f"SkyRL-gym ships no data; without it, built-in demo rows); {entry.get('note', '')}"
        ),
        multi_turn=entry.get("turns") == "multi",
        reward_range=REWARD_RANGES.get(env_name, (0.0, 1.0)),
        reward_meaning="the SkyRL env's reward (gsm8k: 1 for a correct '#### answer', else 0; "
        "gsm8k_multi_turn: per turn, 1 correct or a small format score; aime: 1 correct, -1 "
        "otherwise); the lowest reward for a reply that never reached the env",
        difficulty_knobs={
            "dataset": "path to a .jsonl / .json / .parquet of SkyRL rows (default 'demo': "
            f"{_DEMO_ROWS} synthetic arithmetic word problems built in, for smoke tests and checks)",
            "env_config": "SkyRL env_config dict (default {})",
            **from_text_knobs(system_prompt="a system message before the row's prompt (default None)"),
        },
        data_source=f"the dataset you pass (SkyRL-gym ships none); by default {_DEMO_ROWS} synthetic "
        "rows generated by llm-gym (llm_gym.bridges.skyrl.demo_rows)",
        license=f"{SKYRL.license} (SkyRL-gym code); the dataset's own",
    )


class SkyRLSource(StringEnvSource):
    """Episodes of one SkyRL-gym env (`env_name`) over the rows of `dataset`, through `FromText`."""

    card = LazyCard(StringEnvSource.card)

    def __init__(self, *, renderer: Renderer, split: str = "train", env_name: str,
                 dataset: str | None = None, env_config: dict[str, Any] | None = None,
                 **options: Any) -> None:
        self.card = skyrl_card(env_name)
        if dataset is None or dataset == DEMO:
            rows = demo_rows(env_name)
        else:
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

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the row's ground truth in the env's answer format (the SkyRL env pays 1).
        Adversarial: a wrong number in the same format, every turn (no credit: 0, AIME -1)."""
        answer = ANSWER_FORMATS.get(self.env_name, "#### {}")

        def truth(env: Any) -> str:
            return str(env.string_env.row["reward_spec"]["ground_truth"]).strip()

        def wrong(env: Any, _obs: str) -> str:
            value = truth(env)
            return answer.format(int(value) + 1 if value.lstrip("-").isdigit() else 0)

        low = self.reward_range[0]
        return [
            ScriptedCase("ground truth", "gold", lambda env, _obs: answer.format(truth(env)), 1.0, 1.0),
            ScriptedCase("a wrong number", "adversarial", wrong, low, low if low < 0 else 0.5,
                         note="gsm8k_multi_turn pays a small format score per tried turn"),
        ]

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
