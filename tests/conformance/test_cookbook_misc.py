"""Differential checks of smaller cookbook utilities against the real cookbook (cookbook venv only).

`rl.interleaved.InterleavedRLDatasetBuilder`: the same sources, weights and seed through the
cookbook's class and ours must give the same schedule, batch by batch, and the same errors; so do
`rl.dataset_utils` (`cycle_permutation`, `epoch_batch_index`, `EpochCycledRLDataset`, cookbook
0.6). `RolloutErrorCounter` counts the same. The completer base classes behave alike, and
`TinkerTokenCompleter` over the same stand-in sampling client (the hosted service cannot run here)
asks for the same budgets and returns the same tokens, logprobs, stop reason, sequence id and
prompt-cache hits.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

import pytest

from tests.conformance.conftest import require_cookbook

# (groups per batch, number of batches, groups in the last batch) per source
SOURCES = [(3, 4, 3), (2, 5, 1), (5, 1, 5)]


def _interleaved_classes(side: str):
    if side == "cookbook":
        require_cookbook()
        import chz
        from tinker_cookbook.rl.interleaved import InterleavedRLDatasetBuilder
        from tinker_cookbook.rl.types import RLDataset, RLDatasetBuilder

        decorate = chz.chz
    else:
        from llm_gym.rl.interleaved import InterleavedRLDatasetBuilder
        from llm_gym.rl.types import RLDataset, RLDatasetBuilder

        decorate = dataclass

    class Labelled(RLDataset):
        """Groups are labels `(source, batch, slot)`, so a schedule reads as plain data."""

        def __init__(self, name: int, width: int, batches: int, last: int) -> None:
            self.name, self.width, self.batches, self.last = name, width, batches, last

        def get_batch(self, index):
            n = self.last if index == self.batches - 1 else self.width
            return [(self.name, index, k) for k in range(n)]

        def __len__(self):
            return self.batches

    @decorate
    class Source(RLDatasetBuilder):
        name: int
        shape: tuple
        built: list

        async def __call__(self):
            self.built.append(self.name)
            return Labelled(self.name, *self.shape), Labelled(-1, 1, 1, 1)

    return InterleavedRLDatasetBuilder, Source


def _cookbook_dataset_utils():
    require_cookbook()
    try:
        from tinker_cookbook.rl import dataset_utils
    except ImportError:  # cookbook < 0.6: its interleaved schedule drew the shuffles from one RNG
        pytest.skip("the installed tinker-cookbook has no rl.dataset_utils (added in 0.6, with the "
                    "interleaved schedule llm_gym follows)")
    return dataset_utils


def _build(side: str, shapes=SOURCES, **kwargs):
    builder_cls, source_cls = _interleaved_classes(side)
    built: list[int] = []
    sources = [source_cls(name=i, shape=shape, built=built) for i, shape in enumerate(shapes)]
    train, test = asyncio.run(builder_cls(sources=sources, **kwargs)())
    return train, test, sorted(built)


def _schedule(dataset) -> list[list[tuple]]:
    return [list(dataset.get_batch(i)) for i in range(len(dataset))]


@pytest.mark.parametrize("kwargs", [
    dict(weights=[0.5, 0.3, 0.2], groups_per_batch=4, total_batches=12, seed=0),  # cycles
    dict(weights=[55, 30, 15], groups_per_batch=3, total_batches=None, seed=7),  # natural length
    dict(weights=[1.0, 1.0, 1.0], groups_per_batch=1, total_batches=None, seed=3),
    dict(weights=[0.1, 5.0, 0.1], groups_per_batch=6, total_batches=5, seed=123),
])
def test_interleaved_schedule_matches_cookbook(kwargs):
    _cookbook_dataset_utils()  # the schedule llm_gym follows is cookbook 0.6's
    theirs, their_test, their_built = _build("cookbook", **kwargs)
    ours, our_test, our_built = _build("llm_gym", **kwargs)
    assert their_test is None and our_test is None and their_built == our_built == [0, 1, 2]
    assert len(ours) == len(theirs) and len(ours) >= 1
    expected = _schedule(theirs)
    assert _schedule(ours) == expected
    assert all(len(batch) == kwargs["groups_per_batch"] for batch in expected)
    # the last batch of source 1 holds one group: no slot may name a group that does not exist
    assert all(k == 0 for batch in expected for s, b, k in batch if (s, b) == (1, 4))
    for side_ds in (ours, theirs):
        with pytest.raises(IndexError, match="out of range"):
            side_ds.get_batch(len(side_ds))


def test_interleaved_cycles_reshuffle_like_cookbook():
    _cookbook_dataset_utils()  # the schedule llm_gym follows is cookbook 0.6's
    kwargs = dict(shapes=[(2, 2, 2)], weights=[1.0], groups_per_batch=4, total_batches=6, seed=5)
    theirs, ours = _build("cookbook", **kwargs)[0], _build("llm_gym", **kwargs)[0]
    schedule = _schedule(ours)
    assert schedule == _schedule(theirs)
    passes = [sorted(batch) for batch in schedule]  # 4 groups, 4 slots: every batch is one pass
    assert all(p == passes[0] for p in passes) and len({tuple(b) for b in schedule}) > 1


@pytest.mark.parametrize("kwargs, match", [
    (dict(weights=[1.0, 2.0, 3.0, 4.0], groups_per_batch=2), "same length"),
    (dict(weights=[1.0, 0.0, 1.0], groups_per_batch=2), "must be positive"),
    (dict(weights=[1.0, 1.0, 1.0], groups_per_batch=0), "groups_per_batch"),
])
def test_interleaved_rejects_bad_configs_like_cookbook(kwargs, match):
    for side in ("cookbook", "llm_gym"):
        with pytest.raises(ValueError, match=match):
            _build(side, **kwargs)


def test_interleaved_too_few_weights_is_a_value_error_here():
    """Deliberate difference: with fewer weights than sources the cookbook's builder fails with an
    IndexError from its logging line; ours names the mismatch."""
    with pytest.raises(IndexError):
        _build("cookbook", weights=[1.0, 2.0], groups_per_batch=2)
    with pytest.raises(ValueError, match="3 sources and 2 weights"):
        _build("llm_gym", weights=[1.0, 2.0], groups_per_batch=2)


def test_dataset_utils_match_cookbook():
    from llm_gym.rl import dataset_utils as ours
    from llm_gym.rl.types import RLDataset as OurRLDataset

    theirs = _cookbook_dataset_utils()
    from tinker_cookbook.rl.types import RLDataset as TheirRLDataset

    for size, seed, cycle in [(0, 0, 0), (1, 3, 2), (7, 0, 0), (7, 0, 1), (10, "5:1", 3), (33, 123, 9)]:
        assert tuple(ours.cycle_permutation(size, seed, cycle)) == tuple(theirs.cycle_permutation(size, seed, cycle))
    assert ours.cycle_permutation(9, 4, 2) == ours.cycle_permutation(9, "4", 2)
    for num_batches, shuffle_seed in [(1, None), (4, None), (4, 0), (5, 17)]:
        assert [ours.epoch_batch_index(i, num_batches, shuffle_seed) for i in range(3 * num_batches)] == [
            theirs.epoch_batch_index(i, num_batches, shuffle_seed) for i in range(3 * num_batches)]

    def dataset(base):
        class Letters(base):
            def get_batch(self, index):
                return ["abcde"[index]]

            def __len__(self):
                return 5

        return Letters()

    for num_epochs, shuffle_seed in [(1, None), (3, None), (3, 11)]:
        mine = ours.EpochCycledRLDataset(dataset(OurRLDataset), num_epochs, shuffle_seed)
        cb = theirs.EpochCycledRLDataset(dataset(TheirRLDataset), num_epochs, shuffle_seed)
        assert len(mine) == len(cb) == 5 * num_epochs
        assert [mine.get_batch(i) for i in range(len(mine))] == [cb.get_batch(i) for i in range(len(cb))]
        for side in (mine, cb):
            with pytest.raises(IndexError, match="out of range"):
                side.get_batch(len(side))
    for module, base in ((ours, OurRLDataset), (theirs, TheirRLDataset)):
        with pytest.raises(ValueError, match="num_epochs must be >= 1"):
            module.EpochCycledRLDataset(dataset(base), 0)


def test_rl_package_exports_the_cookbooks_names():
    import tinker_cookbook.rl as cb_rl

    import llm_gym.rl as our_rl

    missing = [name for name in cb_rl.__all__ if not hasattr(our_rl, name)]
    assert missing == []


def test_interleaved_ragged_middle_batch_fails_like_cookbook():
    """A source whose middle batches are narrower than batch 0 cannot be addressed by flat index."""
    _cookbook_dataset_utils()  # the schedule llm_gym follows is cookbook 0.6's
    errors = {}
    for side in ("cookbook", "llm_gym"):
        dataset = _build(side, shapes=[(3, 3, 3)], weights=[1.0], groups_per_batch=9, total_batches=1)[0]
        dataset._sources[0].width = 1  # batch 1 (a middle batch) now holds 1 group, batch 0 said 3
        with pytest.raises(IndexError) as info:
            dataset.get_batch(0)
        errors[side] = str(info.value)
    assert errors["cookbook"] == errors["llm_gym"] and "same number of groups as batch 0" in errors["llm_gym"]


def test_rollout_error_counter_matches():
    from tinker_cookbook.rl import rollouts as cb_rollouts
    from tinker_cookbook.rl import types as cb_types

    from llm_gym.rl import rollouts as our_rollouts
    from llm_gym.rl import types as our_types

    def metrics(rollouts, types):
        counter = rollouts.RolloutErrorCounter()
        empty = counter.get_metrics()
        errors = [types.RolloutError(kind, "m") for kind in ("TimeoutError", "OSError", "TimeoutError")]
        counter.ingest(types.TrajectoryGroup([], [], [], errors))
        counter.ingest(None)
        counter.ingest(types.TrajectoryGroup([], [], [], []))
        return empty, counter.get_metrics(), counter.get_metrics(prefix="x")

    assert metrics(cb_rollouts, cb_types) == metrics(our_rollouts, our_types)


class _FakeSamplingClient:
    """The tinker.SamplingClient interface (a hosted service cannot run here): records each call
    and returns a fixed sequence with logprobs, a stop reason and a sequence id, and the number of
    prompt-cache hits. Cookbook 0.6 awaits `sample(...)` (a Tinker future), 0.5 `sample_async`."""

    def __init__(self, tokens, stop_reason="length", cache_hits=3):
        self.tokens, self.stop_reason, self.cache_hits, self.calls = tokens, stop_reason, cache_hits, []

    def sample(self, prompt, num_samples, sampling_params):
        from concurrent.futures import Future

        from tinker.lib.public_interfaces.api_future import AwaitableConcurrentFuture

        future = Future()
        future.set_result(self._respond(prompt, num_samples, sampling_params))
        return AwaitableConcurrentFuture(future)

    async def sample_async(self, prompt, num_samples, sampling_params):
        return self._respond(prompt, num_samples, sampling_params)

    def _respond(self, prompt, num_samples, sampling_params):
        from types import SimpleNamespace

        self.calls.append((list(prompt.to_ints()), num_samples, sampling_params.temperature,
                           sampling_params.max_tokens, sampling_params.stop))
        seq = SimpleNamespace(tokens=list(self.tokens), logprobs=[-0.5] * len(self.tokens),
                              stop_reason=self.stop_reason, sequence_id=f"seq-{len(self.calls)}")
        return SimpleNamespace(sequences=[seq], prompt_cache_hit_tokens=self.cache_hits)


def test_completer_base_classes_and_tinker_token_completer_match(cookbook):
    import asyncio

    import tinker
    from tinker_cookbook import completers as ref

    from llm_gym import completers as ours
    from llm_gym.model_input import ModelInput

    for lib in (ref, ours):  # plain base classes: instantiable, calling them raises
        for base, args in ((lib.TokenCompleter, (None, [])), (lib.MessageCompleter, ([],))):
            with pytest.raises(NotImplementedError):
                asyncio.run(base()(*args))
    prompt = list(range(1, 11))
    new_fields = [f for f in ("sequence_id", "prompt_cache_hit_tokens")
                  if f in {field.name for field in dataclasses.fields(ref.TokensWithLogprobs)}]
    their_fields = [(f.name, f.default) for f in dataclasses.fields(ref.TokensWithLogprobs)]
    our_fields = [(f.name, f.default) for f in dataclasses.fields(ours.TokensWithLogprobs)]
    assert our_fields[:len(their_fields)] == their_fields
    outcomes = []
    for lib, model_input in ((ref, tinker.ModelInput.from_ints(prompt)), (ours, ModelInput.from_ints(prompt))):
        seen = []
        for kwargs, call_kwargs in (({"max_tokens": 8}, {}), ({"max_tokens": 8}, {"max_tokens": 3}),
                                    ({"max_tokens": 8, "context_window": 14, "temperature": 0.3}, {})):
            client = _FakeSamplingClient([5, 6, 7])
            completer = lib.TinkerTokenCompleter(client, **kwargs)
            out = asyncio.run(completer(model_input, [0], **call_kwargs))
            # cookbook < 0.6 has no sequence_id / prompt_cache_hit_tokens: compare what it has
            extra = tuple(getattr(out, f) for f in new_fields)
            seen.append((client.calls, out.tokens, out.maybe_logprobs, out.stop_reason, extra))
        client = _FakeSamplingClient([5])
        with pytest.raises(ValueError, match="exceeds context window") as err:
            asyncio.run(lib.TinkerTokenCompleter(client, max_tokens=8, context_window=10)(model_input, [0]))
        seen.append(str(err.value))
        outcomes.append(seen)
    assert outcomes[0] == outcomes[1]
    assert [call[0][0][3] for call in outcomes[0][:3]] == [8, 3, 4]  # budgets: own, per-call, window
    if new_fields:
        assert outcomes[1][0][4] == ("seq-1", 3)
