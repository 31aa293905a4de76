"""`llm_gym.wrappers.curriculum`: the level moves by the running solve rate as the hand-computed
sequences say (thresholds, window or EMA, hysteresis, ladder ends), deterministically; a
`CurriculumRLDataset` makes each batch at its level with `SourceRLDataset`'s episodes, tags them
with `curriculum/...` metrics that reach the trainer's per-step averages, saves and restores its
state, and, played by a gold or a hopeless scripted policy on a catalog env, climbs or falls."""

from __future__ import annotations

import asyncio
import json
import random
import warnings
from typing import Sequence

import pytest

from envs_catalog.games.guess_number import GuessNumberSource, bisect_from_transcript
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.rl import do_group_rollout
from llm_gym.scripted import reply_tokens
from llm_gym.wrappers import Curriculum, CurriculumRLDataset, CurriculumTracker, SourceRLDataset, int_ladder

GUESS = "llm/GuessNumber-v0"
# Binary search needs max_number.bit_length() guesses: 4, 7 and 10.
LADDER = {"max_number": [8, 64, 512], "max_turns": [4, 7, 10]}


def tracker(levels: int = 4, **rules) -> CurriculumTracker:
    rules = {"promote_above": 0.75, "demote_below": 0.25, "window": 4, "min_episodes": 4, **rules}
    return CurriculumTracker(Curriculum({"n": list(range(levels))}, **rules))


def levels_after(t: CurriculumTracker, batches: Sequence[Sequence[float]]) -> list[int]:
    return [t.update(batch) for batch in batches]


# --- the level's rules ------------------------------------------------------------------------
def test_promotion_and_demotion_follow_the_hand_computed_sequence():
    t = tracker()
    batches = [
        [1, 1],        # 2 episodes < min_episodes 4: stay at 0
        [1, 1],        # 4 episodes, rate 1.0 >= 0.75: up to 1 (the window starts afresh)
        [1, 0, 1, 1],  # rate 0.75 >= 0.75: up to 2
        [0, 0, 0, 1],  # rate 0.25, not below 0.25: stay
        [0, 0],        # window [0, 1, 0, 0]: 0.25: stay
        [0],           # window [1, 0, 0, 0]: 0.25: stay
        [0],           # window [0, 0, 0, 0]: 0.0 < 0.25: down to 1
    ]
    assert levels_after(t, batches) == [0, 1, 2, 2, 2, 2, 1]
    assert t.solve_rate is None and t.episodes_at_level == 0  # a new level measures afresh


def test_a_level_must_see_min_episodes_before_it_moves_again():
    t = tracker(min_episodes=8)
    # The window (4) is full of successes after one batch, but the level waits for 8 episodes;
    # then the first failures at the new level wait as long before demoting.
    assert levels_after(t, [[1] * 4, [1] * 4, [0] * 4, [0] * 4]) == [0, 1, 1, 0]


def test_a_rate_between_the_thresholds_keeps_the_level():
    t = tracker(start_level=1)
    assert levels_after(t, [[1, 0]] * 10) == [1] * 10


def test_the_level_stays_inside_the_ladder():
    top = tracker(levels=3)
    assert levels_after(top, [[1] * 4] * 6) == [1, 2, 2, 2, 2, 2]
    bottom = tracker(levels=3, start_level=2)
    assert levels_after(bottom, [[0] * 4] * 6) == [1, 0, 0, 0, 0, 0]


def test_ema_weighs_recent_episodes_more():
    # Span 3: each older episode weighs 1 - 2/4 = 0.5; [1, 0, 1] -> (1 + 0.5*0 + 0.25*1) / 1.75
    t = tracker(window=3, min_episodes=3, promote_above=0.7, ema=True)
    t.update([1, 0])
    assert t.solve_rate == pytest.approx(1 / 3)  # (0.5*1 + 0) / 1.5
    assert t.update([1]) == 1  # 5/7 = 0.714 >= 0.7
    plain = tracker(window=3, min_episodes=3, promote_above=0.7)
    assert plain.update([1, 0, 1]) == 0  # the plain mean 2/3 stays below 0.7


def test_same_outcomes_in_the_same_order_give_the_same_levels():
    rng = random.Random(7)
    batches = [[float(rng.random() < 0.6) for _ in range(rng.randint(1, 6))] for _ in range(200)]
    for ema in (False, True):
        first, second = tracker(ema=ema), tracker(ema=ema)
        sequence = levels_after(first, batches)
        assert sequence == levels_after(second, batches)
        assert len(set(sequence)) > 1  # the stream moved the level: the check compares something


def test_tracker_state_round_trips_through_json():
    for ema in (False, True):
        original = tracker(ema=ema)
        levels_after(original, [[1, 1, 1, 1], [1, 0, 1]])
        restored = tracker(ema=ema)
        restored.load_state_dict(json.loads(json.dumps(original.state_dict())))
        assert (restored.level, restored.solve_rate) == (original.level, original.solve_rate)
        more = [[0, 1], [1, 1, 1], [0, 0, 0, 0], [0, 0]]
        assert levels_after(restored, more) == levels_after(original, more)


def test_int_ladder_includes_both_ends():
    assert int_ladder(10, 50, 10) == [10, 20, 30, 40, 50]
    assert int_ladder(8, 4, -2) == [8, 6, 4]
    assert int_ladder(3, 3) == [3]
    assert Curriculum({"n": range(4, 9, 2)}).knobs == {"n": (4, 6, 8)}


# --- the dataset ------------------------------------------------------------------------------
class Bisect(TokenCompleter):
    """The gold policy: binary search read off the transcript alone, so one instance serves every
    episode of a batch at once."""

    def __init__(self, renderer):
        self.renderer = renderer

    async def __call__(self, model_input, stop, *, max_tokens=None):
        text = self.renderer.tokenizer.decode(model_input.to_ints())
        tokens = reply_tokens(self.renderer, str(bisect_from_transcript(text)), stop)
        return TokensWithLogprobs(tokens, [0.0] * len(tokens))


class Zero(Bisect):
    """A hopeless policy: always 0, outside 1..max_number, so every turn is invalid."""

    async def __call__(self, model_input, stop, *, max_tokens=None):
        tokens = reply_tokens(self.renderer, "0", stop)
        return TokensWithLogprobs(tokens, [0.0] * len(tokens))


def guess_dataset(**rules) -> CurriculumRLDataset:
    rules = {"promote_above": 0.75, "demote_below": 0.25, "window": 4, "min_episodes": 4, **rules}
    return CurriculumRLDataset(GUESS, Curriculum(LADDER, **rules), batch_size=2, group_size=2, seed=3)


def play(dataset, index: int, policy: TokenCompleter) -> list:
    """Roll out batch `index` of `dataset` (any RLDataset) with `policy`, as a trainer step does."""
    async def run():
        return await asyncio.gather(*[do_group_rollout(b, policy) for b in dataset.get_batch(index)])

    return asyncio.run(run())


def test_gold_policy_climbs_the_ladder_and_a_hopeless_one_falls_to_the_bottom():
    from trainers.grpo.trainer import episode_metric_means, group_stats

    climbing = guess_dataset()
    policy = Bisect(climbing.renderer)
    seen = []
    for index in range(4):
        groups = play(climbing, index, policy)
        level = groups[0].metrics_G[0]["curriculum/level"]
        seen.append(level)
        assert group_stats(groups)["correct_sum"] == 4  # every episode solved
        expected = {"curriculum/level": level, "curriculum/max_number": LADDER["max_number"][level],
                    "curriculum/max_turns": LADDER["max_turns"][level]}
        for group in groups:
            for metrics, trajectory in zip(group.metrics_G, group.trajectories_G):
                assert expected.items() <= metrics.items()
                assert expected.items() <= trajectory.transitions[-1].metrics.items()
        # what the GRPO trainer logs each step from the episodes' last transitions
        means = episode_metric_means(groups)
        assert {f"env/{k}": float(v) for k, v in expected.items()}.items() <= means.items()
        # the running rate exists once the level has seen episodes (only at the top, here)
        assert ("env/curriculum/solve_rate" in means) == (index == 3)
    assert seen == [0, 1, 2, 2]
    assert climbing.level == 2

    falling = guess_dataset(start_level=2)
    policy = Zero(falling.renderer)
    seen = [play(falling, i, policy)[0].metrics_G[0]["curriculum/level"] for i in range(4)]
    assert seen == [2, 1, 0, 0]
    assert falling.level == 0


def train_on_a_falling_curriculum(tmp_path, **cfg_fields):
    """`train(cfg, dataset=...)` of the tiny model on GuessNumber with a curriculum that starts at
    its top level (512 numbers): a random model solves nothing, so the level falls one a step (4
    episodes a step = min_episodes). Returns (cfg, dataset)."""
    from trainers.grpo import trainer
    from trainers.grpo.config import GRPOConfig

    cfg = GRPOConfig(**{**dict(model="tiny", env=GUESS, sft_steps=0, group_size=2, groups_per_batch=2,
                               max_tokens=2, max_turns=2, eval_problems=2, output_dir=str(tmp_path),
                               progress=False, seed=0), **cfg_fields})
    dataset = CurriculumRLDataset(cfg.env, Curriculum({"max_number": [8, 64, 512]}, window=4,
                                                      min_episodes=4, start_level=2),
                                  cfg.groups_per_batch, cfg.group_size, cfg.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "trained on no datum": every group's rewards are equal
        trainer.train(cfg, dataset=dataset)
    return cfg, dataset


def test_the_grpo_trainer_logs_the_level_of_each_step(tmp_path):
    """No trainer change: `train(cfg, dataset=...)` logs `env/curriculum/...` (its mean over the
    step's episodes of their last transition's metrics) in metrics.jsonl; a random tiny model
    solves nothing, so the level falls by one each step (4 episodes a step = min_episodes)."""

    cfg, dataset = train_on_a_falling_curriculum(tmp_path, steps=3)
    records = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = {r["step"]: r for r in records if "loss" in r}
    assert [steps[s]["env/curriculum/level"] for s in (1, 2, 3)] == [2, 1, 0]
    assert [steps[s]["env/curriculum/max_number"] for s in (1, 2, 3)] == [512, 64, 8]
    assert dataset.level == 0


def test_a_resumed_run_continues_at_the_level_its_checkpoint_saved(tmp_path):
    """The trainer saves a stateful dataset's `state_dict()` with each checkpoint and loads it into
    the dataset it is given on resume: the resumed step is made at the saved level, not at
    `start_level` again."""
    from trainers.grpo.checkpoint import latest_intact_checkpoint

    def run(steps: int, resume: bool) -> CurriculumRLDataset:
        return train_on_a_falling_curriculum(
            tmp_path, steps=steps, save_every=1, run_name="cur", resume=resume,
            resume_override="steps" if resume else None)[1]

    first = run(steps=1, resume=False)  # level 2 at step 1; the outcomes are pending in its state
    import torch

    checkpoint = latest_intact_checkpoint(tmp_path / "cur")
    assert checkpoint is not None
    saved = torch.load(checkpoint / "trainer_state.pt", weights_only=False)
    assert saved["extra"]["dataset"] == first.state_dict()
    resumed = run(steps=3, resume=True)
    records = [json.loads(line) for line in (tmp_path / "cur" / "metrics.jsonl").read_text().splitlines()]
    levels = {r["step"]: r["env/curriculum/level"] for r in records if "loss" in r}
    assert levels == {1: 2, 2: 1, 3: 0}  # as the uninterrupted run's: step 2 starts from the saved state
    assert resumed.level == 0


def test_a_fixed_level_gives_source_rl_datasets_episodes():
    fixed = SourceRLDataset.from_id(GUESS, 2, 2, seed=3, max_number=64, max_turns=7)
    curriculum = guess_dataset(start_level=1, min_episodes=10_000)  # never moves
    for index in (0, 5):
        assert [b.seed for b in curriculum.get_batch(index)] == [b.seed for b in fixed.get_batch(index)]

        policy = Bisect(fixed.renderer)
        ours, theirs = play(curriculum, index, policy), play(fixed, index, policy)
        assert [[tr.ac.tokens for tr in t.transitions] for g in ours for t in g.trajectories_G] == \
            [[tr.ac.tokens for tr in t.transitions] for g in theirs for t in g.trajectories_G]
        assert [g.get_total_rewards() for g in ours] == [g.get_total_rewards() for g in theirs]


def test_outcomes_are_folded_in_group_order_whatever_order_groups_finish_in():
    # The window (4) holds a batch's last two groups, so the order of its groups decides the level.
    rise = [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]  # in group order: the window is all solved
    fall = [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]  # in group order: the window is all failed
    outcomes = [rise, fall] * 4
    rules = {"window": 4, "min_episodes": 4, "promote_above": 0.8, "demote_below": 0.4}

    def run(order_seed: int | None) -> list[int]:
        dataset = CurriculumRLDataset(GUESS, Curriculum(LADDER, **rules), batch_size=3, group_size=2)
        levels, rng = [], random.Random(order_seed)
        for index, batch in enumerate(outcomes):
            levels.append(dataset.get_batch(index)[0].level)
            groups = list(range(3))
            if order_seed is not None:
                rng.shuffle(groups)
            for g in groups:
                dataset.observe(index, g, batch[g])
        return levels

    in_order = run(None)
    assert in_order == [0, 1] * 4
    direct = tracker(levels=3, **rules)
    assert in_order == [0] + levels_after(direct, [sum(b, []) for b in outcomes])[:-1]
    assert all(run(seed) == in_order for seed in range(5))


def test_a_batch_keeps_its_level_when_asked_for_again_and_batches_go_forward():
    dataset = guess_dataset()
    first = dataset.get_batch(0)
    for g in range(2):
        dataset.observe(0, g, [1.0, 1.0])
    again = dataset.get_batch(0)  # outcomes of batch 0 are folded only when batch 1 is asked for
    assert [(b.level, b.seed) for b in again] == [(b.level, b.seed) for b in first] and dataset.level == 0
    assert dataset.get_batch(1)[0].level == 1
    with pytest.raises(ValueError, match=r"batch 0 comes before batch 1, which this curriculum has already served"):
        dataset.get_batch(0)
    with pytest.warns(RuntimeWarning, match="no group of the previous batch reported its outcomes"):
        dataset.get_batch(2)


def test_dataset_state_round_trips_so_a_resumed_run_continues_at_the_same_level():
    original = guess_dataset()
    for index, solved in enumerate([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0]]):
        original.get_batch(index)
        for g in range(2):
            original.observe(index, g, solved)
    # a checkpoint after batch 2 was played: its outcomes are reported but not folded in yet
    state = json.loads(json.dumps(original.state_dict()))
    resumed = guess_dataset()
    resumed.load_state_dict(state)
    assert resumed.level == original.level == 2
    a, b = original.get_batch(3), resumed.get_batch(3)
    assert [(x.level, x.seed, x.metrics) for x in a] == [(x.level, x.seed, x.metrics) for x in b]
    assert a[0].metrics["curriculum/solve_rate"] == 0.5  # batch 2's [0, 1, 0, 1] at level 2
    with pytest.raises(ValueError, match=r"this state is of a curriculum over \['max_number', 'max_turns'\], "
                                         r"not over \['max_number'\]"):
        CurriculumRLDataset(GUESS, Curriculum({"max_number": [8, 16]}), 2, 2).load_state_dict(state)


def test_an_env_source_class_works_like_its_id():
    by_class = CurriculumRLDataset(GuessNumberSource, Curriculum(LADDER), 2, 2, seed=3)
    by_id = CurriculumRLDataset(GUESS, Curriculum(LADDER), 2, 2, seed=3)
    assert [b.seed for b in by_class.get_batch(0)] == [b.seed for b in by_id.get_batch(0)]
    assert by_class.get_batch(0)[0].env_id == GUESS
    top = by_class.env_at(2).source
    assert isinstance(top, GuessNumberSource) and top.max_number == 512


def test_a_bridge_knob_missing_from_the_class_card_is_accepted_when_the_source_takes_it():
    pytest.importorskip("reasoning_gym")
    dataset = CurriculumRLDataset("rg/basic_arithmetic-v0", Curriculum({"max_terms": [2, 4]}), 1, 1)
    assert dataset.get_batch(0)[0].metrics["curriculum/max_terms"] == 2


# --- errors -----------------------------------------------------------------------------------
class NoKnobs(EnvSource):
    card = EnvCard(id="test/NoKnobs-v0", family="test", description="An env without knobs.",
                   multi_turn=False, reward_range=(0.0, 1.0), reward_meaning="none",
                   difficulty_knobs={}, data_source="none", license="none")

    def make_env(self, rng):
        raise NotImplementedError


@pytest.mark.parametrize("env, knobs, options, message", [
    (GUESS, {"max_numbr": [8, 16]}, {},
     r"^llm/GuessNumber-v0 has no knob 'max_numbr'; its knobs are \['invalid_penalty', "
     r"'max_context_tokens', 'max_number', 'max_turns', 'range_starts'\]\. Did you mean: "
     r"'max_number'\?$"),
    (GUESS, {"max_number": [8, 2]}, {},
     r"^llm/GuessNumber-v0 rejects curriculum level 1 \(max_number=2\): max_number must be in "
     r"\[4, 10000\], got 2$"),
    (NoKnobs, {"size": [1, 2]}, {},
     r"^test/NoKnobs-v0 declares no difficulty knobs \(its card's difficulty_knobs is empty\), so a "
     r"curriculum over \['size'\] has nothing to step"),
    ("CartPole-v1", {"max_number": [8, 16]}, {},
     r"^'CartPole-v1' is not a registered llm-gym TextEnv id"),
    (GUESS, {"max_number": [8, 16]}, {"max_number": 20},
     r"^knob 'max_number' is set both by the curriculum and as an env option \(20\); drop one of them$"),
])
def test_dataset_errors_name_the_problem(env, knobs, options, message):
    with pytest.raises(ValueError, match=message):
        CurriculumRLDataset(env, Curriculum(knobs), 2, 2, **options)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"promote_above": 0.3, "demote_below": 0.5}, ValueError,
     r"^Curriculum thresholds out of order: demote_below \(0\.5\) must be below promote_above \(0\.3\)$"),
    ({"promote_above": 1.5}, ValueError, r"^Curriculum\.promote_above must be in \(0, 1\], got 1\.5$"),
    ({"demote_below": -0.1}, ValueError, r"^Curriculum\.demote_below must be in \[0, 1\), got -0\.1$"),
    ({"window": 0}, ValueError, r"^Curriculum\.window must be a positive int, got 0$"),
    ({"min_episodes": 2.5}, ValueError, r"^Curriculum\.min_episodes must be a positive int, got 2\.5$"),
    ({"start_level": 3}, ValueError, r"^Curriculum\.start_level must be a level in \[0, 2\], got 3$"),
    ({"ema": 1}, TypeError, r"^Curriculum\.ema must be a bool, got 1$"),
    ({"knobs": {}}, ValueError, r"^Curriculum\.knobs must map each knob to its ladder of values"),
    ({"knobs": {"a": [1, 2], "b": [1]}}, ValueError,
     r"^Curriculum\.knobs: every ladder needs one value per level, but their lengths differ: \{'a': 2, 'b': 1\}$"),
    ({"knobs": {"a": []}}, ValueError, r"^Curriculum\.knobs\['a'\] is empty; give it at least one value$"),
    ({"knobs": {"a": "easy"}}, TypeError, r"^Curriculum\.knobs\['a'\] must be a list of values, easiest first"),
])
def test_curriculum_errors_name_the_problem(kwargs, error, message):
    kwargs = {"knobs": {"n": [1, 2, 3]}, **kwargs}
    with pytest.raises(error, match=message):
        Curriculum(**kwargs)


def test_other_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"^int_ladder\(10, 100, 20\): steps of 20 from 10 miss 100; use last=90$"):
        int_ladder(10, 100, 20)
    with pytest.raises(ValueError, match=r"^int_ladder\(1, 5, -1\): step must be non-zero and lead from first"):
        int_ladder(1, 5, -1)
    with pytest.raises(ValueError, match=r"^outcomes must be in \[0, 1\] \(1\.0 solved, 0\.0 not\), got 2\.0$"):
        tracker().update([1, 2])
    with pytest.raises(ValueError, match=r"^the saved level 7 is not one of this curriculum's 4 levels$"):
        tracker().load_state_dict({"level": 7, "episodes_at_level": 0, "recent": [], "ema": [0, 0]})
    with pytest.raises(ValueError, match=r"^not a CurriculumTracker state: it lacks \['ema', 'recent'\]$"):
        tracker().load_state_dict({"level": 0, "episodes_at_level": 0})
