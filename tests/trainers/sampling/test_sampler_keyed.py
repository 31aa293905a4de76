"""HFSampler under keyed rollouts (`llm_gym.rl.rollout_keys`): the same seed samples the same
episodes however the calls were batched.

Episodes whose steps await the loop a different number of times (as tool calls, renders in threads
and sandboxes do, by the machine's timing) reach the sampler in different batches. With the
trainer's group keys every row draws from its own stream, so the samples are equal; without them
(one shared generator) the same seed gives different episodes — the defect the keys fix."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_gym.model_input import ModelInput  # noqa: E402
from llm_gym.rl.rollout_keys import group_key  # noqa: E402
from llm_gym.rl.rollout_strategy import FailFast  # noqa: E402
from llm_gym.rl.rollouts import do_group_rollout  # noqa: E402
from llm_gym.rl.types import Env, EnvGroupBuilder, StepResult  # noqa: E402
from trainers.models import build_tiny_model  # noqa: E402
from trainers.sampling.hf import HFSampler  # noqa: E402

PROMPT = [259, 117, 10, 50, 43, 50, 260, 10, 259, 97, 10]


class _Chat(Env):
    """Three turns; each step yields to the loop `delay` times before answering, and the next
    observation extends the last one (prompt + action + a newline)."""

    def __init__(self, delay: int, turns: int = 3) -> None:
        self.delay, self.turns, self.turn, self.tokens = delay, turns, 0, list(PROMPT)

    async def initial_observation(self):
        return ModelInput.from_ints(self.tokens), []

    async def step(self, action, *, extra=None) -> StepResult:
        for _ in range(self.delay):
            await asyncio.sleep(0)
        self.turn += 1
        self.tokens = self.tokens + list(action) + [10]
        return StepResult(reward=float(len(action)), episode_done=self.turn >= self.turns,
                          next_observation=ModelInput.from_ints(self.tokens), next_stop_condition=[])


class _Group(EnvGroupBuilder):
    def __init__(self, delays: list[int], turns: int = 3) -> None:
        self.delays, self.turns = delays, turns

    async def make_envs(self):
        return [_Chat(d, self.turns) for d in self.delays]


@pytest.fixture(scope="module")
def model():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: one thread is fastest, esp. on a shared CPU
    try:
        yield build_tiny_model(seed=0)[0]
    finally:
        torch.set_num_threads(threads)


def _episodes(model, delays: list[list[int]], keyed: bool) -> tuple[list, int]:
    sampler = HFSampler(model, temperature=1.0, max_tokens=5, seed=11)

    async def one(index, builder):
        if keyed:
            group_key(index)
        return await do_group_rollout(builder, sampler, FailFast())

    async def main():
        return await asyncio.gather(*[one(i, _Group(d)) for i, d in enumerate(delays)])

    groups = asyncio.run(main())
    actions = [[list(t.ac.tokens) for t in traj.transitions] for g in groups for traj in g.trajectories_G]
    return actions, sampler.stats.batches


def test_keyed_samples_do_not_depend_on_how_the_calls_were_batched(model):
    together = [[0, 0, 0], [0, 0, 0]]  # every turn's calls in one batch
    staggered = [[0, 7, 3], [12, 0, 5]]  # the same episodes' calls spread over several batches
    a, batches_a = _episodes(model, together, keyed=True)
    b, batches_b = _episodes(model, staggered, keyed=True)
    assert batches_a == 3 and batches_b > batches_a  # the batching really differed
    assert a == b
    assert len({tuple(map(tuple, episode)) for episode in a}) > 1  # not one episode six times


def test_unkeyed_shared_stream_depends_on_the_batching(model):
    # The control: the same seed and episodes without keys sample differently when batched
    # differently, so the test above can fail.
    a, _ = _episodes(model, [[0, 0, 0], [0, 0, 0]], keyed=False)
    b, _ = _episodes(model, [[0, 7, 3], [12, 0, 5]], keyed=False)
    assert a != b


def test_keyed_rows_sample_the_softmax_distribution(model):
    # Inverse-CDF draws from per-row streams follow the same distribution as multinomial draws:
    # first-token frequencies over many keyed rows match the model's probabilities.
    sampler = HFSampler(model, temperature=1.0, max_tokens=1, seed=2, max_batch_size=4096)
    with torch.no_grad():
        probs = model(torch.tensor([PROMPT])).logits[0, -1].float().softmax(-1)
    n = 4000

    async def main():
        async def row(i):
            group_key(i)
            return await do_group_rollout(_Group([0], turns=1), sampler, FailFast())

        return await asyncio.gather(*[row(i) for i in range(n)])

    groups = asyncio.run(main())
    counts = torch.zeros_like(probs)
    for g in groups:
        counts[g.trajectories_G[0].transitions[0].ac.tokens[0]] += 1
    top = probs.argsort(descending=True)[:5]
    for t in top.tolist():  # binomial 5-sigma bands: a wrong sampler misses them by far
        p = float(probs[t])
        assert abs(counts[t] / n - p) <= 5 * (p * (1 - p) / n) ** 0.5 + 1e-3, (t, p, counts[t] / n)

