"""Provenance spans on training datums (`llm_gym.rl.data_processing`): which request's prompt or which
sampled sequence each input token and each target came from. Trajectories are built by hand and
the expected spans written out by hand; a decoder then checks every span against the tokens it
claims to describe."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl import do_single_rollout
from llm_gym.rl.data_processing import (
    Datum,
    PromptProvenanceSpan,
    SampledProvenanceSpan,
    assemble_training_data,
    trajectory_to_data,
)
from llm_gym.rl.types import (
    PARSE_ERROR_MASKED_METRIC_KEY,
    Env,
    StepResult,
    Trajectory,
    TrajectoryGroup,
    Transition,
)

P, S = PromptProvenanceSpan, SampledProvenanceSpan


def turn(ob, tokens, sequence_id=None, reward=0.0, metrics=None):
    ac = TokensWithLogprobs(tokens=list(tokens), maybe_logprobs=[-0.5] * len(tokens), sequence_id=sequence_id)
    return Transition(ob=ModelInput.from_ints(ob), ac=ac, reward=reward, episode_done=False,
                      metrics=dict(metrics or {}))


def traj(*transitions):
    return Trajectory(transitions=list(transitions), final_ob=ModelInput.empty())


def spans_tuple(spans):
    return None if spans is None else [(type(s).__name__[:1], s.sequence_id, s.offset, s.length) for s in spans]


def decode(spans, prompts, sampled):
    """Per-position tokens the spans point at: prompt `offset + j` of request `id`, or sampled
    token `offset + j` of sequence `id`."""
    out = []
    for span in spans:
        source = prompts if isinstance(span, PromptProvenanceSpan) else sampled
        out += source[span.sequence_id][span.offset:span.offset + span.length]
    return out


# Two turns of a chat: the second observation is the first + its action + one env token.
OB1, AC1 = [1, 2, 3], [10, 11]
OB2, AC2 = OB1 + AC1 + [20], [12, 13, 14]
TWO_TURNS = traj(turn(OB1, AC1, "s1"), turn(OB2, AC2, "s2"))
PROMPTS = {"s1": OB1, "s2": OB2}
SAMPLED = {"s1": AC1, "s2": AC2}


def test_two_turn_spans_written_out_by_hand():
    # full sequence 1 2 3 | 10 11 | 20 | 12 13 14
    #           prompt s1 | smp s1 | prompt s2 (offset 5) | smp s2
    [datum] = trajectory_to_data(TWO_TURNS, 1.0)
    assert datum.model_input.to_ints() == [1, 2, 3, 10, 11, 20, 12, 13]
    assert datum.model_input_spans == [
        P(sequence_id="s1", offset=0, length=3),
        S(sequence_id="s1", offset=0, length=2),
        P(sequence_id="s2", offset=5, length=1),
        S(sequence_id="s2", offset=0, length=2),  # the input drops the last sampled token
    ]
    assert datum.loss_fn_input_spans == [
        P(sequence_id="s1", offset=1, length=2),  # the targets drop the first prompt token
        S(sequence_id="s1", offset=0, length=2),
        P(sequence_id="s2", offset=5, length=1),
        S(sequence_id="s2", offset=0, length=3),
    ]


def test_spans_tile_and_point_at_the_right_tokens():
    [datum] = trajectory_to_data(TWO_TURNS, 1.0)
    inputs = datum.model_input.to_ints()
    targets = datum.loss_fn_inputs["target_tokens"].tolist()
    assert sum(s.length for s in datum.model_input_spans) == len(inputs)
    assert sum(s.length for s in datum.loss_fn_input_spans) == len(targets)
    assert decode(datum.model_input_spans, PROMPTS, SAMPLED) == inputs
    assert decode(datum.loss_fn_input_spans, PROMPTS, SAMPLED) == targets
    # Sampled spans cover exactly the masked-in targets.
    sampled_positions = []
    pos = 0
    for span in datum.loss_fn_input_spans:
        if isinstance(span, SampledProvenanceSpan):
            sampled_positions += range(pos, pos + span.length)
        pos += span.length
    assert np.flatnonzero(datum.loss_fn_inputs["mask"]).tolist() == sampled_positions


def test_single_sampled_token_and_single_prompt_token_edges():
    # ob [1 2 3], one sampled token: the input has no sampled position left.
    [d] = trajectory_to_data(traj(turn([1, 2, 3], [10], "a")), 0.5)
    assert spans_tuple(d.model_input_spans) == [("P", "a", 0, 3)]
    assert spans_tuple(d.loss_fn_input_spans) == [("P", "a", 1, 2), ("S", "a", 0, 1)]
    # ob of one token: the targets have no prompt position left.
    [d] = trajectory_to_data(traj(turn([5], [6, 7], "b")), 0.5)
    assert spans_tuple(d.model_input_spans) == [("P", "b", 0, 1), ("S", "b", 0, 1)]
    assert spans_tuple(d.loss_fn_input_spans) == [("S", "b", 0, 2)]


def test_context_reset_gives_each_datum_its_own_spans():
    second_ob = [7, 8]  # does not extend turn 1's context: a new datum, prompt offsets from 0
    data = trajectory_to_data(traj(turn(OB1, AC1, "s1"), turn(second_ob, [30, 31], "s2")), 1.0)
    assert len(data) == 2
    assert spans_tuple(data[0].model_input_spans) == [("P", "s1", 0, 3), ("S", "s1", 0, 1)]
    assert spans_tuple(data[0].loss_fn_input_spans) == [("P", "s1", 1, 2), ("S", "s1", 0, 2)]
    assert spans_tuple(data[1].model_input_spans) == [("P", "s2", 0, 2), ("S", "s2", 0, 1)]
    assert spans_tuple(data[1].loss_fn_input_spans) == [("P", "s2", 1, 1), ("S", "s2", 0, 2)]


def test_a_turn_without_sequence_id_drops_provenance_for_its_datum_only():
    [d] = trajectory_to_data(traj(turn(OB1, AC1, "s1"), turn(OB2, AC2, None)), 1.0)
    assert d.model_input_spans is None and d.loss_fn_input_spans is None
    [d] = trajectory_to_data(traj(turn(OB1, AC1, None), turn(OB2, AC2, "s2")), 1.0)
    assert d.model_input_spans is None and d.loss_fn_input_spans is None
    # Across a context reset only the datum with the anonymous turn loses its spans.
    data = trajectory_to_data(traj(turn(OB1, AC1, "s1"), turn([7, 8], [30], None)), 1.0)
    assert data[0].model_input_spans is not None and data[0].loss_fn_input_spans is not None
    assert data[1].model_input_spans is None and data[1].loss_fn_input_spans is None


def test_local_sampler_trajectory_has_no_spans():
    [d] = trajectory_to_data(traj(turn(OB1, AC1), turn(OB2, AC2)), 1.0)
    assert (d.model_input_spans, d.loss_fn_input_spans) == (None, None)


def test_a_turn_with_no_tokens_needs_no_sequence_id():
    # Turn 2 adds nothing (empty observation delta, empty action) and has no id: spans are kept.
    [d] = trajectory_to_data(traj(turn(OB1, AC1, "s1"), turn(OB1 + AC1, [], None)), 1.0)
    assert spans_tuple(d.loss_fn_input_spans) == [("P", "s1", 1, 2), ("S", "s1", 0, 2)]


def test_a_datum_without_sampled_targets_gets_no_provenance():
    [d] = trajectory_to_data(traj(turn([1, 2, 3], [], "s1")), 1.0)
    assert d.loss_fn_inputs["target_tokens"].tolist() == [2, 3]
    assert d.model_input_spans is None and d.loss_fn_input_spans is None


def test_masked_parse_error_turn_keeps_its_provenance():
    masked = turn(OB2, AC2, "s2", metrics={PARSE_ERROR_MASKED_METRIC_KEY: 1.0})
    [d] = trajectory_to_data(traj(turn(OB1, AC1, "s1"), masked), 1.0)
    assert d.loss_fn_inputs["mask"].tolist() == [0, 0, 1, 1, 0, 0, 0, 0]
    [ref] = trajectory_to_data(TWO_TURNS, 1.0)
    assert d.loss_fn_input_spans == ref.loss_fn_input_spans


def test_include_provenance_false_gives_no_spans_and_the_same_arrays():
    [with_spans] = trajectory_to_data(TWO_TURNS, 0.25)
    [without] = trajectory_to_data(TWO_TURNS, 0.25, include_provenance=False)
    assert without.model_input_spans is None and without.loss_fn_input_spans is None
    assert with_spans.model_input_spans is not None
    assert without.model_input.to_ints() == with_spans.model_input.to_ints()
    assert without.loss_fn_inputs.keys() == with_spans.loss_fn_inputs.keys()
    for key in without.loss_fn_inputs:
        np.testing.assert_array_equal(without.loss_fn_inputs[key], with_spans.loss_fn_inputs[key])


def test_assemble_training_data_passes_include_provenance():
    group = TrajectoryGroup([TWO_TURNS, traj(turn([4, 5], [6], "z"))], [1.0, 0.0], [{}, {}])
    advantages = [np.array([0.5, -0.5], dtype=np.float32)]
    data, meta = assemble_training_data([group], advantages)
    assert meta == [{"group_idx": 0, "traj_idx": 0}, {"group_idx": 0, "traj_idx": 1}]
    assert all(d.model_input_spans is not None and d.loss_fn_input_spans is not None for d in data)
    assert spans_tuple(data[1].loss_fn_input_spans) == [("P", "z", 1, 1), ("S", "z", 0, 1)]
    data, _ = assemble_training_data([group], advantages, include_provenance=False)
    assert all(d.model_input_spans is None and d.loss_fn_input_spans is None for d in data)


# --- Datum.with_provenance and the span types ----------------------------------------------------


def plain_datum(n=4):
    return Datum(model_input=ModelInput.from_ints(range(n)),
                 loss_fn_inputs={"target_tokens": np.arange(1, n + 1), "weights": np.ones(n)})


def test_with_provenance_round_trip():
    d = plain_datum(4)
    mi = [P(sequence_id="q", offset=0, length=3), S(sequence_id="q", length=1)]
    lf = [P(sequence_id="q", offset=1, length=2), S(sequence_id="q", length=2)]
    d2 = d.with_provenance(mi, lf)
    assert d2 is not d
    assert d2.model_input_spans == mi and d2.loss_fn_input_spans == lf
    assert d.model_input_spans is None and d.loss_fn_input_spans is None  # the original is unchanged
    assert d2.model_input.to_ints() == d.model_input.to_ints()
    np.testing.assert_array_equal(d2.loss_fn_inputs["target_tokens"], d.loss_fn_inputs["target_tokens"])
    # Spans taken from a real datum re-attach to its provenance-free twin unchanged.
    [ref] = trajectory_to_data(TWO_TURNS, 1.0)
    [bare] = trajectory_to_data(TWO_TURNS, 1.0, include_provenance=False)
    again = bare.with_provenance(ref.model_input_spans, ref.loss_fn_input_spans)
    assert again.model_input_spans == ref.model_input_spans
    assert again.loss_fn_input_spans == ref.loss_fn_input_spans


def test_with_provenance_rejects_spans_that_do_not_tile():
    d = plain_datum(4)
    good = [S(sequence_id="q", length=4)]
    with pytest.raises(ValueError):
        d.with_provenance([S(sequence_id="q", length=3)], good)
    with pytest.raises(ValueError):
        d.with_provenance(good, [S(sequence_id="q", length=5)])
    with pytest.raises(TypeError):
        d.with_provenance([("q", 0, 4)], good)  # type: ignore[list-item]
    assert d.with_provenance(good, good).loss_fn_input_spans == good


def test_datum_provenance_comes_as_a_pair():
    span = [S(sequence_id="q", length=4)]
    with pytest.raises(ValueError):
        Datum(model_input=ModelInput.from_ints(range(4)), model_input_spans=span)
    with pytest.raises(ValueError):
        Datum(model_input=ModelInput.from_ints(range(4)), loss_fn_input_spans=span)
    d = Datum(model_input=ModelInput.from_ints(range(4)))
    assert d.model_input_spans is None and d.loss_fn_input_spans is None


def test_span_validation_equality_and_hashing():
    with pytest.raises(ValueError):
        P(sequence_id="", length=1)
    with pytest.raises(ValueError):
        S(sequence_id="x", length=-1)
    with pytest.raises(ValueError):
        P(sequence_id="x", offset=-1, length=1)
    assert S(sequence_id="x", length=2).offset == 0
    assert P(sequence_id="x", offset=1, length=2) == P(sequence_id="x", offset=1, length=2)
    assert P(sequence_id="x", offset=1, length=2) != S(sequence_id="x", offset=1, length=2)
    assert P(sequence_id="x", length=2) != P(sequence_id="x", length=3)
    assert len({P(sequence_id="x", length=2), P(sequence_id="x", length=2), S(sequence_id="x", length=2)}) == 2


# --- TokensWithLogprobs, and sequence ids through a real rollout ---------------------------------


def test_tokens_with_logprobs_defaults_and_fields():
    t = TokensWithLogprobs(tokens=[1, 2], maybe_logprobs=[-1.0, -2.0])
    assert (t.stop_reason, t.sequence_id, t.prompt_cache_hit_tokens) == ("stop", None, 0)
    t = TokensWithLogprobs(tokens=[1], maybe_logprobs=None, stop_reason="length", sequence_id="abc",
                           prompt_cache_hit_tokens=17)
    assert (t.stop_reason, t.sequence_id, t.prompt_cache_hit_tokens) == ("length", "abc", 17)
    with pytest.raises(ValueError):
        t.logprobs  # noqa: B018 - sampled without logprobs
    with pytest.raises(ValueError):
        TokensWithLogprobs(tokens=[1, 2], maybe_logprobs=[-1.0])


class TwoTurnEnv(Env):
    """Observation = previous context + action + one env token (100 + turn); two turns."""

    def __init__(self):
        self.context, self.turns = [1, 2, 3], 0

    async def initial_observation(self):
        return ModelInput.from_ints(self.context), [0]

    async def step(self, action, *, extra=None):
        self.turns += 1
        self.context = self.context + list(action) + [100 + self.turns]
        done = self.turns == 2
        return StepResult(reward=0.0, episode_done=done, next_stop_condition=[0],
                          next_observation=ModelInput.empty() if done else ModelInput.from_ints(self.context))


class IdPolicy(TokenCompleter):
    """Samples [50 + k, 60 + k] on call k with sequence id f"seq-{k}", recording the prompts."""

    def __init__(self):
        self.prompts: dict[str, list[int]] = {}
        self.sampled: dict[str, list[int]] = {}

    async def __call__(self, model_input, stop, *, max_tokens=None):
        k = len(self.prompts)
        sid = f"seq-{k}"
        self.prompts[sid] = model_input.to_ints()
        self.sampled[sid] = [50 + k, 60 + k]
        return TokensWithLogprobs(tokens=self.sampled[sid], maybe_logprobs=[-0.1, -0.2], sequence_id=sid,
                                  prompt_cache_hit_tokens=k)


def test_sequence_ids_from_a_rollout_give_spans_that_decode_to_the_datum():
    policy = IdPolicy()
    trajectory = asyncio.run(do_single_rollout(policy, TwoTurnEnv()))
    assert [t.ac.sequence_id for t in trajectory.transitions] == ["seq-0", "seq-1"]
    assert [t.ac.prompt_cache_hit_tokens for t in trajectory.transitions] == [0, 1]
    [d] = trajectory_to_data(trajectory, 1.0)
    assert spans_tuple(d.model_input_spans) == [
        ("P", "seq-0", 0, 3), ("S", "seq-0", 0, 2), ("P", "seq-1", 5, 1), ("S", "seq-1", 0, 1)]
    assert decode(d.model_input_spans, policy.prompts, policy.sampled) == d.model_input.to_ints()
    assert decode(d.loss_fn_input_spans, policy.prompts, policy.sampled) == d.loss_fn_inputs["target_tokens"].tolist()
