"""Feed llm-gym environments to TRL's `GRPOTrainer`: a prompt dataset plus a reward function that
grades completions with the environment's own verifier.

Single-turn envs (`ProblemEnv` families such as `llm/Math-v0`):

    dataset = grpo_dataset("llm/Math-v0", n=256, seed=0)       # conversational `prompt` column
    reward = EnvReward(tokenizer=tokenizer)                      # TRL reward-function signature
    GRPOTrainer(model=..., reward_funcs=reward, train_dataset=dataset, processing_class=tokenizer)

Each dataset row stores what it takes to rebuild its episode (`env_id`, `split`, `task_seed`,
`env_kwargs` as JSON) next to the reference answer. `EnvReward` receives those columns from TRL
(`reward_func(prompts=..., completions=..., completion_ids=..., **columns)`), rebuilds the row's env
through the Gymnasium face (`gym.make(env_id).unwrapped.reset(seed=task_seed)`, then its
`current_env`), tokenizes the completion text with the env's renderer
and calls the env's `step`, so the reward is exactly the env's. The env's metrics (`format`,
`correct`) go to TRL's logs through the `log_metric` callback TRL passes to reward functions, and to
the completions table through `log_extra`.

Multi-turn envs: TRL 1.16's `GRPOTrainer(environment_factory=...)` runs multi-turn episodes as tool
calls: an environment object with `reset(**row) -> str | None`, public tool methods, and an optional
`get_reward()`. `TextEnvironment` implements that contract over any llm-gym env (one tool, `act`,
whose text is the model's next message); `environment_factory(env_id)` gives TRL its factory.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from llm_gym.adapters._common import (
    dump_knobs,
    episode,
    load_knobs,
    require,
    run_async,
    task_seeds,
    text_env,
    text_to_action,
)

__all__ = [
    "EnvReward",
    "ScoredCompletion",
    "TextEnvironment",
    "environment_factory",
    "grpo_dataset",
    "multi_turn_dataset",
]


def _require_single_turn(source: Any, env_id: str) -> None:
    if source.card.multi_turn:
        raise ValueError(
            f"{env_id!r} is a multi-turn env; the single-turn TRL path (grpo_dataset / EnvReward) "
            "grades one completion per prompt. Use llm_gym.adapters.trl.multi_turn_dataset(...) with "
            f"GRPOTrainer(environment_factory=environment_factory({env_id!r})) instead"
        )


def _conversation(env: Any, env_id: str) -> list[dict[str, str]]:
    conversation: Callable[[], list[dict[str, Any]]] | None = getattr(env, "conversation", None)  # ProblemEnv's
    if not callable(conversation):
        raise TypeError(
            f"{env_id!r} builds {type(env).__name__}, which has no conversation(); the TRL prompt "
            "dataset needs a ProblemEnv-style env (llm_gym.rl.ProblemEnv)"
        )
    return [{"role": m["role"], "content": m["content"]} for m in conversation()]


def grpo_dataset(
    env_id: str, n: int, *, split: str = "train", seed: int = 0, **env_kwargs: Any
) -> Any:
    """A `datasets.Dataset` of `n` prompts from a single-turn env, in TRL's conversational format.

    Columns: `prompt` (list of chat messages), `reference_answer`, `env_id`, `split`, `task_seed`
    (the seed whose `reset` gives this task), `env_kwargs` (the difficulty knobs as JSON). TRL
    forwards every column except `prompt` to reward functions. Same arguments → same rows.
    """
    datasets = require("datasets", "llm_gym.adapters.trl.grpo_dataset")
    env_ = text_env(env_id, split=split, **env_kwargs)
    _require_single_turn(env_.source, env_id)
    knobs = dump_knobs(env_kwargs)
    rows: dict[str, list[Any]] = {
        "prompt": [], "reference_answer": [], "env_id": [], "split": [], "task_seed": [],
        "env_kwargs": [],
    }
    for task_seed in task_seeds(seed, n):
        env, _prompt, _info = episode(env_, task_seed)
        rows["prompt"].append(_conversation(env, env_id))
        rows["reference_answer"].append(str(env.get_reference_answer()))
        rows["env_id"].append(env_id)
        rows["split"].append(split)
        rows["task_seed"].append(task_seed)
        rows["env_kwargs"].append(knobs)
    return datasets.Dataset.from_dict(rows)


@dataclass
class ScoredCompletion:
    """One completion as `EnvReward` graded it."""

    env_id: str
    task_seed: int
    completion: str
    terminated: bool
    reward: float
    metrics: dict[str, float] = field(default_factory=dict)


def _completion_text(completion: Any) -> str:
    """TRL passes conversational completions as a list of messages, standard ones as a str."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        parts = [m.get("content", "") for m in completion if m.get("role", "assistant") == "assistant"]
        return "".join(p if isinstance(p, str) else "" for p in parts)
    raise TypeError(f"completion must be a str or a list of messages, got {type(completion).__name__}")


_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>")


def _end_ids(tokenizer: Any) -> list[int]:
    """EOS plus the end-of-turn tokens a chat model's generation config usually stops on."""
    ids = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    ids += [int(vocab[t]) for t in _END_OF_TURN_TOKENS if t in vocab]
    return ids


class EnvReward:
    """A TRL reward function that scores completions with the row's own llm-gym env.

    Call signature (TRL's): `reward(prompts, completions, completion_ids=None, *, env_id, task_seed,
    split="train", env_kwargs="{}", log_metric=None, log_extra=None, **other_columns)` →
    `list[float]`, one reward per completion. The env columns come from `grpo_dataset`.

    Args:
        tokenizer: the trainer's tokenizer (optional). With it, a completion whose ids do not end in
            its EOS or an end-of-turn token (`<|im_end|>`, `<|eot_id|>`, ...) counts as truncated,
            so the env applies its format penalty exactly as in an llm-gym rollout; without it
            every completion counts as finished.
        eos_token_ids: explicit end-of-sequence ids (overrides `tokenizer`).
        record: keep every `ScoredCompletion` in `self.history` (always kept for the last batch in
            `self.last_batch`).
        name: the name TRL logs the reward under (`rewards/<name>/mean`).
    """

    def __init__(
        self,
        *,
        tokenizer: Any = None,
        eos_token_ids: int | Sequence[int] | None = None,
        record: bool = False,
        name: str = "llm_gym_env",
    ) -> None:
        if eos_token_ids is None and tokenizer is not None:
            eos_token_ids = _end_ids(tokenizer)
        elif isinstance(eos_token_ids, int):
            eos_token_ids = [eos_token_ids]
        self.eos_token_ids = None if eos_token_ids is None else frozenset(int(i) for i in eos_token_ids)
        self.record = record
        self.__name__ = name
        self.history: list[ScoredCompletion] = []
        self.last_batch: list[ScoredCompletion] = []
        self._envs: dict[tuple[str, str, str], Any] = {}

    def _text_env(self, env_id: str, split: str, knobs: str) -> Any:
        key = (env_id, split, knobs)
        if key not in self._envs:
            env = text_env(env_id, split=split, **load_knobs(knobs))
            _require_single_turn(env.source, env_id)
            self._envs[key] = env
        return self._envs[key]

    def _terminated(self, ids: Sequence[int] | None) -> bool:
        if self.eos_token_ids is None or ids is None:
            return True
        return len(ids) > 0 and int(ids[-1]) in self.eos_token_ids

    def score(
        self, env_id: str, task_seed: int, completion: str, *, split: str = "train",
        env_kwargs: str | dict | None = None, terminated: bool = True,
    ) -> ScoredCompletion:
        """Grade one completion text on the task `task_seed` of `env_id`."""
        return self.score_many([(env_id, task_seed, completion, split, env_kwargs, terminated)])[0]

    def score_many(self, items: Sequence[tuple]) -> list[ScoredCompletion]:
        """Grade `(env_id, task_seed, completion, split, env_kwargs, terminated)` tuples in one
        event-loop run."""
        envs, actions = [], []
        for env_id, task_seed, completion, split, knobs, terminated in items:
            knobs_json = knobs if isinstance(knobs, str) else dump_knobs(knobs or {})
            env = self._text_env(env_id, split, knobs_json)
            envs.append(episode(env, int(task_seed))[0])  # initial observation already taken
            actions.append(text_to_action(env.renderer, completion, terminated=terminated))

        async def step_all():
            return [await env.step(action) for env, action in zip(envs, actions)]

        results = run_async(step_all)
        return [
            ScoredCompletion(
                env_id=item[0], task_seed=int(item[1]), completion=item[2], terminated=item[5],
                reward=float(r.reward), metrics={k: float(v) for k, v in r.metrics.items()},
            )
            for item, r in zip(items, results)
        ]

    def __call__(
        self,
        prompts: list,
        completions: list,
        completion_ids: list[list[int]] | None = None,
        *,
        env_id: list[str] | None = None,
        task_seed: list[int] | None = None,
        split: list[str] | None = None,
        env_kwargs: list[str] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        log_extra: Callable[[str, list], None] | None = None,
        **_other_columns: Any,
    ) -> list[float]:
        if env_id is None or task_seed is None:
            raise ValueError(
                "EnvReward needs the `env_id` and `task_seed` columns of each row; build the train "
                "dataset with llm_gym.adapters.trl.grpo_dataset(...)"
            )
        n = len(completions)
        splits = split if split is not None else ["train"] * n
        knobs = env_kwargs if env_kwargs is not None else ["{}"] * n
        ids = completion_ids if completion_ids is not None else [None] * n
        items = [
            (env_id[i], task_seed[i], _completion_text(completions[i]), splits[i], knobs[i],
             self._terminated(ids[i]))
            for i in range(n)
        ]
        scored = self.score_many(items)
        self.last_batch = scored
        if self.record:
            self.history.extend(scored)
        metric_names = sorted({k for s in scored for k in s.metrics})
        for metric in metric_names:
            values = [s.metrics[metric] for s in scored if metric in s.metrics]
            if log_metric is not None and values:
                log_metric(f"env/{metric}", sum(values) / len(values))
            if log_extra is not None:
                log_extra(metric, [s.metrics.get(metric, math.nan) for s in scored])
        return [s.reward for s in scored]


# --- multi-turn: TRL's environment_factory contract -----------------------------------------

_CHATML_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S)


def multi_turn_dataset(
    env_id: str, n: int, *, split: str = "train", seed: int = 0, **env_kwargs: Any
) -> Any:
    """A `datasets.Dataset` of `n` episode seeds for `GRPOTrainer(environment_factory=...)`.

    Columns: `prompt` (one user message asking the model to play through the `act` tool; the env's
    opening observation is appended to it by `TextEnvironment.reset`), `env_id`, `split`,
    `task_seed`, `env_kwargs`.
    """
    datasets = require("datasets", "llm_gym.adapters.trl.multi_turn_dataset")
    text_env(env_id, split=split, **env_kwargs)  # validates the id and knobs now, not mid-training
    knobs = dump_knobs(env_kwargs)
    seeds = task_seeds(seed, n)
    instruction = (
        "You are playing an environment. Send each of your moves with the `act` tool; "
        "the environment replies with its observation.\n\n"
    )
    return datasets.Dataset.from_dict({
        "prompt": [[{"role": "user", "content": instruction}] for _ in seeds],
        "env_id": [env_id] * n,
        "split": [split] * n,
        "task_seed": seeds,
        "env_kwargs": [knobs] * n,
    })


class TextEnvironment:
    """TRL `environment_factory` environment driving one llm-gym env episode over text.

    TRL 1.16's contract: `reset(**row)` is called before each rollout with the dataset row and
    returns text appended to the last user message; every public method other than `reset` and
    `get_reward` is exposed to the model as a tool; `get_reward()` scores the finished rollout.
    Here the only tool is `act(message)`: the message is tokenized with the env's renderer (plus its
    stop sequence) and passed to the env's `step`; the reply is the env's next observation as text.
    `get_reward()` is the episode's summed step reward. Also usable without TRL, as a plain
    reset/act text interface.
    """

    def __init__(self, env_id: str | None = None, *, split: str = "train", **env_kwargs: Any) -> None:
        self._default = (env_id, split, dump_knobs(env_kwargs))
        self._env: Any = None
        self._text_env: Any = None
        self._ob_len = 0
        self._reward = 0.0
        self._done = True
        self._metrics: dict[str, float] = {}

    def reset(self, **row: Any) -> str | None:
        env_id = row.get("env_id") or self._default[0]
        if env_id is None:
            raise ValueError("TextEnvironment.reset needs an env_id (constructor or dataset column)")
        split = row.get("split") or self._default[1]
        knobs = row.get("env_kwargs") or self._default[2]
        task_seed = int(row.get("task_seed", 0))
        self._text_env = text_env(env_id, split=split, **load_knobs(knobs))
        self._env, prompt, _info = episode(self._text_env, task_seed)
        self._ob_len = len(prompt)
        self._reward, self._done, self._metrics = 0.0, False, {}
        return self._text(prompt)

    def _text(self, tokens: list[int]) -> str:
        """Observation tokens as the text a tool reply carries: the contents of the non-assistant
        messages when the renderer uses ChatML markup, the plain decoded text otherwise."""
        tokenizer = self._text_env.renderer.tokenizer
        raw = tokenizer.decode(tokens, skip_special_tokens=False)
        turns = _CHATML_TURN.findall(raw)
        if turns:
            return "\n".join(c.strip() for role, c in turns if role != "assistant" and c.strip())
        return tokenizer.decode(tokens, skip_special_tokens=True).strip()

    def act(self, message: str) -> str:
        """Send your next move or message to the environment.

        Args:
            message: Your move or reply, as plain text.

        Returns:
            The environment's reply: its next observation, or the final result when the episode is over.
        """
        if self._env is None:
            raise RuntimeError("call reset() before act()")
        if self._done:
            return f"The episode is over. Total reward: {self._reward:g}."
        action = text_to_action(self._text_env.renderer, message, terminated=True)
        result = run_async(self._env.step, action)
        self._reward += float(result.reward)
        self._metrics = {k: float(v) for k, v in result.metrics.items()}
        if result.episode_done:
            self._done = True
            return f"The episode is over. Total reward: {self._reward:g}."
        tokens = result.next_observation.to_ints()
        # Observations extend the previous context (prefix property): show only the new part.
        new = tokens[self._ob_len + len(action):] if len(tokens) > self._ob_len + len(action) else tokens
        self._ob_len = len(tokens)
        return self._text(new)

    def get_reward(self) -> float:
        return self._reward

    @property
    def done(self) -> bool:
        return self._done

    @property
    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)


def environment_factory(env_id: str | None = None, *, split: str = "train", **env_kwargs: Any):
    """A zero-argument factory of `TextEnvironment`s for `GRPOTrainer(environment_factory=...)`.
    Rows of `multi_turn_dataset` override the id, split, knobs and seed per episode."""
    if env_id is not None:
        text_env(env_id, split=split, **env_kwargs)  # fail now on a bad id or knob
    return functools.partial(TextEnvironment, env_id, split=split, **env_kwargs)
