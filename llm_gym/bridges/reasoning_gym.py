"""reasoning-gym datasets as single-turn llm-gym envs: `rg/<dataset>-v0` (`ReasoningGymSource`).

Each episode is one item of a reasoning-gym dataset (`reasoning_gym.create_dataset(name, seed=...,
size=...)`): the question is the user turn, the model's answer is read from `<answer>...</answer>`
tags (reasoning-gym's own `extract_answer`, with its "default" system prompt asking for them;
`answer_format="raw"` takes the whole reply, with no system prompt) and scored by the dataset's own
`score_answer`, in [0, 1], through `llm_gym.grading.bounded` (a scorer that hangs on an adversarial
answer is cut off after `grader_timeout_s`, metric `grader_timeout`; one that raises scores 0,
metric `score_error`). On top of it, llm-gym's one answer policy (`llm_gym.grading.POLICY`, with the
dataset's `<answer>` tags as the declaration: `ReasoningGymEnv.answer_policy`): a reply whose
`<answer>` blocks disagree (or that leaves one unclosed) scores 0 (metric `conflicting`) --
reasoning-gym reads only the last block, so an answer listed beside others would be paid; text
outside the blocks is not read. Reward = `format_coef *
(format_ok - 1) + score`, where `format_ok` means the reply ended on the renderer's stop sequence
(and, with tags, held them). Out-of-vocabulary ids, invalid UTF-8 and replies over
`max_response_chars` are never scored: `-format_coef`, metric `invalid_response`. Every field of the
dataset's config dataclass is a knob (`gym.make("rg/basic_arithmetic-v0", max_terms=3)`), except
`seed`, which the split decides: split="train" is the dataset made with seed 0 and split="test" with
seed 2**31, and a split keeps only the items whose question hashes to it (`split_of_question`: half
of the questions each), so no question is in both splits even where a dataset's task space is small
enough to repeat one across generator seeds. `size` items are generated per split (a knob, default
10,000; smaller for datasets that draw every task in their constructor), about half of them the
split's own; `reset(seed)` picks an index uniformly and takes the first of the split's own items
from there, made on a private, seeded copy of the global random state (list_functions draws from the
global `random` module). Datasets are built once per process and configuration.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import re
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from llm_gym.authoring import split_of
from llm_gym.bridges import REASONING_GYM
from llm_gym.bridges._example import LazyCard, message
from llm_gym.wrappers.from_text import _PrivateGlobalRNG
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading.bounded import BoundedCall, acall_bounded, call_bounded
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, Renderer, get_text_content
from llm_gym.rl import ProblemEnv
from llm_gym.rl.types import Action, ActionExtra, StepResult
from llm_gym.scripted import ScriptedCase

__all__ = ["ItemTimeout", "ReasoningGymEnv", "ReasoningGymSource", "dataset_card", "split_of_question"]

DEFAULT_SIZE = 10_000
SPLIT_SEEDS = {"train": 0, "test": 2**31}
MAX_RESPONSE_CHARS = 65_536
ANSWER_FORMATS = ("tags", "raw")
_BRIDGE_KNOBS = {
    "size": f"tasks per split (default {DEFAULT_SIZE}, smaller for datasets that draw every "
    "task in their constructor)",
    "answer_format": "'tags' (the answer is read from <answer>...</answer>, reasoning-gym's "
    "convention) or 'raw' (the whole reply) (default 'tags')",
    "system_prompt": "system message; None: reasoning-gym's 'default' prompt for 'tags', none for "
    "'raw'; '' for none (default None)",
    "format_coef": "penalty for a reply without the format, 0-1 (default 0.1)",
    "grader_timeout_s": "seconds score_answer may take (default 10)",
}


def _rg():
    import reasoning_gym

    return reasoning_gym


def _classes(dataset: str) -> tuple[type, type]:
    from reasoning_gym.factory import DATASETS

    if dataset not in DATASETS:
        close = difflib.get_close_matches(dataset, list(DATASETS), n=3)
        hint = f" Did you mean: {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"reasoning-gym has no dataset {dataset!r}.{hint}")
    return DATASETS[dataset]


def _config_fields(dataset: str) -> dict[str, Any]:
    """The dataset's config fields (but `seed` and `size`) and their defaults."""
    _, config_cls = _classes(dataset)
    out = {}
    for f in dataclasses.fields(config_cls):
        if f.name in ("seed", "size"):
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
        else:
            out[f.name] = None
    return out


def dataset_card(dataset: str, format_coef: float = 0.1) -> EnvCard:
    """The card of `rg/<dataset>-v0` (imports reasoning-gym)."""
    dataset_cls, _ = _classes(dataset)
    doc = (dataset_cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    knobs = {
        name: f"reasoning-gym config field (default {default!r})"
        for name, default in _config_fields(dataset).items()
    }
    knobs.update(_BRIDGE_KNOBS)
    category = dataset_cls.__module__.split(".")[1] if dataset_cls.__module__.count(".") >= 2 else "other"
    return EnvCard(
        id=f"rg/{dataset}-v0",
        family=f"reasoning-gym/{category}",
        description=(
            f"reasoning-gym's procedural `{dataset}` dataset ({category}): {doc or 'no description'} "
            "One question, one answer in <answer> tags, scored by the dataset's own score_answer."
        ),
        multi_turn=False,
        reward_range=(-format_coef, 1.0),
        reward_meaning="format_coef*(format_ok-1) + score_answer(answer) in [0, 1] (partial credit "
        "where the dataset gives it); -format_coef for an unreadable reply",
        difficulty_knobs=knobs,
        data_source=f"generated offline by reasoning-gym {REASONING_GYM.version} from the seed",
        license=REASONING_GYM.license,
    )


_MAX_SPLIT_TRIES = 256  # consecutive items looked at for one of the split's own
_MAX_CACHED_ENTRIES = 256  # items kept per source (see ReasoningGymSource.entry)
_ITEM_TIMEOUT_S = 30.0  # an item's generation; the normal ones take milliseconds to a second


class ItemTimeout(RuntimeError):
    """A reasoning-gym generator ran past `_ITEM_TIMEOUT_S` on one item (an upstream hang)."""


def split_of_question(question: str) -> str:
    """The split an item belongs to, by its question: "test" for half of all questions (by a
    stable hash, the same in every process), "train" for the rest."""
    return split_of(question, modulus=2)


_ANSWER_BLOCK = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.DOTALL)  # extract_answer's
_DATASETS: dict[str, Any] = {}
_MAX_CACHED_DATASETS = 64


def _dataset(dataset: str, config: dict[str, Any], seed: int, size: int) -> Any:
    """The reasoning-gym dataset object for this configuration (built once per process)."""
    key = json.dumps([dataset, config, seed, size], sort_keys=True, default=repr)
    ds = _DATASETS.get(key)
    if ds is None:
        dataset_cls, config_cls = _classes(dataset)
        cfg = config_cls(**config, seed=seed, size=size)
        if hasattr(cfg, "validate"):
            cfg.validate()
        ds = dataset_cls(config=cfg)
        if len(_DATASETS) >= _MAX_CACHED_DATASETS:
            _DATASETS.clear()
        _DATASETS[key] = ds
    return ds


class ReasoningGymEnv(ProblemEnv):
    """One reasoning-gym item (`entry`: its question, answer and metadata); see the module
    docstring for the reward. Metrics: `format`, `score`, `correct` (score == 1),
    `invalid_response`, `score_error` and (only when it happens) `grader_timeout`."""

    def __init__(self, renderer: Renderer, dataset: Any, entry: dict, *, answer_format: str,
                 system_prompt: str | None, format_coef: float, grader_timeout_s: float) -> None:
        prefix = [Message(role="system", content=system_prompt)] if system_prompt else []
        super().__init__(renderer, convo_prefix=prefix, format_coef=format_coef,
                         grader_timeout_s=grader_timeout_s)
        self.dataset = dataset
        self.entry = entry
        self.answer_format = answer_format

    def get_question(self) -> str:
        return str(self.entry["question"])

    def get_reference_answer(self) -> str:
        answer = self.entry.get("answer")
        return "" if answer is None else str(answer)

    def get_reference_response(self) -> str:
        if self.answer_format == "tags":
            return f"<answer>{self.get_reference_answer()}</answer>"
        return self.get_reference_answer()

    def extract(self, content: str) -> str | None:
        if self.answer_format == "raw":
            return content.strip()
        from reasoning_gym.utils import extract_answer

        return extract_answer(content)

    def answer_policy(self, content: str) -> str | None:
        """llm-gym's one answer policy on top of the dataset's scorer (tags format): "conflicting"
        when the reply's `<answer>` blocks (its declarations) do not all say the same, or one is
        left unclosed; None otherwise. Conflicting earns no score: the dataset's
        `extract_answer` reads only the last block, so an answer listed beside others would be
        paid. Text outside the blocks is never read."""
        if self.answer_format != "tags":
            return None
        blocks = list(_ANSWER_BLOCK.finditer(content))
        if not blocks:
            return None
        if len({b.group(1).strip() for b in blocks}) > 1 or content.count("<answer>") > len(blocks):
            return "conflicting"  # another answer, or one more opened and left unclosed
        return None

    def check_format(self, sample_str: str) -> bool:
        return self.answer_format == "raw" or self.extract(sample_str) is not None

    def check_answer(self, sample_str: str) -> bool:
        return self._score(sample_str)[0] == 1.0

    def _score(self, content: str) -> tuple[float, bool, float]:
        """(score in [0, 1], whether the answer had the format, score_error)."""
        if self.answer_policy(content) is not None:
            return 0.0, True, 0.0
        return self._dataset_score(content)

    def _dataset_score(self, content: str) -> tuple[float, bool, float]:
        """`_score` without the answer policy: the dataset's `score_answer` alone."""
        answer = self.extract(content)
        try:
            score = float(self.dataset.score_answer(answer, self.entry))
        except Exception:  # scorers that parse the answer raise on garbage: model output, not a bug
            return 0.0, answer is not None, 1.0
        if not math.isfinite(score):
            return 0.0, answer is not None, 1.0
        return min(max(score, 0.0), 1.0), answer is not None, 0.0

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        content = get_text_content(message)
        metrics: dict[str, float] = {"invalid_response": 0.0, "score_error": 0.0, "conflicting": 0.0}
        if (
            self.renderer.has_invalid_ids(action) or "\ufffd" in content
            or len(content) > MAX_RESPONSE_CHARS
        ):
            score, format_ok = 0.0, 0.0
            metrics["invalid_response"] = 1.0
        else:
            policy = self.answer_policy(content)
            metrics["conflicting"] = float(policy == "conflicting")
            if policy is not None:
                outcome = None
            elif self.grader_timeout_s is None:  # no bound asked for: the scorer runs inline
                outcome = BoundedCall(ok=True, value=self._dataset_score(content))
            else:
                outcome = await acall_bounded(self._dataset_score, content,
                                              timeout_s=self.grader_timeout_s)
            if outcome is None:  # refused by the policy: answer tags present, no score
                score, format_ok = 0.0, float(termination.is_stop_sequence)
            elif outcome.ok:
                score, has_format, metrics["score_error"] = outcome.value
                format_ok = float(has_format and termination.is_stop_sequence)
            else:
                score, format_ok = 0.0, 0.0
                metrics["grader_timeout" if outcome.timed_out else "score_error"] = 1.0
        reward = self.format_coef * (format_ok - 1.0) + score
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=ModelInput.empty(),
            next_stop_condition=self.stop_condition,
            metrics={"format": format_ok, "score": score, "correct": float(score == 1.0), **metrics},
            logs={"response": content[:2000], "reference": self.get_reference_answer()[:2000],
                  "termination": termination.value},
        )


class ReasoningGymSource(EnvSource):
    """Items of one reasoning-gym dataset (`dataset`), with its config fields as knobs."""

    card = LazyCard(EnvCard(  # pyright: ignore[reportAssignmentType] - a descriptor giving EnvCard
        id="rg/<dataset>-v0", family="reasoning-gym", description="a reasoning-gym dataset",
        multi_turn=False, reward_range=(-0.1, 1.0), reward_meaning="score_answer",
        difficulty_knobs=dict(_BRIDGE_KNOBS), data_source="reasoning-gym", license="Apache-2.0",
    ))

    def __init__(
        self,
        *,
        renderer: Renderer,
        split: str = "train",
        dataset: str,
        size: int = DEFAULT_SIZE,
        answer_format: str = "tags",
        system_prompt: str | None = None,
        format_coef: float = 0.1,
        grader_timeout_s: float = 10.0,
        **config: Any,
    ) -> None:
        fields = _config_fields(dataset)
        self.card = dataset_card(dataset, float(format_coef))
        if "seed" in config:
            raise TypeError(
                "seed is not a knob of rg/ envs: the split picks the dataset seed and "
                "reset(seed=...) the item"
            )
        unknown = sorted(set(config) - set(fields))
        if unknown:
            close = [c for u in unknown for c in difflib.get_close_matches(u, list(fields), n=1)]
            hint = f" Did you mean: {', '.join(map(repr, close))}?" if close else ""
            raise TypeError(
                f"rg/{dataset}-v0 got unknown option(s) {unknown}; its config fields are "
                f"{sorted(fields)} (and {sorted(_BRIDGE_KNOBS)}).{hint}"
            )
        super().__init__(renderer=renderer, split=split)
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 2**31:
            raise ValueError(f"size must be an int in [1, 2**31], got {size!r}")
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got {answer_format!r}")
        if not (isinstance(format_coef, (int, float)) and 0 <= format_coef <= 1):
            raise ValueError(f"format_coef must be a number in [0, 1], got {format_coef!r}")
        if system_prompt is None and answer_format == "tags":
            from reasoning_gym.utils import SYSTEM_PROMPTS

            system_prompt = SYSTEM_PROMPTS["default"]
        # JSON gives lists where reasoning-gym's defaults are tuples: keep the default's type.
        for key, value in list(config.items()):
            if isinstance(value, list) and isinstance(fields[key], tuple):
                config[key] = tuple(value)
        self.dataset_name = dataset
        self.size = size
        self.answer_format = answer_format
        self.system_prompt = system_prompt
        self.format_coef = float(format_coef)
        self.grader_timeout_s = grader_timeout_s
        self.dataset = _dataset(dataset, config, SPLIT_SEEDS[split], size)
        self._entries: OrderedDict[int, dict | ItemTimeout] = OrderedDict()
        self._dataset_key = json.dumps([dataset, config, SPLIT_SEEDS[split], size], sort_keys=True,
                                       default=repr)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)  # the card's, without building its example

    # --- the card's example: the split's first item and its reference answer ---------------------
    def _example_key(self) -> tuple:
        return ("rg", self._dataset_key, self.answer_format, self.system_prompt)

    def _example_episode(self) -> list[dict[str, str]]:
        """Item 0 of this split's dataset (the first of items 0-4 with a non-empty reference
        answer), answered with the reference response the gold scripted reply uses."""
        env = None
        for index in range(min(5, self.size)):
            env = ReasoningGymEnv(
                self.renderer, self.dataset, self.entry(index), answer_format=self.answer_format,
                system_prompt=self.system_prompt, format_coef=self.format_coef,
                grader_timeout_s=self.grader_timeout_s,
            )
            if env.get_reference_answer().strip():
                break
        assert env is not None
        episode = [message("system", self.system_prompt)] if self.system_prompt else []
        return episode + [message("user", env.get_question()),
                          message("assistant", env.get_reference_response())]

    def entry(self, index: int) -> dict:
        """Item `index` of the split's dataset, made on a private copy of the global random state
        seeded from the index: a few datasets (list_functions) draw from the global `random`
        module, so the same item would otherwise differ from call to call. The last
        `_MAX_CACHED_ENTRIES` items are kept (a copy is handed out): the G episodes of a GRPO
        group, and `llm-gym check`'s replays, ask for the same item again, and some generators
        take a second per item (futoshiki). Raises `ItemTimeout` for an item whose generator
        hangs (see `_make_entry`)."""
        cached = self._entries.get(index)
        if cached is None:
            cached = self._entries[index] = self._make_entry(index)
            if len(self._entries) > _MAX_CACHED_ENTRIES:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(index)
        if isinstance(cached, ItemTimeout):  # remembered: the same index hangs every time
            raise cached
        return copy.deepcopy(cached)

    def _make_entry(self, index: int) -> dict | ItemTimeout:
        """The item, generated within `_ITEM_TIMEOUT_S` (an `ItemTimeout` when it ran past: a few
        generators loop forever on some indices -- maze's test split at index 658 draws a start
        cell in a maze without one); the generator's own exceptions propagate."""
        # Whatever a generator warns about (deprecations, numpy's floating-point notices) is
        # upstream's business, not the user's, and would fail Gymnasium's check_env.
        with _PrivateGlobalRNG(SPLIT_SEEDS[self.split] + index).active(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = call_bounded(self.dataset.__getitem__, index, timeout_s=_ITEM_TIMEOUT_S,
                                   inline_s=_ITEM_TIMEOUT_S)
        if outcome.ok:
            return outcome.value
        if outcome.timed_out:
            return ItemTimeout(f"rg/{self.dataset_name}-v0: reasoning-gym's generator ran past "
                               f"{_ITEM_TIMEOUT_S:g} s on item {index} of split {self.split!r}")
        raise outcome.exception or RuntimeError(outcome.error)

    def split_entry(self, start: int) -> dict:
        """The first item from index `start` on (wrapping around) whose question belongs to this
        split (`split_of_question`), passing over items whose generator hangs (`ItemTimeout`);
        raises `ValueError` when none of the next few hundred does (a dataset whose questions are
        all alike)."""
        tries = min(self.size, _MAX_SPLIT_TRIES)
        for k in range(tries):
            try:
                entry = self.entry((start + k) % self.size)
            except ItemTimeout:
                continue
            if split_of_question(str(entry["question"])) == self.split:
                return entry
        raise ValueError(
            f"rg/{self.dataset_name}-v0: none of {tries} items from index {start} has a question "
            f"of split {self.split!r}: the dataset's task space is too small for two disjoint "
            "splits (try a larger size or other config values)")

    def make_env(self, rng: np.random.Generator) -> ReasoningGymEnv:
        entry = self.split_entry(int(rng.integers(0, self.size)))
        return ReasoningGymEnv(
            self.renderer, self.dataset, entry, answer_format=self.answer_format,
            system_prompt=self.system_prompt, format_coef=self.format_coef,
            grader_timeout_s=self.grader_timeout_s,
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the item's own reference answer, in the answer format (the dataset's
        `score_answer` pays it 1). Adversarial: an empty reply (no answer: the format penalty
        under "tags", 0 under "raw"). None when the dataset has no reference answers
        (`no_gold_reason`)."""
        if self.no_gold_reason():
            return []
        return [
            ScriptedCase("reference answer", "gold",
                         lambda env, _obs: env.get_reference_response(), 1.0, 1.0),
            ScriptedCase("empty reply", "adversarial", lambda env, _obs: "",
                         -self.format_coef, 0.0),
        ]

    def task_key(self, env: Any) -> Any:
        """The item's question: it states the whole task (the dataset object behind it, which
        `llm-gym check` would otherwise read for every episode, is the same for all)."""
        return env.get_question()

    def hash_seed_reason(self) -> str | None:
        return (f"reasoning-gym's generators (e.g. isomorphic_strings, word_ladder) draw from "
                f"sets of strings, whose order follows the hash seed: set PYTHONHASHSEED for "
                f"the same {self.dataset_name} items in every process")

    def no_gold_reason(self) -> str | None:
        if self.entry(0).get("answer") is None:
            return (f"reasoning-gym's {self.dataset_name} gives no reference answer (many "
                    "answers are right; its score_answer checks a reply against the puzzle) "
                    "and no solver")
        return None
