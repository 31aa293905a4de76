"""`llm/PairwisePreference-v0`: open-ended writing rewarded by pairwise judging within the group.

A task asks for a one-sentence product description ("... for the Zorvo desk lamp. It must
mention the word 'bright'. Use at most 15 words."). The G replies of a group (G episodes on the
same task: `PairwiseGroupBuilder`, or `llm_gym.wrappers.GymEnvGroupBuilder` over the registered
id) are compared in a round robin by a judge, and each reply's group reward is its **win rate**: points
over comparisons, a win 1, a tie 1/2, a loss 0, so the rewards lie in [0, 1] and sum to G/2.
Every unordered pair is judged in **both orders** (the cookbook's `ALL_PAIRS_BOTH_WAYS`), so a
judge's position bias cancels: a judge that always answers "A" gives every reply 1/2; the
metric `judge_inconsistent` counts the pairs whose two verdicts disagreed. For large groups and
costly judges, `matchup_group_size=k` holds the round robins within consecutive blocks of k
members (the cookbook's knob of that name): G(k-1) judge calls instead of G(G-1).

The judge is pluggable: any `llm_gym.completers.MessageCompleter` (a real model in real use,
e.g. `RendererMessageCompleter` or `TinkerMessageCompleter`), passed as `judge=` to the source
or to `gym.make`. It receives `judge_messages(task, reply_a, reply_b)` and must answer "A", "B"
or "Tie" (anything else counts as a tie, metric `judge_invalid`). It is wrapped as a
`llm_gym.preference.PreferenceModel` (`JudgePreferenceModel`: a `Comparison` in, -1 / 0 / 1 out,
the cookbook's convention), so a cookbook-style preference model can be used in its place
(`preference_model=`). The default, `RuleJudge`, is deterministic and reads only the messages.
It checks the task's requirements (`requirements`: one sentence, names the brand and product as
one phrase, each required word, at most the word limit, ASCII, well formed, no repetition) and
prefers, in this order: a genuine description (one well-formed sentence naming the product, no
repetition) over anything else, then more requirements met, then the shorter reply (unless
neither meets any), else a tie. "Well formed" is what tells a sentence from keyword salad
("Caleo coffee mug hot."): a finite verb with words after it (one of
`envs_catalog.text.genuine.VERBS`, a word in -s or -ed right after the product name, or a word
taking an object: "Campers praise the tent"), a function word besides it (the product's and the
required words do not count), and no dangling last word (an article, a conjunction, a
preposition that is no particle, an auxiliary with no "how", "than" or "as" before it). So
salad loses to a real sentence in both orders, and the shortest reply that can win is a real
sentence ("This Caleo coffee mug is hot."); a rule judge is still no reader: a rare verb it
does not know, or salad that happens to hold a verb and a function word, can fool it, so train
with a model judge (`judge=`) where the wording matters. A reply that did not end on the
renderer's end of turn loses to one that did without asking the judge (two such replies tie).

Single episodes (the Gymnasium face) have reward 0: the signal is the group reward, which needs
the group path (`PairwiseGroupBuilder`, `GymEnvGroupBuilder`, or `TextEnv.compute_group_rewards`).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from envs_catalog.text.genuine import FUNCTION_WORDS, VERBS
from llm_gym.authoring import check_int, split_of
from llm_gym.completers import MessageCompleter
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.model_input import ModelInput
from llm_gym.preference import Comparison, PreferenceModel
from llm_gym.renderers import Renderer
from llm_gym.renderers.base import Message, get_text_content
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    Observation,
    StepResult,
    StopCondition,
    Trajectory,
)
from llm_gym.scripted import ScriptedCase

PRODUCTS: dict[str, tuple[str, ...]] = {
    "water bottle": ("cold", "steel", "leakproof", "light"),
    "desk lamp": ("bright", "dimmable", "warm", "slim"),
    "backpack": ("waterproof", "light", "pockets", "padded"),
    "coffee mug": ("ceramic", "hot", "handle", "large"),
    "running shoes": ("soft", "grip", "light", "breathable"),
    "notebook": ("paper", "pocket", "dotted", "sturdy"),
    "umbrella": ("windproof", "compact", "folding", "bright"),
    "headphones": ("wireless", "quiet", "battery", "soft"),
    "kitchen knife": ("sharp", "steel", "balanced", "light"),
    "tent": ("waterproof", "light", "roomy", "quick"),
    "bicycle helmet": ("safe", "light", "vents", "adjustable"),
    "wall clock": ("silent", "round", "wooden", "large"),
}
BRANDS = ("Zorvo", "Kestra", "Lumio", "Brisa", "Tovik", "Nerra", "Alto", "Quilla", "Senna",
          "Varda", "Miro", "Okka", "Pelto", "Runa", "Istra", "Dovo", "Caleo", "Henna", "Juno",
          "Fenix")
MAX_CHARS = 1000  # longer replies meet no requirement (the judge sees them truncated)
_FEATURES = frozenset(w for words in PRODUCTS.values() for w in words)
# Verbs that are not also a product feature ("light", "handle" and "grip" are listed by what
# they describe): a stray feature word is no verb.
_VERBS = VERBS - _FEATURES
# Words a sentence cannot end on: articles, determiners, conjunctions, prepositions that are
# never a verb's particle ("roll in" and "set up" may end one); and auxiliaries, unless a
# clause word before them takes their complement ("how light it is").
_DANGLING = frozenset("""
a an the this that these those my your his her its our their every each some any no
among at between during for from into of onto per to toward towards until upon via with without
and or but nor so yet because although though while if unless whether
""".split())
_AUXILIARIES = frozenset("""
am is are was were be been being have has had having do does did can could will would shall
should may might must
""".split())
_CLAUSE_WORDS = frozenset("how what as than where who which whatever however".split())
_ADVERBS = frozenset("never always often also just really only even still rarely easily".split())
_DETERMINERS = frozenset("a an the this that these those my your his her its our their every each "
                         "any some no".split())
_OBJECT_STARTS = _DETERMINERS | {"how", "what", "you", "it", "them", "us", "me"}
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
_TASK = re.compile(
    r"Write a one-sentence product description for the (?P<product>[A-Z][a-z]+(?: [a-z]+)+)\. "
    r"It must mention "
    r"the words? (?P<words>'[a-z]+'(?:, '[a-z]+')*)\. Use at most (?P<limit>[0-9]+) words\."
)


def task_prompt(product: str, keywords: Sequence[str], max_words: int) -> str:
    """The writer's prompt; `product` is the brand and the product ("Zorvo desk lamp")."""
    noun = "word" if len(keywords) == 1 else "words"
    quoted = ", ".join(f"'{k}'" for k in keywords)
    return (f"Write a one-sentence product description for the {product}. It must mention "
            f"the {noun} {quoted}. Use at most {max_words} words.")


def parse_task(text: str) -> tuple[str, list[str], int] | None:
    """(product, required words, word limit) read back from a `task_prompt`, or None."""
    m = _TASK.search(text)
    if m is None:
        return None
    return m.group("product"), re.findall(r"'([a-z]+)'", m.group("words")), int(m.group("limit"))


def _verb_positions(words: list[str], named: list[str], required: set[str]) -> list[int]:
    """Where `words` (as written) has a finite verb: a word of `_VERBS` (an -ing form only
    after an auxiliary: "reading" alone is a noun or an adjective; never an acronym such as
    "LED"); the first word after the product name, adverbs such as "never" skipped, when it
    ends in -s or -ed ("the knife tires"); a word followed by a determiner or "how" and not
    preceded by a determiner ("Spot the umbrella", "Campers praise the tent")."""
    found = [w.lower() for w in words]
    free = [w not in required and w not in FUNCTION_WORDS and not (len(o) > 1 and o.isupper())
            for w, o in zip(found, words)]
    verbs = {i for i, w in enumerate(found) if free[i] and w in _VERBS
             and (not w.endswith("ing") or (i > 0 and found[i - 1] in _AUXILIARIES))}
    verbs |= {i for i, w in enumerate(found) if w in _AUXILIARIES}
    for i in range(len(found) - len(named) + 1):
        if found[i:i + len(named)] == named:
            j = i + len(named)
            while j < len(found) and found[j] in _ADVERBS:
                j += 1
            if j < len(found) and free[j] and found[j].endswith(("s", "ed")):
                verbs.add(j)
    for i in range(len(found) - 1):
        if free[i] and found[i] not in named and found[i + 1] in _OBJECT_STARTS and (
                i == 0 or found[i - 1] not in _DETERMINERS):
            verbs.add(i)
    return sorted(verbs)


def _well_formed(words: list[str], named: list[str], required: set[str]) -> bool:
    """A sentence, not a keyword list: a verb (`_verb_positions`) with a word after it, a
    function word besides it (an article, preposition, pronoun, conjunction or auxiliary; the
    product's and the required words do not count), and no dangling last word."""
    found = [w.lower() for w in words]
    verbs = _verb_positions(words, named, required)
    function = {i for i, w in enumerate(found) if w not in required
                and (w in FUNCTION_WORDS or w.split("'")[0] in FUNCTION_WORDS)}
    dangling = found[-1] in _DANGLING or (
        found[-1] in _AUXILIARIES and not _CLAUSE_WORDS.intersection(found[:-1]))
    return (len(function | set(verbs)) >= 2 and bool(function - set(verbs))
            and any(i < len(found) - 1 for i in verbs) and not dangling)


def _no_repetition(found: list[str]) -> bool:
    """No word twice in a row, no content word three times, no word pair twice."""
    content = [w for w in found if w not in FUNCTION_WORDS]
    pairs = list(zip(found, found[1:]))
    return (all(a != b for a, b in pairs) and all(content.count(w) < 3 for w in set(content))
            and len(set(pairs)) == len(pairs))


def requirements(reply: str, product: str, keywords: Sequence[str], max_words: int) -> dict[str, bool]:
    """The task's checkable requirements, each True/False: `one_sentence`, `names_product` (the
    brand and product as one phrase), `word_limit`, `mentions_<word>` per required word,
    `well_formed` (a sentence, not a keyword list) and `no_repetition`. An empty, non-ASCII
    (look-alike letters) or over-long reply meets none."""
    text = reply.strip()
    ok = bool(text) and text.isascii() and len(text) <= MAX_CHARS and "\ufffd" not in text
    written = _WORD.findall(text) if ok else []
    found = [w.lower() for w in written]
    named = [p.lower() for p in product.split()]
    sentence_ends = re.findall(r"[.!?]+(?=\s|$)", text)
    out = {
        "one_sentence": ok and "\n" not in text and len(sentence_ends) == 1
                        and bool(re.search(r"[.!?]$", text)) and len(found) >= 3,
        "names_product": ok and any(found[i:i + len(named)] == named for i in range(len(found))),
        "word_limit": ok and 3 <= len(found) <= max_words,
    }
    for k in keywords:
        out[f"mentions_{k}"] = ok and k in found
    out["well_formed"] = ok and bool(found) and _well_formed(written, named, {*named, *keywords})
    out["no_repetition"] = ok and len(found) >= 3 and _no_repetition(found)
    return out


def genuine_description(met: dict[str, bool]) -> bool:
    """Whether `requirements` found a real description: one well-formed sentence naming the
    product, with no repetition (the required words and the limit are then counted apart)."""
    return all(met[k] for k in ("one_sentence", "names_product", "well_formed", "no_repetition"))


def judge_messages(task: str, reply_a: str, reply_b: str) -> list[dict]:
    """What the judge reads. Replies are truncated to `MAX_CHARS` and their '<<<' / '>>>' are
    broken up, so a reply cannot forge the delimiters."""
    def quote(text: str) -> str:
        text = text[:MAX_CHARS]
        while "<<<" in text or ">>>" in text:
            text = text.replace("<<<", "<< <").replace(">>>", "> >>")
        return text
    return [
        {"role": "system", "content": "You judge which of two replies completes a writing task "
                                      "better. Answer with exactly one of: A, B, Tie."},
        {"role": "user", "content": (f"Task:\n<<<\n{task}\n>>>\n\nReply A:\n<<<\n{quote(reply_a)}\n"
                                     f">>>\n\nReply B:\n<<<\n{quote(reply_b)}\n>>>\n\n"
                                     "Which reply completes the task better? Answer A, B or Tie.")},
    ]


_SECTIONS = re.compile(
    r"Task:\n<<<\n(.*?)\n>>>\n\nReply A:\n<<<\n(.*?)\n>>>\n\nReply B:\n<<<\n(.*?)\n>>>", re.DOTALL)


class RuleJudge(MessageCompleter):
    """The deterministic default judge: reads the task and both replies from `judge_messages`,
    prefers a genuine description (`genuine_description`) over anything else, then more
    requirements met, then (when both meet at least one) fewer characters; otherwise, or when
    the messages are not in that layout, "Tie"."""

    async def __call__(self, messages: Sequence[dict]) -> dict:
        return {"role": "assistant", "content": self.verdict(messages)}

    def verdict(self, messages: Sequence[dict]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        sections = _SECTIONS.search(text)
        task = parse_task(sections.group(1)) if sections else None
        if sections is None or task is None:
            return "Tie"
        a, b = sections.group(2), sections.group(3)
        met_a, met_b = (requirements(r, *task) for r in (a, b))
        score_a, score_b = ((genuine_description(m), sum(m.values())) for m in (met_a, met_b))
        if score_a != score_b:
            return "A" if score_a > score_b else "B"
        if score_a[1] == 0:  # neither meets anything: brevity is no merit then
            return "Tie"
        if len(a.strip()) != len(b.strip()):
            return "A" if len(a.strip()) < len(b.strip()) else "B"
        return "Tie"


def read_verdict(text: str) -> float | None:
    """-1 (A), 1 (B), 0 (Tie) from a judge's reply, or None when it is none of them."""
    word = text.strip().strip(".*\"'` ").lower()
    return {"a": -1.0, "b": 1.0, "tie": 0.0}.get(word)


class JudgePreferenceModel(PreferenceModel):
    """A `MessageCompleter` judge as a cookbook `PreferenceModel`: -1 prefers A, 1 prefers B,
    0 a tie (also for a reply that is not a verdict; `invalid` counts those)."""

    def __init__(self, judge: MessageCompleter) -> None:
        self.judge = judge
        self.invalid = 0

    async def __call__(self, comparison: Comparison) -> float:
        task = get_text_content(comparison.prompt_conversation[-1])
        a = get_text_content(comparison.completion_A[-1])
        b = get_text_content(comparison.completion_B[-1])
        reply = await self.judge(judge_messages(task, a, b))
        content = reply.get("content", "") if isinstance(reply, dict) else ""
        score = read_verdict(content if isinstance(content, str) else "")
        if score is None:
            self.invalid += 1
            return 0.0
        return score


class PairwiseEnv(Env):
    """One writing episode: the prompt, one reply, reward 0 (the group reward carries the
    signal). Metrics: `format` (ended on the renderer's end of turn), `requirements_met` (the
    rule requirements' share; a diagnostic, not the reward)."""

    def __init__(self, renderer: Renderer, product: str, keywords: Sequence[str], max_words: int):
        self.renderer = renderer
        self.product, self.keywords, self.max_words = product, tuple(keywords), max_words
        self.question = task_prompt(product, keywords, max_words)
        listed = keywords[0] if len(keywords) == 1 else ", ".join(keywords[:-1]) + " and " + keywords[-1]
        full = f"This {product} is {listed}."
        compact = f"{product} is {listed}."  # fits the smallest limit, 5 + num_keywords words
        self.answer = full if len(full.split()) <= max_words else compact
        self.reply: str | None = None
        self.valid = False
        self.key = ""  # the task's canonical key (the split hashes it); set by the source

    def conversation(self) -> list[Message]:
        return [Message(role="user", content=self.question)]

    def get_reference_response(self) -> str:
        """A reply meeting every rule requirement (for SFT warm starts)."""
        return self.answer

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        return (self.renderer.build_generation_prompt(self.conversation()),
                self.renderer.get_stop_sequences())

    def read(self, action: Action) -> tuple[str, bool]:
        message, termination = self.renderer.parse_response(action)
        return get_text_content(message), termination.is_stop_sequence

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self.reply, self.valid = self.read(action)
        met = requirements(self.reply, self.product, self.keywords, self.max_words)
        return StepResult(
            reward=0.0, episode_done=True, next_observation=ModelInput.empty(),
            next_stop_condition=self.renderer.get_stop_sequences(),
            metrics={"format": float(self.valid), "requirements_met": sum(met.values()) / len(met)},
            logs={"response": self.reply},
        )


class PairwisePreferenceSource(EnvSource):
    """Pairwise-judged writing tasks (`llm/PairwisePreference-v0`). Options beyond the knobs:
    `judge` (a `MessageCompleter`; default `RuleJudge()`) or `preference_model` (a cookbook
    `PreferenceModel`, used instead of the judge)."""

    DEFAULTS: dict[str, Any] = {"max_words": 15, "num_keywords": 1, "matchup_group_size": 0}
    card = EnvCard(
        id="llm/PairwisePreference-v0",
        family="multiagent",
        description=(
            "Open-ended writing judged pairwise within the group: write a one-sentence product "
            "description that mentions given words within a word limit. The G replies of a group "
            "are compared round-robin, every pair in both orders (position bias cancels), by a "
            "pluggable judge (any llm_gym MessageCompleter, e.g. a real model; default: a "
            "deterministic rule judge that prefers a real description, one well-formed sentence "
            "naming the product with no repetition (a finite verb and function words, not a "
            "keyword list such as 'Caleo coffee mug hot.'), over anything else, then replies "
            "meeting more of the checkable requirements (each required word, the word limit), "
            "then shorter ones); a reply's group reward is its win rate. A single "
            "episode's reward is 0: the signal needs the group path (PairwiseGroupBuilder or "
            "GymEnvGroupBuilder)."
        ),
        multi_turn=False,
        reward_range=(0.0, 1.0),
        reward_meaning=(
            "Per episode: 0. Group reward: win rate in the round robin (win 1, tie 1/2, loss 0, "
            "averaged over the member's 2(G-1) comparisons, or 2(k-1) within its block of "
            "matchup_group_size k; 1/2 with no opponent), so rewards sum to G/2. A reply "
            "not ending on the renderer's end of turn loses to every one that does."
        ),
        difficulty_knobs={
            "max_words": "word limit stated in the task, 5 + num_keywords to 40 (room for a "
                         "sentence, not a keyword list; default 15)",
            "num_keywords": "words the description must mention, 1-3 (default 1)",
            "matchup_group_size": "0: one round robin over the whole group (G(G-1) judge calls); "
                                  "k >= 2: round robins within consecutive blocks of k members, as "
                                  "the cookbook's matchup_group_size (default 0)",
            "judge": "the judge, any llm_gym.completers.MessageCompleter answering A, B or Tie "
                     "(an object, not a difficulty knob; default None: RuleJudge)",
            "preference_model": "a cookbook-style llm_gym.preference.PreferenceModel used "
                                "instead of the judge (default None)",
        },
        data_source="generated on the fly from the seed (a built-in product/feature list)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Write a one-sentence product description for the Zorvo desk lamp. "
                                        "It must mention the word 'bright'. Use at most 15 words."},
            {"role": "assistant", "content": "This Zorvo desk lamp is bright."},
        ],
        answer_form="free text",
    )

    def __init__(self, *, renderer: Renderer, split: str = "train",
                 judge: MessageCompleter | None = None,
                 preference_model: PreferenceModel | None = None, **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.max_words = check_int("max_words", own["max_words"], 6, 40)
        self.num_keywords = check_int("num_keywords", own["num_keywords"], 1, 3)
        if self.max_words < 5 + self.num_keywords:
            raise ValueError(f"max_words must be at least 5 + num_keywords ({5 + self.num_keywords}), "
                             f"room for a sentence rather than a keyword list; got {self.max_words}")
        self.matchup_group_size = check_int("matchup_group_size", own["matchup_group_size"], 0, 4096)
        if self.matchup_group_size == 1:
            raise ValueError("matchup_group_size must be 0 (the whole group) or at least 2, got 1")
        if judge is not None and not callable(judge):
            raise TypeError(f"judge must be a MessageCompleter (async callable on messages), got {judge!r}")
        if preference_model is not None and not callable(preference_model):
            raise TypeError(f"preference_model must be a PreferenceModel, got {preference_model!r}")
        self.judge = judge if judge is not None else RuleJudge()
        self.preference_model = preference_model

    def make_env(self, rng: np.random.Generator) -> PairwiseEnv:
        products = sorted(PRODUCTS)
        for _ in range(10_000):
            kind = products[int(rng.integers(len(products)))]
            product = f"{BRANDS[int(rng.integers(len(BRANDS)))]} {kind}"
            pool = PRODUCTS[kind]
            picked = rng.choice(len(pool), self.num_keywords, replace=False).tolist()
            keywords = [pool[i] for i in sorted(picked)]
            key = f"pairwise:{product}:{','.join(keywords)}:{self.max_words}"
            if split_of(key) == self.split:
                env = PairwiseEnv(self.renderer, product, keywords, self.max_words)
                env.key = key
                return env
        raise RuntimeError(f"no {self.split!r} task found; widen the knobs")

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        """Win rates in the both-orders round robin (see the module docstring)."""
        n = len(trajectory_group)
        if n == 0:
            return []
        first = env_group[0] if env_group else None
        if not isinstance(first, PairwiseEnv):
            raise TypeError("PairwisePreferenceSource judges PairwiseEnv episodes, got "
                            f"{type(first).__name__}")
        replies, valid = [], []
        for traj in trajectory_group:
            if traj.transitions:
                text, ok = first.read(traj.transitions[0].ac.tokens)
            else:
                text, ok = "", False
            replies.append(text)
            valid.append(ok)
        model = self.preference_model or JudgePreferenceModel(self.judge)
        prompt = [{"role": "user", "content": first.question}]
        block = self.matchup_group_size or n
        pairs = [(i, j) for i in range(n) for j in range(n)
                 if i != j and i // block == j // block]
        judged = [(i, j) for i, j in pairs if valid[i] and valid[j]]
        scores = await asyncio.gather(*(
            model(Comparison(prompt, [{"role": "assistant", "content": replies[i]}],
                             [{"role": "assistant", "content": replies[j]}]))
            for i, j in judged))
        verdict = dict(zip(judged, (max(-1.0, min(1.0, float(s))) for s in scores)))
        points = [0.0] * n
        for i, j in pairs:
            if (i, j) in verdict:
                s = verdict[(i, j)]
            else:  # a malformed reply loses to a well-formed one; two malformed ones tie
                s = 0.0 if valid[i] == valid[j] else (-1.0 if valid[i] else 1.0)
            points[i] += (1.0 - s) / 2.0
            points[j] += (1.0 + s) / 2.0
        inconsistent = sum(1 for i, j in judged if i < j and verdict[(i, j)] != -verdict[(j, i)])
        invalid = getattr(model, "invalid", 0)
        played = [0] * n
        for i, j in pairs:
            played[i] += 1
            played[j] += 1
        out = []
        for k in range(n):
            rate = points[k] / played[k] if played[k] else 0.5
            out.append((rate, {"win_rate": rate, "format": float(valid[k]),
                               "judge_calls": float(len(judged)),
                               "judge_inconsistent": float(inconsistent),
                               "judge_invalid": float(invalid)}))
        return out

    def scripted_cases(self) -> list[ScriptedCase]:
        """Single episodes always score 0 (the group reward is the signal): the reference and
        the adversarial replies (empty, the prompt echoed, a long ramble) all return exactly 0
        on the Gymnasium face; the group tests check that the judge ranks them."""
        return [
            ScriptedCase("reference (episode reward is 0)", "gold", lambda env, ob: env.answer, 0.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", 0.0, 0.0),
            ScriptedCase("echo prompt", "adversarial", lambda env, ob: env.question, 0.0, 0.0),
            ScriptedCase("ramble", "adversarial",
                         lambda env, ob: " ".join([env.answer] * 20), 0.0, 0.0),
        ]


@dataclass
class PairwiseGroupBuilder(EnvGroupBuilder):
    """`group_size` episodes of one task (`source.make_env(default_rng(seed))` each), rewarded by
    `source.compute_group_rewards` — the seed-API group path without Gymnasium."""

    source: PairwisePreferenceSource
    seed: int
    group_size: int

    async def make_envs(self) -> Sequence[Env]:
        return [self.source.make_env(np.random.default_rng(self.seed)) for _ in range(self.group_size)]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        return await self.source.compute_group_rewards(trajectory_group, env_group)

    def logging_tags(self) -> list[str]:
        return ["pairwise_preference"]
