"""Differential conformance: the cookbook's own recipe envs, ported by the mechanical import switch.

For each recipe env named in issue 9, `port.import_ported` loads the module's source from the
installed tinker-cookbook and executes it with `tinker_cookbook` -> `llm_gym` (see `port.py`). The
test asserts that the ported module imports, then runs the *original* through the cookbook
(`tinker_cookbook.rl.rollouts.do_group_rollout`, its `compute_advantages` and
`assemble_training_data`) and the *port* through llm_gym (`llm_gym.rl.do_group_rollout`, ...) with
the same scripted policy and the same tokenizer (one HF fast tokenizer trained in-process, under each
library's own "role_colon" renderer), and compares every reward, metric, log, observation,
action, stop reason and datum element by element.

A recipe that does not pass yet is `xfail(strict=True)` with the missing name or the first
difference as its reason, so this file is the status table: fixing a recipe flips its xfail to a
failure that says "remove the marker".
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
import sys
from functools import partial
from typing import Any, Callable

import pytest

from tests.conformance.conftest import require_cookbook
from tests.conformance.port import import_ported

RENDERER = "role_colon"
STOP = "\n\nUser:"


# ---------------------------------------------------------------------------------------------
# The two sides: one namespace per library so a recipe's setup code is written once.
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def tiny_hf_tokenizer():
    """A byte-level BPE HF fast tokenizer trained in-process on the recipes' own phrases (no files,
    no downloads), with `<|bos|>` / `<|eos|>` specials. Both sides get this same object. (Not the
    embedded ByteTokenizer: it encodes the text "<|bos|>" as seven bytes, so the cookbook's renderer,
    which encodes `tokenizer.bos_token`, would start every prompt differently from ours.)"""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<|bos|>", "<|eos|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    corpus = [
        "User: What is 4 + 5?\n\nAssistant: 9\n\nUser: Guess: 512 Too low Too high Correct",
        "System: Your job is to guess a integer between 0 and 1024. Failed to parse.",
        "Player: Is it an animal? Answerer: yes no. Write your answer in \\boxed{} format.",
        "Tell me about the sea. A much longer and more detailed answer. Explain tides.",
    ] * 4
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>")


class Side:
    """What a recipe setup needs from one library: renderer, completer types, rollout, data."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tokenizer = tiny_hf_tokenizer()
        if name == "cookbook":
            from tinker_cookbook import completers, renderers
            from tinker_cookbook.rl import data_processing, rollouts

            self.completers, self.renderers = completers, renderers
            self.do_group_rollout = rollouts.do_group_rollout
            self.compute_advantages = data_processing.compute_advantages
            self.assemble_training_data = data_processing.assemble_training_data
        else:
            import llm_gym.rl as rl
            from llm_gym import completers, renderers

            self.completers, self.renderers = completers, renderers
            self.do_group_rollout = rl.do_group_rollout
            self.compute_advantages = rl.compute_advantages
            self.assemble_training_data = rl.assemble_training_data
        self.renderer = self.renderers.get_renderer(RENDERER, self.tokenizer)


class ScriptedPolicy:
    """A TokenCompleter whose reply is a pure function of (strategy, conversation so far).

    The strategy identifies one env of a group across turns: on a first-turn prompt the k-th call
    with that exact prompt gets strategy k; every later observation extends an earlier
    (observation + reply), and inherits its strategy. Logprobs are a fixed function of position.
    """

    def __init__(self, side: Side, respond: Callable[[int, str], str]) -> None:
        self.side = side
        self.respond = respond
        self._first_seen: dict[tuple[int, ...], int] = {}
        self._owners: list[tuple[tuple[int, ...], int]] = []

    def _strategy(self, ob: tuple[int, ...]) -> int:
        owners = [(len(p), s) for p, s in self._owners if ob[: len(p)] == p]
        if owners:
            return max(owners)[1]
        k = self._first_seen.get(ob, 0)
        self._first_seen[ob] = k + 1
        return k

    async def __call__(self, model_input, stop, *, max_tokens: int | None = None):
        ob = tuple(model_input.to_ints())
        strategy = self._strategy(ob)
        text = self.respond(strategy, self.side.tokenizer.decode(list(ob)))
        tokens = self.side.tokenizer.encode(text, add_special_tokens=False)
        if max_tokens is not None:
            tokens = tokens[:max_tokens]
        self._owners.append((ob + tuple(tokens), strategy))
        logprobs = [-0.125 * ((i % 7) + 1) for i in range(len(tokens))]
        return self.side.completers.TokensWithLogprobs(tokens=tokens, maybe_logprobs=logprobs)


# ---------------------------------------------------------------------------------------------
# Running one side and flattening the results into plain data
# ---------------------------------------------------------------------------------------------


def _ints(model_input) -> list[int]:
    return list(model_input.to_ints())


def _arr(x) -> list:
    if hasattr(x, "tolist") and not hasattr(x, "to_numpy"):
        return list(x.tolist())
    if hasattr(x, "to_numpy"):  # tinker.TensorData
        return list(x.to_numpy().tolist())
    return list(x)


def _summarize(groups, data, metadata) -> dict[str, Any]:
    out_groups = []
    for g in groups:
        trajectories = []
        for t in g.trajectories_G:
            trajectories.append({
                "stop_reason": None if t.stop_reason is None else str(t.stop_reason),
                "final_ob": _ints(t.final_ob),
                "transitions": [
                    {
                        "ob": _ints(tr.ob),
                        "tokens": list(tr.ac.tokens),
                        "logprobs": list(tr.ac.logprobs),
                        "reward": float(tr.reward),
                        "episode_done": bool(tr.episode_done),
                        "metrics": dict(tr.metrics),
                        "logs": dict(tr.logs),
                    }
                    for tr in t.transitions
                ],
            })
        out_groups.append({
            "trajectories": trajectories,
            "final_rewards": [float(r) for r in g.final_rewards_G],
            "total_rewards": [float(r) for r in g.get_total_rewards()],
            "metrics": [dict(m) for m in g.metrics_G],
            "rollout_errors": len(g.rollout_errors),
        })
    datums = [
        {"model_input": _ints(d.model_input),
         **{k: _arr(v) for k, v in sorted(d.loss_fn_inputs.items())}}
        for d in data
    ]
    return {"groups": out_groups, "data": datums, "metadata": [dict(m) for m in metadata]}


def _run(side: Side, builders, respond) -> dict[str, Any]:
    policy = ScriptedPolicy(side, respond)

    async def go():
        return [await side.do_group_rollout(b, policy) for b in builders]

    groups = asyncio.run(go())
    advantages = side.compute_advantages(groups)
    data, metadata = side.assemble_training_data(groups, advantages)
    return _summarize(groups, data, metadata)


def _scalar_equal(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(
            a, b, rel_tol=1e-6, abs_tol=1e-7
        )
    return a == b


def _diff(a, b, path: str = "") -> list[str]:
    """Every difference, one line each; a list of scalars (tokens, logprobs) is one line naming
    its first differing index, so a shifted sequence does not bury the other differences."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in {'cookbook' if k in a else 'llm_gym'} ({(a if k in a else b)[k]!r})"
               for k in sorted(set(a) ^ set(b), key=str)]
        for k in sorted(set(a) & set(b), key=str):
            out += _diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if all(not isinstance(x, (list, dict)) for x in a + b):
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if not _scalar_equal(x, y)), None)
            if first is None and len(a) == len(b):
                return []
            first = min(len(a), len(b)) if first is None else first
            return [f"{path}: lengths {len(a)} (cookbook) / {len(b)} (llm_gym), first difference "
                    f"at [{first}]: {a[first:first + 8]!r} != {b[first:first + 8]!r}"]
        out = [] if len(a) == len(b) else [f"{path}: length {len(a)} (cookbook) != {len(b)} (llm_gym)"]
        for i, (x, y) in enumerate(zip(a, b)):
            out += _diff(x, y, f"{path}[{i}]")
        return out
    return [] if _scalar_equal(a, b) else [f"{path}: {a!r} (cookbook) != {b!r} (llm_gym)"]


def _logs_extra_keys_dropped(cookbook_run: dict, llm_gym_run: dict) -> None:
    """Logs are free-form records, not training inputs: llm_gym may log *more* keys (ProblemEnv
    logs `reference`, `response`, `termination`), but every key the cookbook logs must be there
    with the same value. Drop llm_gym-only keys before the element-by-element comparison."""
    for g_ours, g_theirs in zip(llm_gym_run["groups"], cookbook_run["groups"]):
        for t_ours, t_theirs in zip(g_ours["trajectories"], g_theirs["trajectories"]):
            for tr_ours, tr_theirs in zip(t_ours["transitions"], t_theirs["transitions"]):
                tr_ours["logs"] = {k: v for k, v in tr_ours["logs"].items() if k in tr_theirs["logs"]}


def _side_by_side(original: str, setup, respond, check=None) -> dict:
    """Port `original`, run both versions, and fail with every difference listed. `check` asserts
    that the cookbook's run exercised what the recipe's test means to exercise (several turns,
    varied rewards), so a vacuous comparison cannot pass. Returns the cookbook's run."""
    require_cookbook()
    import importlib

    theirs = importlib.import_module(original)
    ours = import_ported(original)
    cookbook, llm_gym_side = Side("cookbook"), Side("llm_gym")
    expected = _run(cookbook, setup(theirs, cookbook), respond)
    got = _run(llm_gym_side, setup(ours, llm_gym_side), respond)
    if check is not None:
        check(expected)
    _logs_extra_keys_dropped(expected, got)
    diffs = _diff(expected["groups"], got["groups"], "groups") + _diff(
        expected["data"], got["data"], "data") + _diff(expected["metadata"], got["metadata"], "metadata")
    assert not diffs, f"{len(diffs)} differences, first ones:\n" + "\n".join(diffs[:25])
    return expected


def _rewards(run: dict) -> list[float]:
    return [r for g in run["groups"] for r in g["total_rewards"]]


def _turns(run: dict) -> list[int]:
    return [len(t["transitions"]) for g in run["groups"] for t in g["trajectories"]]


def _varied_rewards(run: dict) -> None:
    assert len(set(_rewards(run))) > 1, _rewards(run)
    assert run["data"], "no datums"


# ---------------------------------------------------------------------------------------------
# Recipes
# ---------------------------------------------------------------------------------------------


def _arithmetic_respond(strategy: int, conversation: str) -> str:
    x, y = map(int, re.findall(r"What is (\d+) \+ (\d+)\?", conversation)[-1])
    return [f"{x + y}{STOP}", f"{x + y + 1}{STOP}", f"{x + y}", f"x{STOP}"][strategy % 4]


def test_arithmetic_env():
    def setup(mod, side):
        return mod.ArithmeticDataset(batch_size=2, renderer=side.renderer, group_size=4).get_batch(0)

    _side_by_side("tinker_cookbook.recipes.math_rl.arithmetic_env", setup, _arithmetic_respond, _varied_rewards)


def _math_respond(strategy: int, conversation: str) -> str:
    return [f"so \\boxed{{4}}{STOP}", f"\\boxed{{5}}{STOP}", f"4{STOP}", "\\boxed{4}"][strategy % 4]


def test_math_env():
    pytest.importorskip("pylatexenc", reason="math_rl's own grading dependency (tinker-cookbook[math-rl])")

    def setup(mod, side):
        make = partial(mod.MathEnv, "What is 2 + 2?", "4", side.renderer)
        return [mod.ProblemGroupBuilder(env_thunk=make, num_envs=4)]

    _side_by_side("tinker_cookbook.recipes.math_rl.math_env", setup, _math_respond, _varied_rewards)


def _guess_respond(strategy: int, conversation: str) -> str:
    """0: binary search; 1: garbage first, then binary search; 2: always 5 (runs out of turns)."""
    if strategy == 2:
        return f"Guess: 5{STOP}"
    guesses = [int(g) for g in re.findall(r"Guess: (\d+)", conversation)]
    feedback = re.findall(r"(Too low|Too high|Correct|Failed to parse)", conversation)
    if strategy == 1 and not feedback:
        return f"I think it is five{STOP}"
    lo, hi = 0, 1023
    for g, f in zip(guesses, [f for f in feedback if f != "Failed to parse"]):
        if f == "Too low":
            lo = g + 1
        elif f == "Too high":
            hi = g - 1
    return f"Guess: {(lo + hi) // 2}{STOP}"


def test_guess_number_env():
    def setup(mod, side):
        return mod.GuessNumberDataset(
            answers=[3, 700], renderer=side.renderer, batch_size=2, group_size=3
        ).get_batch(0)

    def check(run):
        _varied_rewards(run)
        turns = _turns(run)
        assert max(turns) == 10 and min(turns) < 10, turns  # one runs out of turns, some win
        assert any(tr["reward"] == -1.0 for g in run["groups"] for t in g["trajectories"]
                   for tr in t["transitions"]), "no failed-parse turn"

    _side_by_side("tinker_cookbook.recipes.multiplayer_rl.guess_number.env", setup, _guess_respond, check)


def _twenty_questions_respond(strategy: int, conversation: str) -> str:
    """0: asks, then guesses right on turn 2; 1: guesses wrong for 20 turns; 2: unterminated
    questions for 20 turns. After the first turn the player's own first reply says which one it
    is: the env re-renders the parsed reply, whose BPE tokens need not extend the sampled ones,
    so the policy's token-prefix bookkeeping cannot follow the strategy across turns here."""
    first_reply = re.search(r"Assistant: (.*?)\n\nUser:", conversation)
    if first_reply is not None:
        strategy = next(i for i, word in enumerate(("animal", "cat", "big")) if word in first_reply.group(1))
    turns = conversation.count("Assistant:")
    if strategy == 0 and turns >= 2:
        return f"Guess: dog{STOP}"
    return [f"Is it an animal?{STOP}", f"Guess: cat{STOP}", "Is it big?"][strategy % 3]


def test_twenty_questions_env():
    def setup(mod, side):
        class ScriptedAnswerer(side.completers.MessageCompleter):
            async def __call__(self, messages):
                text = side.renderers.get_text_content(messages[-1])
                return {"role": "assistant", "content": "yes" if "animal" in text else "no"}

        return [mod.TwentyQuestionsEnvGroupBuilder(
            answerer=ScriptedAnswerer(), answer="dog", renderer=side.renderer, num_envs=3
        )]

    _side_by_side(
        "tinker_cookbook.recipes.multiplayer_rl.twenty_questions.env", setup, _twenty_questions_respond,
        lambda run: (_varied_rewards(run), max(_turns(run)) == 20 or pytest.fail(_turns(run))),
    )


def _tictactoe_respond(strategy: int, conversation: str) -> str:
    """A pure function of the env's own conversation (players of a self-play game render
    concurrently, so call order says nothing): Player 0 takes the lowest free cell, Player 1 the
    highest, and either one answers the opponent's taking cell 4 with the illegal move [4]."""
    me = re.search(r"You are Player (\d)", conversation).group(1)
    if re.search(rf"\[Player {1 - int(me)}\] \[4\]", conversation):
        return "[4]\n"
    free = re.findall(r"'\[(\d)\]'", conversation.rsplit("Available Moves:", 1)[-1])
    return f"[{min(free) if me == '0' else max(free)}]\n"


def test_text_arena_env():
    """TicTacToe (offline; textarena's Wordle-like games download NLTK data): one self-play game
    (Player 0 wins the top row: +1 / -1) and two games against a scripted opponent that always
    plays [4], which the policy answers with the illegal [4] (ILLEGAL_MOVE_REWARD)."""
    pytest.importorskip("textarena", reason="text_arena's own dependency (tinker-cookbook[multiplayer-rl])")

    def setup(mod, side):
        class AlwaysCenter(side.completers.MessageCompleter):
            async def __call__(self, messages):
                return {"role": "assistant", "content": "[4]"}

        return [
            mod.TwoPlayerEnvGroupBuilder(game_name="TicTacToe-v0", renderer=side.renderer, num_envs=2,
                                         self_play=True),
            mod.TwoPlayerEnvGroupBuilder(game_name="TicTacToe-v0", renderer=side.renderer, num_envs=2,
                                         self_play=False, opponent_policy=AlwaysCenter()),
        ]

    def check(run):
        _varied_rewards(run)
        assert sorted(_rewards(run)) == [-2.0, -2.0, -1.0, 1.0], _rewards(run)
        assert max(_turns(run)) == 3, _turns(run)

    _side_by_side("tinker_cookbook.recipes.multiplayer_rl.text_arena.env", setup, _tictactoe_respond, check)


def _preference_respond(strategy: int, conversation: str) -> str:
    return ["A short answer." + STOP, "A much longer and more detailed answer." + STOP,
            "Unterminated answer", "Mid." + STOP][strategy % 4]


class LongerIsBetter:
    """A scripted preference model: prefers the longer completion (1.0 = B preferred)."""

    async def __call__(self, comparison) -> float:
        def length(messages):
            return sum(len(str(m["content"])) for m in messages)

        a, b = length(comparison.completion_A), length(comparison.completion_B)
        return 0.0 if a == b else (1.0 if b > a else -1.0)


def test_preference_envs():
    def setup(mod, side):
        return [mod.PairwisePreferenceGroupBuilder(
            convo_prefix=[{"role": "user", "content": "Tell me about the sea."}],
            policy_renderer=side.renderer,
            tournament_pattern=mod.TournamentPattern.ALL_PAIRS_BOTH_WAYS,
            preference_model=LongerIsBetter(),
            num_envs=4,
        )]

    _side_by_side("tinker_cookbook.rl.preference_envs", setup, _preference_respond, _varied_rewards)


def _prompt_only_respond(strategy: int, conversation: str) -> str:
    return [f"Sure.{STOP}", "no stop", f"{STOP}"][strategy % 3]


def test_distillation_prompt_only_env():
    def setup(mod, side):
        return [
            mod.ProblemGroupBuilder(env_thunk=partial(mod.PromptOnlyEnv, prompt, side.renderer), num_envs=3)
            for prompt in ("Explain tides.", "Name a prime.")
        ]

    def check(run):  # no reward at all: what must agree is the prompt and the datums
        assert set(_rewards(run)) == {0.0} and len(run["data"]) == 6, (_rewards(run), len(run["data"]))

    _side_by_side("tinker_cookbook.distillation.datasets", setup, _prompt_only_respond, check)


# ---------------------------------------------------------------------------------------------
# MessageEnv / EnvFromMessageEnv: an env written against the cookbook's message API, ported
# ---------------------------------------------------------------------------------------------

_MESSAGE_ENV_SOURCE = '''
from dataclasses import dataclass
from tinker_cookbook.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
from tinker_cookbook.rl.types import EnvGroupBuilder


class CountdownEnv(MessageEnv):
    """Say numbers; ends after three turns or on "stop"; reward is the length of the answer."""

    def __init__(self, index):
        # A distinct first prompt per env: the envs render their prompts concurrently (threads on
        # both sides), so which env calls the policy first varies; the reply is chosen by content.
        self.messages = [{"role": "user", "content": f"Count with me, player {index}."}]

    async def initial_observation(self):
        return list(self.messages)

    async def step(self, message):
        self.messages.append(message)
        text = message["content"]
        done = text.strip() == "stop" or len(self.messages) >= 7
        self.messages.append({"role": "user", "content": "Go on."})
        return MessageStepResult(reward=float(len(text)), episode_done=done,
                                 next_messages=list(self.messages), metrics={"chars": len(text)})


@dataclass(frozen=True)
class CountdownGroupBuilder(EnvGroupBuilder):
    renderer: object
    max_trajectory_tokens: int | None = None

    async def make_envs(self):
        return [EnvFromMessageEnv(self.renderer, CountdownEnv(i), failed_parse_reward=-2.0,
                                  max_trajectory_tokens=self.max_trajectory_tokens,
                                  max_generation_tokens=8) for i in range(4)]
'''


def _message_env_module(ported: bool):
    import types as pytypes

    from tests.conformance.port import port_source

    module = pytypes.ModuleType("ported_message_env" if ported else "cookbook_message_env")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(port_source(_MESSAGE_ENV_SOURCE) if ported else _MESSAGE_ENV_SOURCE,
                 module.__name__, "exec"), module.__dict__)
    return module


def _countdown_respond(strategy: int, conversation: str) -> str:
    """Player 0: three clean turns; 1: "stop" at once; 2: unterminated (parse error); 3: long
    answers. The player comes from the env's own first prompt, not from call order."""
    player = int(re.search(r"player (\d+)", conversation).group(1))
    return [f"one{STOP}", f"stop{STOP}", "no stop sequence", f"{'many words ' * 6}{STOP}"][player % 4]


def test_message_env_adapter():
    require_cookbook()
    cookbook, ours = Side("cookbook"), Side("llm_gym")
    runs = []
    for side, mod in ((cookbook, _message_env_module(False)), (ours, _message_env_module(True))):
        builders = [mod.CountdownGroupBuilder(side.renderer),
                    mod.CountdownGroupBuilder(side.renderer, max_trajectory_tokens=80)]
        runs.append(_run(side, builders, _countdown_respond))
    expected, got = runs
    metrics = [tr["metrics"] for g in expected["groups"] for t in g["trajectories"] for tr in t["transitions"]]
    assert any("parse_error" in m for m in metrics) and any("context_overflow" in m for m in metrics), metrics
    _logs_extra_keys_dropped(expected, got)
    diffs = _diff(expected["groups"], got["groups"], "groups") + _diff(expected["data"], got["data"], "data")
    assert not diffs, "\n".join(diffs[:25])


def test_port_source_rules():
    from tests.conformance.port import port_source

    src = "\n".join([
        "import tinker",
        "from tinker import ModelInput, SamplingClient",
        "from tinker_cookbook import renderers",
        "from tinker_cookbook.recipes.math_rl.math_grading import grade",
        "x = tinker.ModelInput.empty(); y = tinker.types.ModelInput.empty()",
        "z = tinker.ServiceClient",
        'patch("tinker_cookbook.rl.rollouts.x")',
    ])
    assert port_source(src).split("\n") == [
        "import tinker; import llm_gym",  # kept: ServiceClient is out of scope
        "from tinker import SamplingClient; from llm_gym import ModelInput",
        "from llm_gym import renderers",
        "from ported.tinker_cookbook.recipes.math_rl.math_grading import grade",
        "x = llm_gym.ModelInput.empty(); y = llm_gym.ModelInput.empty()",
        "z = tinker.ServiceClient",
        'patch("llm_gym.rl.rollouts.x")',
    ]
    assert port_source("import tinker\nm = tinker.ModelInput").split("\n") == [
        "import llm_gym", "m = llm_gym.ModelInput"
    ]
