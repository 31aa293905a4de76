"""`BatchingCompleter`: the call-gathering half of a batched `TokenCompleter`, shared by the samplers.

Rollouts are plain coroutines that each `await policy(prompt, stop, max_tokens=...)`. A subclass
(`trainers.sampling.hf.HFSampler`, `trainers.sampling.vllm.VLLMSampler`) says how to validate one call
(`_make_request`, which returns an object with a `future` attribute) and how to run many at once
(`_generate(requests) -> results`, in order); this base class queues the calls of one event loop
and, once every rollout about to call has done so (it yields to the loop until the queue has not
grown for `join_yields` turns) or `max_batch_size` calls are waiting, runs them as one batch. An
exception in a batch goes to every caller of that batch. `before_batch`, when set, is called just
before each batch runs (the trainer's evaluation bar counts the episodes a batch finished there, so
they arrive together and its rate is per batch, not per episode). `sample_batch` is the same without
an event loop (evaluation, benchmarks).
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from llm_gym.completers import StopCondition, TokenCompleter, TokensWithLogprobs

__all__ = ["BatchingCompleter", "call_limit", "prompt_ids", "split_stops"]


def prompt_ids(model_input: Any, vocab_rows: int | None, who: str) -> tuple[int, ...]:
    """A call's prompt as a tuple of ids (a `ModelInput` or a sequence of ints); `ValueError`
    for an empty prompt or an id outside `0..vocab_rows-1` (None: not checked)."""
    to_ints: Callable[[], Sequence[int]] | None = getattr(model_input, "to_ints", None)
    prompt = tuple(map(int, to_ints() if callable(to_ints) else model_input))
    if not prompt:
        raise ValueError(
            f"{who} got an empty prompt; a causal LM needs at least one token to condition "
            "on (render the conversation, or start with the tokenizer's BOS id)"
        )
    # min/max in C first (a per-token Python check cost ~20 us a call, 256 calls a step)
    if vocab_rows is not None and not (0 <= min(prompt) and max(prompt) < vocab_rows):
        bad = next(t for t in prompt if not 0 <= t < vocab_rows)
        raise ValueError(
            f"prompt token id {bad} is outside the model's vocabulary (0..{vocab_rows - 1}); "
            "the env's tokenizer does not match the model — build the env with the model's "
            "tokenizer, or resize the model's embeddings"
        )
    return prompt


def split_stops(stop: StopCondition | None, base_ids: Sequence[int]) -> tuple[list[int], list[str]]:
    """(stop ids: `base_ids` then the call's int stops, stop strings: the call's non-empty ones)."""
    stop_ids, stop_strs = list(base_ids), []
    for s in stop or ():
        if isinstance(s, str):
            if s:
                stop_strs.append(s)
        else:
            stop_ids.append(int(s))
    return stop_ids, stop_strs


def call_limit(default: int, max_tokens: int | None) -> int:
    """A call's `max_tokens` (the sampler's default when None); `ValueError` when negative."""
    limit = default if max_tokens is None else int(max_tokens)
    if limit < 0:
        raise ValueError(f"max_tokens must be >= 0, got {limit}")
    return limit


@dataclass
class _LoopQueue:
    pending: list[Any] = field(default_factory=list)
    flusher: asyncio.Task | None = None


class BatchingCompleter(TokenCompleter):
    """Gathers concurrent calls into batches; subclasses set `max_batch_size` and `join_yields`
    (via `_init_batching`) and implement `_make_request` and `_generate`."""

    max_batch_size: int
    join_yields: int
    before_batch: Callable[[], None] | None  # called just before each batch of calls runs

    def _init_batching(self, max_batch_size: int, join_yields: int) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.max_batch_size = int(max_batch_size)
        self.join_yields = max(1, int(join_yields))
        self.before_batch = None
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = (
            weakref.WeakKeyDictionary()
        )

    def _make_request(self, model_input: Any, stop: StopCondition | None,
                      max_tokens: int | None) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _generate(self, requests: list[Any]) -> list[TokensWithLogprobs]:  # pragma: no cover
        raise NotImplementedError

    async def __call__(
        self, model_input: Any, stop: StopCondition | None = None, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        request = self._make_request(model_input, stop, max_tokens)  # bad input fails this caller
        loop = asyncio.get_running_loop()
        queue = self._queues.setdefault(loop, _LoopQueue())
        request.future = loop.create_future()
        queue.pending.append(request)
        if queue.flusher is None or queue.flusher.done():
            queue.flusher = loop.create_task(self._flush(queue))
        return await request.future

    async def _flush(self, queue: _LoopQueue) -> None:
        while queue.pending:
            # Let every rollout that is about to call join this batch: yield until the queue has
            # not grown for `join_yields` consecutive turns (or the batch is full).
            quiet, seen = 0, len(queue.pending)
            while quiet < self.join_yields and len(queue.pending) < self.max_batch_size:
                await asyncio.sleep(0)
                quiet, seen = (quiet + 1, seen) if len(queue.pending) == seen else (0, len(queue.pending))
            batch = queue.pending[: self.max_batch_size]
            del queue.pending[: self.max_batch_size]
            batch = [r for r in batch if r.future is not None and not r.future.done()]
            if not batch:
                continue
            if self.before_batch is not None:
                self.before_batch()
            try:
                results = self._generate(batch)
            except Exception as exc:  # hand the error to every caller of this batch
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(exc)
                continue
            for r, res in zip(batch, results):
                if not r.future.done():
                    r.future.set_result(res)

    def sample_batch(
        self,
        prompts: Sequence[Sequence[int]],
        n: int = 1,
        *,
        stop: StopCondition | None = None,
        max_tokens: int | None = None,
    ) -> list[list[TokensWithLogprobs]]:
        """Sample `n` completions for each prompt without an event loop (evaluation,
        benchmarks). Returns `out[i][j]`, the j-th completion of prompt i."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        requests = [self._make_request(p, stop, max_tokens) for p in prompts for _ in range(n)]
        results: list[TokensWithLogprobs] = []
        for start in range(0, len(requests), self.max_batch_size):
            results += self._generate(requests[start : start + self.max_batch_size])
        return [results[i * n : (i + 1) * n] for i in range(len(prompts))]
