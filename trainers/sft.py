"""SFT warm start: teach a (tiny, randomly initialised) policy the task's format before GRPO.

GRPO learns only from reward differences within a group, so a policy that never answers correctly
gets no signal. The warm start trains cross-entropy on the environments' reference responses
(`ProblemEnv.get_reference_response`), masked by the renderer's `build_supervised_example` loss
weights so only the assistant's tokens (and its end-of-turn token) are learned. It is stopped by a
*validation* check, not a step count: docs/design.md records that stopping at ~35-55% held-out accuracy
leaves RL the most headroom, while below ~25% GRPO barely moves. So `sft_warm_start` measures
accuracy every `eval_every` steps (greedy sampling on held-out problems through `HFSampler`, or
any `eval_fn` you give it) and stops as soon as it enters `target_band`.

Multi-turn envs (games, tool use) have no reference response, but an env can declare gold
`llm_gym.scripted.ScriptedCase`s (an oracle policy that scores the maximum). For those the examples
are *gold episodes*: the source's first gold case is played on train-split tasks through the seed
API, exactly as `llm_gym.scripted.run_scripted_case` plays it (each reply encoded as the renderer
would have sampled it, end of turn included), and each `Trajectory` becomes supervised examples
through the RL data path (`llm_gym.rl.data_processing.trajectory_to_data`): the same tokens the
policy would have sampled, with loss weight 1 on exactly the sampled (action) tokens and 0 on the
observation tokens; an episode whose observations keep the prefix property is one example.
`sft_examples_from_gold` builds them; `sft_warm_start(env_id=...)` picks this source by itself when
the env's episodes have no `get_reference_response` but its source has a gold case.

Two ways in: `sft_warm_start(model, renderer, conversations, ...)` with your own examples, or
`sft_warm_start(model, env_id="llm/Math-v0", env_kwargs={...})`, which draws training examples from
the env's train split and measures accuracy on a *validation* slice of that split: a fixed set of
train tasks that is kept out of the SFT examples. The test split stays untouched, for the
evaluations a caller reports (the GRPO trainer's `eval_before_rl` / `eval_after_rl`).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from llm_gym.env_source import EnvSource
from llm_gym.renderers import Message, Renderer, get_renderer
from llm_gym.rl.data_processing import trajectory_to_data
from llm_gym.rl.outcome import episode_correct
from llm_gym.rl.rollouts import RolloutLimits, do_single_rollout
from llm_gym.rl.types import Trajectory, release_env
from llm_gym.scripted import ScriptedCase, aplay_scripted_episode
from trainers.grpo.fit import SFT_NONE, SFT_REFERENCE, first_gold_case, sft_source_kind
from trainers._trl_compat import pad, selective_log_softmax

__all__ = [
    "SFTResult",
    "collate_supervised",
    "make_accuracy_eval",
    "gold_task_keys",
    "play_gold_episode",
    "sft_examples_from_gold",
    "sft_examples_from_source",
    "supervised_examples_from_trajectory",
    "sft_loss",
    "sft_warm_start",
    "source_for_env",
    "supervised_examples",
]

SupervisedExample = tuple[list[int], list[float]]  # tokens, per-token loss weight


@dataclass
class SFTResult:
    """What the warm start did. `stopped_reason`: "target_band" (accuracy entered the band),
    "overshot" (it jumped past the band between two checks: check more often or lower lr),
    "already_in_band" (no training was needed) or "max_steps"."""

    steps: int
    stopped_reason: str
    accuracy: float | None  # at the last check (None without an eval)
    final_loss: float | None
    losses: list[float] = field(default_factory=list)
    eval_history: list[tuple[int, float]] = field(default_factory=list)  # (step, accuracy)
    num_examples: int = 0
    seconds: float = 0.0
    # What the examples came from: "reference responses", "gold scripted episodes" (then
    # `gold_case` names the case) or "examples" (given by the caller).
    example_source: str = "examples"
    gold_case: str | None = None
    # Gold episodes only: how many training episodes equal a validation task's gold episode
    # (non-zero only when the train split is too small to hold the validation tasks out), and the
    # longest action in them, in tokens (a `max_tokens` below it cannot sample the gold replies).
    validation_overlap: int = 0
    longest_action_tokens: int = 0


# --- examples ------------------------------------------------------------------------------------
def source_for_env(env_id: str, split: str = "train", **env_kwargs: Any) -> EnvSource:
    """The `EnvSource` behind a registered text env id (e.g. "llm/Math-v0"), on `split`: built
    directly for an llm-gym `TextEnv` id (`llm_gym.wrappers.source.env_source_for_id`, as
    `gym.make` would build it), read off `gym.make`'s env otherwise."""
    import llm_gym
    from llm_gym.wrappers.source import env_source_for_id, is_source_id

    if is_source_id(env_id):
        return env_source_for_id(env_id, split, **env_kwargs).source
    env = llm_gym.make(env_id, split=split, **env_kwargs)
    source = getattr(env.unwrapped, "source", None)
    env.close()
    if not isinstance(source, EnvSource):
        raise TypeError(
            f"{env_id!r} is not backed by an llm-gym EnvSource, so it has no reference responses "
            "for SFT; pass your own examples to sft_warm_start(model, renderer, examples)"
        )
    return source


def _task_key(env: Any) -> tuple[str, ...]:
    """A task's identity for de-duplication: the texts of its prompt conversation."""
    return tuple(str(m.get("content", "")) for m in env.conversation())


def task_keys(source: EnvSource, n: int, seed: int) -> set[tuple[str, ...]]:
    """The tasks `make_accuracy_eval(source, num_problems=n, seed=seed)` evaluates on."""
    rng = np.random.default_rng(seed)
    return {_task_key(source.make_env(rng)) for _ in range(n)}


def sft_examples_from_source(
    source: EnvSource,
    n: int,
    rng: np.random.Generator,
    exclude: set[tuple[str, ...]] | None = None,
    max_redraws: int = 100,
) -> list[list[Message]]:
    """`n` conversations ending in the reference assistant response, drawn from `source`.

    Needs single-turn envs that expose `conversation()` and `get_reference_response()` (every
    `ProblemEnv` does). Tasks come from `rng` only, so the same generator state gives the same
    examples. Tasks whose key is in `exclude` (e.g. a validation set, see `task_keys`) are redrawn,
    up to `max_redraws` times in a row before giving up with an error.
    """
    conversations: list[list[Message]] = []
    for _ in range(n):
        env = source.make_env(rng)
        redraws = 0
        while exclude and hasattr(env, "conversation") and _task_key(env) in exclude:
            redraws += 1
            if redraws > max_redraws:
                raise ValueError(
                    f"{type(source).__name__} keeps drawing validation tasks: its train split is "
                    "too small to hold out a validation set; lower eval_problems or pass eval_fn"
                )
            env = source.make_env(rng)
        convo: Callable[..., Any] | None = getattr(env, "conversation", None)
        reference: Callable[..., Any] | None = getattr(env, "get_reference_response", None)
        if not (callable(convo) and callable(reference)):
            raise TypeError(
                f"{type(env).__name__} has no conversation()/get_reference_response(); SFT "
                "examples can be drawn only from single-turn ProblemEnv-style envs — pass your "
                "own conversations to sft_warm_start instead"
            )
        conversations.append(list(convo()) + [Message(role="assistant", content=reference())])
    return conversations


# --- examples from gold scripted episodes (multi-turn envs) --------------------------------------
# Gold episodes per warm start when `num_examples` is not given: a tiny model sees each one many
# times over `max_steps` steps anyway, and playing them (tool calls, game solvers) costs far more
# than drawing a reference answer.
DEFAULT_GOLD_EPISODES = 512


async def play_gold_episode(
    source: EnvSource, case: ScriptedCase, env: Any, *, check: bool = True
) -> Trajectory:
    """Play `case` on `env` (one of `source`'s episodes) and return the whole `Trajectory`, as
    `llm_gym.scripted.arun_scripted_case` plays it; the env is released afterwards. With `check`,
    a return outside the case's `[low, high]` raises ValueError: a gold case that misses its own
    promise must not become training data."""
    trajectory, _replies = await aplay_scripted_episode(source, case, env)
    ret = float(sum(t.reward for t in trajectory.transitions))
    if check and not case.low - 1e-6 <= ret <= case.high + 1e-6:
        raise ValueError(
            f"{type(source).__name__}: gold case {case.name!r} scored {ret} on a {source.split} task, "
            f"outside its promised [{case.low}, {case.high}]; fix the case (`llm-gym check` runs it)"
        )
    return trajectory


def supervised_examples_from_trajectory(trajectory: Trajectory) -> list[SupervisedExample]:
    """`(tokens, weights)` examples of an episode, assembled as RL assembles its training data
    (`trajectory_to_data`): one example per run of observations that extend each other (the whole
    episode, for envs with the prefix property), weight 1 on the sampled (action) tokens and 0 on
    observation tokens (and on turns an env masked as parse errors)."""
    out: list[SupervisedExample] = []
    for datum in trajectory_to_data(trajectory, 1.0):
        targets = datum.loss_fn_inputs["target_tokens"]
        tokens = datum.model_input.to_ints() + [int(targets[-1])]
        weights = [0.0] + [float(m) for m in datum.loss_fn_inputs["mask"]]
        out.append((tokens, weights))
    return out


def _gold_key(examples: Sequence[SupervisedExample]) -> tuple:
    """A task's identity for gold episodes: the tokens of its whole gold episode (multi-turn
    envs often show the same first observation for every task: the secret is hidden)."""
    return tuple(tuple(tokens) for tokens, _ in examples)


def gold_task_keys(source: EnvSource, n: int, seed: int, case: ScriptedCase | None = None) -> set[tuple]:
    """The gold-episode keys of the tasks `make_accuracy_eval(source, num_problems=n, seed=seed)`
    evaluates on (`case` defaults to `first_gold_case(source)`)."""
    case = case or _require_gold_case(source)
    rng = np.random.default_rng(seed)
    envs = [source.make_env(rng) for _ in range(n)]

    async def play_all():
        return [await play_gold_episode(source, case, env, check=False) for env in envs]

    return {_gold_key(supervised_examples_from_trajectory(t)) for t in asyncio.run(play_all())}


def _require_gold_case(source: EnvSource) -> ScriptedCase:
    case = first_gold_case(source)
    if case is None:
        raise TypeError(f"{type(source).__name__} declares no gold scripted case to learn from")
    return case


def _gold_examples(
    source: EnvSource, n: int, rng: np.random.Generator, case: ScriptedCase,
    exclude: set[tuple] | None, max_redraws: int,
) -> tuple[list[SupervisedExample], int]:
    """(examples, how many episodes were kept although their key is in `exclude`)."""
    examples: list[SupervisedExample] = []
    overlap = 0
    redraw = bool(exclude)

    async def play_all() -> None:
        nonlocal overlap, redraw
        for _ in range(n):
            redraws = 0
            while True:
                episode = supervised_examples_from_trajectory(
                    await play_gold_episode(source, case, source.make_env(rng)))
                held_out = not exclude or _gold_key(episode) not in exclude
                if held_out or not redraw:
                    break
                redraws += 1
                if redraws > max_redraws:
                    # The split is too small to hold every validation task out (a guessing game
                    # with a handful of secrets, say): stop redrawing, count the overlap instead.
                    redraw = False
                    break
            overlap += not held_out
            examples.extend(episode)

    asyncio.run(play_all())
    return examples, overlap


def sft_examples_from_gold(
    source: EnvSource,
    n: int,
    rng: np.random.Generator,
    case: ScriptedCase | None = None,
    exclude: set[tuple] | None = None,
    max_redraws: int = 100,
) -> list[SupervisedExample]:
    """Supervised examples from `n` gold episodes on tasks drawn from `source` with `rng`.

    `case` defaults to the source's first gold case (`first_gold_case`: the first that sets no
    knobs of its own). Each episode is played with `play_gold_episode` (its return must be inside
    the case's range) and turned into examples by `supervised_examples_from_trajectory`, so their
    tokens are the episode's observation and action tokens, weighted 1 on exactly the actions.
    Tasks whose gold episode is in `exclude` (`gold_task_keys` of a validation set) are redrawn;
    after `max_redraws` redraws in a row the split is taken to be too small to hold them out and
    exclusion stops (`sft_warm_start` reports the overlap as `SFTResult.validation_overlap`).
    Same generator state, same examples.
    """
    examples, _ = _gold_examples(source, n, rng, case or _require_gold_case(source), exclude,
                                 max_redraws)
    return examples


def supervised_examples(
    renderer: Renderer, conversations: Sequence[Sequence[Message]]
) -> list[SupervisedExample]:
    """Tokens and loss weights (1 on the last assistant message and its end-of-turn token, 0 on
    everything else) for each conversation, via `renderer.build_supervised_example`."""
    out = []
    for messages in conversations:
        tokens, weights = renderer.build_supervised_example(list(messages))
        out.append((tokens.to_ints(), [float(w) for w in weights]))
    return out


def collate_supervised(
    examples: Sequence[SupervisedExample], pad_token_id: int, device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Right-pad examples into `input_ids`, `attention_mask` and `loss_weights` (B, T)."""
    ids = [torch.tensor(t, dtype=torch.long) for t, _ in examples]
    weights = [torch.tensor(w, dtype=torch.float32) for _, w in examples]
    masks = [torch.ones(len(t), dtype=torch.long) for t, _ in examples]
    return {
        "input_ids": pad(ids, padding_value=pad_token_id, padding_side="right").to(device),
        "attention_mask": pad(masks, padding_value=0, padding_side="right").to(device),
        "loss_weights": pad(weights, padding_value=0, padding_side="right").to(device),  # fills 0.0 (float32)
    }


def sft_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Weighted next-token cross-entropy: sum_t w_t * -log p(x_t | x_<t) / sum_t w_t.

    The weight of token t (from the renderer) says whether t is trained; it is predicted by the
    logits at t-1, hence the shift. Normalised by the number of trained tokens in the batch, so
    every trained token counts the same whatever its example's length.
    """
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    targets = batch["input_ids"][:, 1:]
    weights = batch["loss_weights"][:, 1:]
    logprobs = selective_log_softmax(logits[:, :-1, :], targets)
    return -(logprobs.float() * weights).sum() / weights.sum().clamp(min=1.0)


# --- validation ----------------------------------------------------------------------------------
def make_accuracy_eval(
    source: EnvSource,
    *,
    num_problems: int = 128,
    seed: int = 1234,
    max_tokens: int = 16,
    stop_token_ids: Sequence[int] = (),
    temperature: float = 0.0,
) -> Callable[[torch.nn.Module], float]:
    """An `eval_fn(model) -> accuracy` on a fixed set of `num_problems` tasks from `source`
    (a held-out split, or train tasks kept out of training — see `task_keys`). All episodes run
    concurrently through one `HFSampler`, so the model sees one batch; single- and multi-turn envs
    alike (each turn samples at most `max_tokens`; episodes end as the env ends them, after 32
    turns, or at the model's window). A problem counts as solved as the trainer's evaluation
    counts it (`llm_gym.rl.outcome.episode_correct`: the last reported `correct` metric is full
    credit, or, for envs without that metric, the return is positive). Every episode is released
    afterwards (tool sandboxes). Greedy by default, so the same model always scores the same."""
    from trainers.sampling.hf import HFSampler

    def eval_fn(model: torch.nn.Module) -> float:
        stops = list(stop_token_ids) + [
            s for s in source.renderer.get_stop_sequences() if isinstance(s, int)
        ]
        sampler = HFSampler(
            model, temperature=temperature, max_tokens=max_tokens, stop_token_ids=stops,
            seed=seed, tokenizer=source.renderer.tokenizer,
        )
        # episodes end at the model's window, as in training (`trainers.grpo.trainer.rollout_limits`)
        limits = RolloutLimits(max_tokens_per_turn=max_tokens, max_turns=32,
                               max_trajectory_tokens=sampler.context_window)
        rng = np.random.default_rng(seed)  # the same problems at every check
        envs = [source.make_env(rng) for _ in range(num_problems)]

        async def run_all():
            try:
                return await asyncio.gather(
                    *[do_single_rollout(sampler, env, limits=limits) for env in envs]
                )
            finally:
                for env in envs:
                    release_env(env)

        trajectories = asyncio.run(run_all())
        return float(np.mean([episode_correct(t) for t in trajectories])) if trajectories else 0.0

    return eval_fn


# --- the warm start ------------------------------------------------------------------------------
def sft_warm_start(
    model: torch.nn.Module,
    tokenizer_or_renderer: Any = None,
    examples: Sequence[Sequence[Message]] | Sequence[SupervisedExample] | None = None,
    *,
    env_id: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    source: EnvSource | None = None,
    max_steps: int = 400,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    grad_clip: float | None = 1.0,
    eval_fn: Callable[[torch.nn.Module], float] | None = None,
    eval_every: int = 20,
    eval_problems: int = 128,
    eval_max_tokens: int = 16,
    target_band: tuple[float, float] | float | None = (0.35, 0.55),
    num_examples: int | None = None,
    seed: int = 0,
    device: str | torch.device | None = None,
    log_fn: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = False,
) -> SFTResult:
    """Train `model` in place on supervised examples until validation accuracy enters
    `target_band` (or `max_steps`), and return an `SFTResult`.

    Examples, one of:
      - `tokenizer_or_renderer` + `examples`: conversations ending with the assistant's reference
        response (rendered with the renderer, or `get_renderer(None, tokenizer)`), or already
        built `(tokens, weights)` pairs;
      - `env_id` (+ `env_kwargs`, as for `llm_gym.make`): `num_examples` (default
        `max_steps * batch_size`) conversations from the env's train split, ending in the
        reference response; or, for an env whose episodes have no `get_reference_response` but
        whose source declares a gold `ScriptedCase` (multi-turn games and tool envs),
        `num_examples` (default `min(max_steps * batch_size, DEFAULT_GOLD_EPISODES)`) gold
        episodes, token-exact (`sft_examples_from_gold`). `source`: the env's train-split
        `EnvSource` when the caller has built it already (the GRPO trainer's `run_env`), so it is
        not built again. Unless `eval_fn` is given, accuracy is
        measured greedily on `eval_problems` validation problems: train-split tasks that are
        excluded from the SFT examples (`make_accuracy_eval`; "solved" is `llm_gym.rl.outcome.episode_correct`:
        the `correct` metric where the env reports one, else a positive return).
        `SFTResult.example_source` says which source was used.

    Early stopping: `eval_fn(model) -> accuracy` runs before training and every `eval_every`
    steps; training stops at the first check with accuracy >= the band's low end (a float target
    is a band with no upper end). `target_band=None` trains for `max_steps` regardless.

    Minibatches are drawn without replacement from `np.random.default_rng(seed)` (reshuffled each
    epoch); the model is left in the train/eval mode it came in, with no gradients (`.grad` is
    None), so an optimizer the caller makes next, e.g. RL's, starts from a clean slate instead of
    applying SFT's last gradient. `progress` shows a tqdm bar of the steps, with the loss and the
    last validation accuracy.
    """
    if max_steps < 0 or batch_size < 1 or eval_every < 1:
        raise ValueError(
            f"need max_steps >= 0, batch_size >= 1, eval_every >= 1; got {max_steps}, "
            f"{batch_size}, {eval_every}"
        )
    low, high = _band(target_band)
    rng = np.random.default_rng(seed)
    renderer: Renderer | None = None
    example_source, gold_case, validation_overlap = "examples", None, 0
    if env_id is not None:
        if examples is not None:
            raise ValueError("pass either env_id or examples, not both")
        kwargs = dict(env_kwargs or {})
        train_source = source if source is not None else source_for_env(env_id, "train", **kwargs)
        renderer = train_source.renderer
        probe = train_source.make_env(np.random.default_rng(seed))  # the main rng stays untouched
        kind = sft_source_kind(train_source, probe)
        release_env(probe)
        if kind == SFT_NONE:
            raise TypeError(
                f"{env_id!r} has no reference responses for SFT (its episodes are "
                f"{type(probe).__name__}, not single-turn ProblemEnvs) and its source declares no "
                "gold scripted case; pass your own examples to sft_warm_start(model, renderer, "
                "examples)"
            )
        example_source = kind
        validate = eval_fn is None and target_band is not None
        if validate:
            # Validation = a fixed slice of the *train* split, held out of the SFT examples; the
            # test split is left for the evaluations the caller reports.
            eval_fn = make_accuracy_eval(
                train_source, num_problems=eval_problems, max_tokens=eval_max_tokens, seed=seed + 1
            )
        if kind == SFT_REFERENCE:
            validation = task_keys(train_source, eval_problems, seed + 1) if validate else set()
            examples = sft_examples_from_source(
                train_source, num_examples or max(1, max_steps * batch_size), rng, exclude=validation
            )
        else:
            case = first_gold_case(train_source)
            gold_case = case.name
            # A gold case with knobs of its own (a solver that needs a winning start, say) plays on
            # the env made with them; its tasks are not the validation tasks', so none is excluded.
            gold_source = (source_for_env(env_id, "train", **{**kwargs, **case.knobs})
                           if case.knobs else train_source)
            gold_keys = (gold_task_keys(train_source, eval_problems, seed + 1, case)
                         if validate and not case.knobs else None)
            n_episodes = num_examples or max(1, min(max_steps * batch_size, DEFAULT_GOLD_EPISODES))
            examples, validation_overlap = _gold_examples(
                gold_source, n_episodes, rng, case, gold_keys, max_redraws=100)
    if examples is None or len(examples) == 0:
        raise ValueError("sft_warm_start needs examples (or an env_id to draw them from)")
    data = _as_supervised(examples, renderer, tokenizer_or_renderer)
    if not any(any(w > 0 for w in weights) for _, weights in data):
        raise ValueError("no example has a trained token (all loss weights are 0)")

    device = torch.device(device) if device is not None else next(model.parameters()).device
    pad_id = getattr(getattr(model, "config", None), "pad_token_id", None)
    pad_id = 0 if pad_id is None else int(pad_id)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    was_training = model.training
    started = time.perf_counter()
    result = SFTResult(steps=0, stopped_reason="max_steps", accuracy=None, final_loss=None,
                       num_examples=len(data), example_source=example_source, gold_case=gold_case,
                       validation_overlap=validation_overlap,
                       longest_action_tokens=_longest_trained_run(data))

    def check(step: int) -> bool:
        """Run the validation check; True when training should stop."""
        if eval_fn is None or low is None:
            return False
        accuracy = float(eval_fn(model))
        result.accuracy = accuracy
        result.eval_history.append((step, accuracy))
        if log_fn is not None:
            log_fn({"sft/step": step, "sft/accuracy": accuracy})
        if accuracy < low:
            return False
        if step == 0:
            result.stopped_reason = "already_in_band"
        else:
            result.stopped_reason = "target_band" if high is None or accuracy <= high else "overshot"
        return True

    from tqdm.auto import tqdm

    bar = tqdm(total=max_steps, desc="SFT", disable=not progress, dynamic_ncols=True)

    def checked(step: int) -> bool:
        """`check`, saying on the bar that a check is running (it can take a while)."""
        if eval_fn is None or low is None:
            return False
        bar.set_postfix_str("checking validation accuracy", refresh=True)
        stop = check(step)
        loss = "-" if result.final_loss is None else f"{result.final_loss:.3f}"
        bar.set_postfix(loss=loss, val_acc=f"{result.accuracy:.2f}")
        return stop

    order = rng.permutation(len(data))
    cursor = 0
    try:
        if checked(0):
            return result
        model.train()
        for step in range(1, max_steps + 1):
            if cursor + batch_size > len(order):
                order, cursor = rng.permutation(len(data)), 0
            picked = order[cursor : cursor + batch_size]
            cursor += batch_size
            batch = collate_supervised([data[i] for i in picked], pad_id, device)
            loss = sft_loss(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            optimizer.step()
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value):
                raise FloatingPointError(
                    f"SFT loss became {loss_value} at step {step}; lower lr (now {lr})"
                )
            result.losses.append(loss_value)
            result.final_loss = loss_value
            result.steps = step
            if log_fn is not None:
                log_fn({"sft/step": step, "sft/loss": loss_value})
            bar.update(1)
            if step % eval_every == 0 or step == max_steps:
                model.eval()
                stop = checked(step)
                model.train()
                if stop:
                    break
            else:
                bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
        return result
    finally:
        bar.close()
        # SFT's last gradient must not leak into whatever trains the model next.
        model.zero_grad(set_to_none=True)
        model.train(was_training)
        result.seconds = time.perf_counter() - started


def _longest_trained_run(data: Sequence[SupervisedExample]) -> int:
    """The longest run of consecutive trained tokens in any example (one action, for gold
    episodes; one reply, for reference responses)."""
    best = 0
    for _, weights in data:
        run = 0
        for w in weights:
            run = run + 1 if w > 0 else 0
            best = max(best, run)
    return best


def _band(target: tuple[float, float] | float | None) -> tuple[float | None, float | None]:
    if target is None:
        return None, None
    if isinstance(target, (int, float)):
        low, high = float(target), None
    else:
        low, high = (float(x) for x in target)
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"target_band must satisfy 0 <= low <= high <= 1, got {target}")
    return low, high


def _as_supervised(
    examples: Sequence[Any], renderer: Renderer | None, tokenizer_or_renderer: Any
) -> list[SupervisedExample]:
    first = examples[0]
    if isinstance(first, tuple) and len(first) == 2 and not isinstance(first[0], dict):
        return [(list(map(int, t)), list(map(float, w))) for t, w in examples]
    if renderer is None:
        if tokenizer_or_renderer is None:
            raise ValueError(
                "conversations need a renderer (or a tokenizer to pick one) to become tokens; "
                "pass sft_warm_start(model, renderer, conversations)"
            )
        renderer = get_renderer(
            tokenizer_or_renderer if isinstance(tokenizer_or_renderer, Renderer) else None,
            tokenizer_or_renderer.tokenizer
            if isinstance(tokenizer_or_renderer, Renderer)
            else tokenizer_or_renderer,
        )
    return supervised_examples(renderer, examples)
