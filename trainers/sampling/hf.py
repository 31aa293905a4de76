"""`HFSampler`: a Hugging Face causal LM as a batched `TokenCompleter` for rollouts.

Rollouts are plain coroutines that each `await policy(observation, stop, max_tokens=...)`. The
sampler queues those calls and, once every rollout that is about to call has done so (it yields to
the event loop a couple of times and watches the queue stop growing) or `max_batch_size` rows are
waiting, runs them as *one* batched generation. So rollout code stays one-episode-at-a-time while
the model sees large batches (the queue is `trainers.sampling.batching.BatchingCompleter`, shared with the
vLLM sampler).

Generation is a plain KV-cache loop (measured faster than `model.generate` for short completions
on CPU, see docs/design.md): left-padded prompts with an attention mask and explicit position ids, one
forward per new token for the whole batch, early exit once every row has stopped, and compaction of
the batch (dropping finished rows from the KV cache) once half of it has stopped. The KV cache is a
preallocated buffer per layer, [rows, kv heads, prompt width + max new tokens, head dim], that each
step writes in place at the next column (all rows share it: prompts are left-padded), with the
columns not yet written masked out; transformers' `DynamicCache` instead re-concatenates the whole
cache on every token (measured: 30% of a multi-turn rollout's time). The first call for a model
uses its own cache, to check that it is made of plain full-attention layers (remembered per model). Requests with
identical prompts — the G completions of a GRPO group — are prefilled once (`share_prefixes=True`),
which is most of the prefill arithmetic on short-answer tasks. Their decode then reads the shared
prompt's KV without copying it per row: each row gets a small buffer for the tokens it decodes
(`max_new - 1` columns), and the decode forwards run through a custom attention function
(`_shared_prompt_attention`, registered in transformers' `AttentionInterface` and selected only for
those forwards, as `trainers/grpo/packed_tails.py` does for training) that attends each row's query
to its prompt's keys (read per group: one matmul per prompt for all its rows) and to its own decoded
keys, in one softmax. Measured on 16 prompts x 16 rows, 8 new tokens (tiny model, one CPU thread):
expanding the prompt KV to every row (an index_select per layer, again at every compaction) and SDPA
over the expanded buffers were about a third of the generation; decoding this way takes 8-27% less
CPU (four runs on a loaded machine), and `benchmarks/trainer_vs_trl.py`'s generation phase went
from 0.149 to 0.105 s/step. Where a prompt continues a cached sequence (below), or the model's
attention modules are not the standard kind, the prompt KV is expanded to the rows instead. The
first shared decode step a model takes is also computed on the expanded path and compared (every
row's next-token distribution within KL 1e-5 of the expanded one in float32; 1e-2 in half
precision, where the score matmul rounds to bf16 and SDPA's does not: measured up to 4e-4 on the
tiny model, and 2e-3-7e-2 with the prompt values merely scaled by 1.05); a model that disagrees
warns once and decodes expanded from then on, starting with that very step.

Multi-turn episodes (`reuse_kv=True`): a multi-turn observation extends the previous one (the prefix
property: previous prompt + sampled tokens + the env's reply), so re-prefilling the whole context
every turn is most of a multi-turn rollout's arithmetic (measured: 82% of the sampling CPU time of
`llm-gym train --env llm/GuessNumber-v0`, 8 turns). After each call the sampler keeps every row's KV
cache in a bounded LRU (`_KVStore`, at most `kv_cache_entries` sequences and `kv_cache_bytes`
bytes), keyed by the tokens it covers; a later prompt that extends a stored sequence prefills only
its new suffix. Rows with different cached lengths share one batch: the cached parts are
left-padded to a common width and the suffixes left-padded after them, with the holes masked out and
explicit position ids, so every row's last token still sits in the last column. The cache is only
valid for the weights that computed it: it is dropped by `invalidate_cache()` and automatically when
any parameter was modified in place since it was filled (tensor version counters, which every
in-place optimizer update bumps). At `temperature=0` identical requests are generated once
(greedy decoding gives them the same answer), which makes evaluation over repeated prompts cheap.

Logprobs: each returned logprob is `log_softmax(logits / temperature)[token]` in float32, i.e. the
log-probability of the sampled token under the distribution it was actually drawn from. At
`temperature=1.0` that is exactly the model's own log-probability (what a teacher-forced forward
pass computes), so the trainer can use it as the old policy's logprob with no extra forward pass.
At another temperature the trainer must scale its logits by the same temperature (TRL does) or
recompute. `temperature=0` samples greedily and reports the model's temperature-1 logprobs.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from llm_gym.completers import StopCondition, TokensWithLogprobs
from llm_gym.rl.rollout_keys import call_seed, current_rollout_key
from trainers._attention import base_model, using_attention
from trainers.sampling.batching import BatchingCompleter, call_limit, prompt_ids, split_stops

__all__ = ["HFSampler", "SamplerStats"]

# model -> (its cache is plain full-attention DynamicCache layers?, number of layers)
_CACHE_KIND: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[bool, int]]" = weakref.WeakKeyDictionary()
# The attention function of shared-prompt decode steps, and the forward kwarg carrying its layout.
_SHARED_ATTENTION = "llm_gym_shared_prompt_decode"
_SHARED_KW = "llm_gym_shared_prompts"
# model -> can its decode run through `_shared_prompt_attention`? (`HFSampler._shared_decode_ok`)
_SHARED_OK: "weakref.WeakKeyDictionary[torch.nn.Module, bool]" = weakref.WeakKeyDictionary()
# models whose first shared decode step matched the expanded path's (`HFSampler._verify_shared`)
_SHARED_VERIFIED: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


@dataclass
class SamplerStats:
    """Counters for benchmarks and tests (how much batching and sharing actually happened)."""

    requests: int = 0
    batches: int = 0  # generations run (one prefill each)
    prefill_rows: int = 0  # rows actually prefilled (unique prompts when sharing)
    prefill_tokens: int = 0  # padded prompt tokens pushed through the model
    decode_steps: int = 0  # per-token forwards
    generated_tokens: int = 0  # tokens returned to callers
    reused_tokens: int = 0  # prompt tokens whose KV came from the cache of an earlier call
    cache_hits: int = 0  # prompts that continued a cached sequence
    greedy_duplicates: int = 0  # requests answered by an identical greedy request's result

    def reset(self) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, 0)


@dataclass
class _Request:
    prompt: tuple[int, ...]
    stop_ids: tuple[int, ...]
    stop_strs: tuple[str, ...]
    max_tokens: int
    future: asyncio.Future | None = None
    # the call's own random stream (llm_gym.rl.rollout_keys), None to draw from the shared one
    seed: int | None = None


def _row_uniforms(seeds: Sequence[int | None], step: int, generator: torch.Generator) -> torch.Tensor:
    """One uniform in [0, 1) per row (float64): from `(seed, step)` for a row with a seed (53
    bits of `call_seed`), else from `generator`."""
    values = [0.0] * len(seeds)
    shared = [i for i, seed in enumerate(seeds) if seed is None]
    if shared:
        draws = torch.rand(len(shared), generator=generator, dtype=torch.float64,
                           device=generator.device).tolist()
        for i, u in zip(shared, draws):
            values[i] = u
    for i, seed in enumerate(seeds):
        if seed is not None:
            values[i] = (call_seed(seed, step) >> 11) * 2.0**-53
    return torch.tensor(values, dtype=torch.float64)


class _KVStore:
    """A bounded LRU of per-sequence KV caches: `tokens -> [(keys [H, L, D], values [H, L, D]) per
    layer]`, L = len(tokens). Bounded by entry count and by bytes; the oldest entries go first."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict[tuple[int, ...], tuple[list, int]] = OrderedDict()
        self.version: Any = None  # the weights' version the entries were computed with

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def match(self, prompt: tuple[int, ...]) -> tuple[tuple[int, ...] | None, int]:
        """(the stored sequence to continue, how many of its tokens to reuse): the entry with the
        most reusable tokens among those that `prompt` extends (or that extend `prompt`). At most
        len(prompt) - 1 tokens are reused: the last prompt token must be fed to get its logits."""
        best, best_m = None, 0
        limit = len(prompt) - 1
        for key in self._entries:
            m = min(len(key), limit)
            if m > best_m and key[m - 1] == prompt[m - 1] and key[:m] == prompt[:m]:
                best, best_m = key, m
        if best is not None:
            self._entries.move_to_end(best)
        return best, best_m

    def get(self, key: tuple[int, ...]) -> list:
        return self._entries[key][0]

    def put(self, key: tuple[int, ...], layers: list) -> None:
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if key in self._entries:
            self.drop(key)
        if size > self.max_bytes or self.max_entries == 0:
            return
        self._entries[key] = (layers, size)
        self.nbytes += size
        while len(self._entries) > self.max_entries or self.nbytes > self.max_bytes:
            _, (_, old) = self._entries.popitem(last=False)
            self.nbytes -= old

    def drop(self, key: tuple[int, ...]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.nbytes -= entry[1]


class HFSampler(BatchingCompleter):
    """Sample from a `transformers` causal LM, batching concurrent calls.

    Args:
        model: a causal LM (an unwrapped `PreTrainedModel`; its weights are read live, so in-place
            optimizer updates are seen by the next call).
        temperature: softmax temperature; 0 means greedy.
        max_tokens: default cap on new tokens per call (a call's `max_tokens` overrides it).
        stop_token_ids: ids that end every row in addition to each call's stop condition.
        pad_token_id: id put in left padding (masked out; defaults to the model config's pad id).
        max_batch_size: most rows in one generation; a bigger queue is split.
        device: where to run; defaults to the model's device.
        seed: seed of the sampler's own `torch.Generator` (the only randomness used).
        share_prefixes: prefill identical prompts once and expand the KV cache.
        tokenizer: needed only for string stop sequences (decodes the generated tail).
        join_yields: how many consecutive event-loop turns without a new request end the wait for
            more callers before a batch is run.
        reuse_kv: keep each returned sequence's KV cache, so a later prompt that extends it (the
            next turn of a multi-turn episode) prefills only its new tokens. Needs a model whose
            cache is a transformers `DynamicCache` of full-attention layers; otherwise it is off.
        kv_cache_entries: most sequences kept for `reuse_kv`.
        kv_cache_bytes: most bytes of KV tensors kept for `reuse_kv` (on the model's device).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        temperature: float = 1.0,
        max_tokens: int = 64,
        stop_token_ids: Sequence[int] = (),
        pad_token_id: int | None = None,
        max_batch_size: int = 256,
        device: str | torch.device | None = None,
        seed: int = 0,
        share_prefixes: bool = True,
        tokenizer: Any = None,
        join_yields: int = 2,
        reuse_kv: bool = True,
        kv_cache_entries: int = 4096,
        kv_cache_bytes: int = 1 << 30,
    ) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        self._init_batching(max_batch_size, join_yields)  # trainers.sampling.batching: gathers calls
        if kv_cache_entries < 0 or kv_cache_bytes < 0:
            raise ValueError(
                f"kv_cache_entries and kv_cache_bytes must be >= 0, got {kv_cache_entries} and "
                f"{kv_cache_bytes} (pass reuse_kv=False to keep no cache)"
            )
        if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
            # Generation needs no gradient sync; the wrapped module shares the same weights.
            model = model.module
        self.model = model
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.stop_token_ids = tuple(int(t) for t in stop_token_ids)
        self.share_prefixes = share_prefixes
        self.tokenizer = tokenizer
        if device is None:
            device = next(model.parameters()).device
        self.device = torch.device(device)
        self.vocab_rows = _embedding_rows(model)
        self.pad_token_id = _default_pad_id(model) if pad_token_id is None else int(pad_token_id)
        if not 0 <= self.pad_token_id < self.vocab_rows:
            raise ValueError(
                f"pad_token_id={self.pad_token_id} is outside the model's vocabulary "
                f"(0..{self.vocab_rows - 1}); pass pad_token_id=<a valid id>"
            )
        self.seed = int(seed)
        self.generator = torch.Generator(device=self.device).manual_seed(self.seed)
        self.stats = SamplerStats()
        self._cache_kw, self._has_logits_to_keep = cache_kwargs(model)
        self.reuse_kv = bool(reuse_kv)
        self._kv = _KVStore(int(kv_cache_entries), int(kv_cache_bytes))
        # decided by the first cache the model returns, and remembered per model: the trainer
        # builds a new sampler every step, and the probe call costs a DynamicCache generation
        self._kv_supported, self._num_cache_layers = _CACHE_KIND.get(model, (None, 0))
        # Decode GRPO groups against their unexpanded prompt KV (see module doc); False forces the
        # expanded path (tests compare the two). None: not yet checked for this model.
        self._shared_decode: bool | None = None

    @property
    def context_window(self) -> int | None:
        """Longest prompt + completion the model was built for (its config's
        `max_position_embeddings`), None when the model does not say. Past it a RoPE model still
        runs, on positions it never saw; the trainer ends episodes there (`RolloutLimits`)."""
        value = getattr(getattr(base_model(self.model), "config", None), "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    # --- KV reuse ------------------------------------------------------------------------------
    def invalidate_cache(self) -> None:
        """Forget every cached sequence (call after changing the weights other than in place; in-place
        updates, such as an optimizer step, are detected on their own)."""
        self._kv.clear()
        self._kv.version = None

    @property
    def cached_sequences(self) -> int:
        return len(self._kv)

    @property
    def cached_bytes(self) -> int:
        return self._kv.nbytes

    def _weights_version(self) -> tuple[int, int]:
        # Every in-place write to a tensor bumps its version counter (optimizer.step, copy_,
        # load_state_dict), so the sum changes whenever the weights may have.
        params = list(self.model.parameters())
        return len(params), sum(p._version for p in params)

    # --- validation ----------------------------------------------------------------------------
    def _make_request(
        self, model_input: Any, stop: StopCondition | None, max_tokens: int | None
    ) -> _Request:
        prompt = prompt_ids(model_input, self.vocab_rows, "HFSampler")
        stop_ids, stop_strs = split_stops(stop, self.stop_token_ids)
        if stop_strs and self.tokenizer is None:
            raise ValueError(
                f"string stop sequences {stop_strs!r} need a tokenizer to decode samples; "
                "pass HFSampler(..., tokenizer=<the model's tokenizer>)"
            )
        limit = call_limit(self.max_tokens, max_tokens)
        key = current_rollout_key()  # read here, in the caller's task (its context)
        seed = None
        if key is not None and key.is_trajectory and self.temperature > 0.0:
            seed = call_seed(self.seed, *key.path, key.next_call())
        return _Request(prompt, tuple(dict.fromkeys(stop_ids)), tuple(stop_strs), limit, seed=seed)

    # --- generation ----------------------------------------------------------------------------
    def _forward(self, input_ids, attention_mask, position_ids, cache, shared=None):
        kwargs: dict[str, Any] = dict(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
        )
        if cache is not None:
            kwargs[self._cache_kw] = cache
        if self._has_logits_to_keep:
            kwargs["logits_to_keep"] = 1  # only the last position's logits are needed
        if shared is None:
            out = self.model(**kwargs)
        else:  # a decode step of rows that share prompts: the layout rides along to attention
            with using_attention(self.model, _SHARED_ATTENTION, _shared_prompt_attention):
                out = self.model(**kwargs, **{_SHARED_KW: shared})
        new_cache = getattr(out, "cache", None)
        if new_cache is None:
            new_cache = out.past_key_values
        # float32 so logprobs are exact enough for importance ratios even with bf16 weights
        return out.logits[:, -1, :].float(), new_cache

    def _sample(self, logits: torch.Tensor, seeds: list[int | None] | None = None,
                step: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens, logprobs) for one step; logprobs under the sampling distribution.

        `seeds` (one per row, or None) are the rows' own streams: such a row's token is the
        inverse CDF of a uniform drawn from `(seed, step)` alone, so it does not depend on which
        other rows share the batch. Rows without one draw from the sampler's generator."""
        if self.temperature == 0.0:
            logprobs = torch.log_softmax(logits, dim=-1)
            tokens = logprobs.argmax(dim=-1)
        elif seeds is None:
            logprobs = torch.log_softmax(logits / self.temperature, dim=-1)
            tokens = torch.multinomial(logprobs.exp(), 1, generator=self.generator).squeeze(1)
        else:
            logprobs = torch.log_softmax(logits / self.temperature, dim=-1)
            uniforms = _row_uniforms(seeds, step, self.generator).to(logits.device)
            # float64 CDF: the drawn point (< the total) falls in exactly one token's interval,
            # and a token of probability 0 has an empty one (right=True skips it)
            cdf = logprobs.double().exp().cumsum(dim=-1)
            point = (uniforms * cdf[:, -1])[:, None]
            tokens = torch.searchsorted(cdf, point, right=True).squeeze(1).clamp_(max=cdf.shape[1] - 1)
        return tokens, logprobs.gather(1, tokens[:, None]).squeeze(1)

    def _generate(self, requests: list[_Request]) -> list[TokensWithLogprobs]:
        if self.reuse_kv:
            version = self._weights_version()
            if version != self._kv.version:  # the weights moved: cached KV is stale
                self._kv.clear()
                self._kv.version = version
        which = list(range(len(requests)))
        if self.temperature == 0.0:
            # Greedy decoding gives identical requests identical answers: generate each once.
            first: dict[tuple, int] = {}
            which = [first.setdefault((r.prompt, r.stop_ids, r.stop_strs, r.max_tokens), i)
                     for i, r in enumerate(requests)]
            self.stats.greedy_duplicates += len(requests) - len(first)
            requests = [requests[i] for i in first.values()]
            slot = {i: j for j, i in enumerate(first.values())}
            which = [slot[i] for i in which]
        model = self.model
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                results = self._generate_inner(requests)
        finally:
            model.train(was_training)
        if len(which) == len(results):
            return results
        self.stats.requests += len(which) - len(results)
        return [TokensWithLogprobs(list(results[j].tokens), list(results[j].logprobs),
                                   results[j].stop_reason) for j in which]

    def _generate_inner(self, requests: list[_Request]) -> list[TokensWithLogprobs]:
        dev = self.device
        num_rows = len(requests)
        self.stats.requests += num_rows
        max_new = max(r.max_tokens for r in requests)
        if max_new == 0:
            return [TokensWithLogprobs([], [], "length") for _ in requests]

        # Unique prompts (prefilled once each) and the prompt each row continues.
        if self.share_prefixes:
            unique: dict[tuple[int, ...], int] = {}
            row_prompt = [unique.setdefault(r.prompt, len(unique)) for r in requests]
            prompts = list(unique)
        else:
            row_prompt = list(range(num_rows))
            prompts = [r.prompt for r in requests]
        # Cached sequences these prompts extend: only their new suffixes are prefilled.
        reuse = self.reuse_kv and self._kv_supported is True
        hits = [self._kv.match(p) for p in prompts] if reuse else [(None, 0)] * len(prompts)
        cached = [m for _, m in hits]
        past_width = max(cached)
        suffixes = [p[m:] for p, m in zip(prompts, cached)]
        new_width = max(len(x) for x in suffixes)
        width = past_width + new_width
        # Row layout: [pad][cached tokens] | [pad][new tokens]; the cache holds the columns left of
        # `|`, the forward feeds the ones right of it, and the mask hides both pads.
        ids = torch.full((len(prompts), new_width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, (x, m) in enumerate(zip(suffixes, cached)):
            ids[i, new_width - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[i, width - len(x) :] = 1
            mask[i, past_width - m : past_width] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        positions = (mask.cumsum(-1) - 1).clamp_(min=0)[:, past_width:]
        # Rows share prompts and no prompt continues a cached sequence: decode against the
        # prefill's per-prompt KV, unexpanded (module doc); the prefill's buffers then hold only
        # the prompts, and each row's own tokens get a buffer of their own.
        shared_decode = (len(prompts) != num_rows and past_width == 0 and max_new > 1
                         and self._kv_supported is True and self._shared_decode_ok())
        if self._kv_supported is True:
            # Preallocated buffers: each later token's K/V is written in place, no re-concatenation.
            # The last sampled token is never fed back, hence max_new - 1 more columns.
            capacity = width if shared_decode else width + max_new - 1
            past = self._assemble_past(hits, past_width, capacity)
        else:  # first call: let the model build its own cache, and see whether it is plain
            past = None
        logits, cache = self._forward(ids, mask, positions, past)
        if self._kv_supported is None:
            self._kv_supported = _is_plain_dynamic_cache(cache)
            self._num_cache_layers = len(cache.layers) if self._kv_supported else 0
            _CACHE_KIND[self.model] = (self._kv_supported, self._num_cache_layers)
        self.stats.batches += 1
        self.stats.prefill_rows += len(prompts)
        self.stats.prefill_tokens += ids.numel()
        self.stats.reused_tokens += sum(cached)
        self.stats.cache_hits += sum(1 for m in cached if m)

        next_pos = positions[:, -1] + 1
        shared = None  # the decode steps' `_SharedPrompts` layout, on the shared path
        prefill = None  # the prompts' own cache and mask, until a model's first shared step
        if len(prompts) != num_rows:
            expand = torch.tensor(row_prompt, dtype=torch.long, device=dev)
            if shared_decode:
                shared = _SharedPrompts(cache, mask, expand)
                if base_model(self.model) not in _SHARED_VERIFIED:  # the check's oracle
                    prefill = (cache, mask)
                cache = _buffer_cache(self._num_cache_layers, max_new - 1, trim=True)
                mask = None  # the attention function masks the prompts' padding itself
            else:
                cache.reorder_cache(expand)  # index_select on every layer: G rows share one prefill
                mask = mask[expand]
            logits, next_pos = logits[expand], next_pos[expand]

        # Per-row stop table (padded with -1, which no sampled token equals).
        width_stops = max(1, max(len(r.stop_ids) for r in requests))
        stop_table = torch.full((num_rows, width_stops), -1, dtype=torch.long)
        for i, r in enumerate(requests):
            if r.stop_ids:
                stop_table[i, : len(r.stop_ids)] = torch.tensor(r.stop_ids, dtype=torch.long)
        stop_table = stop_table.to(dev)
        limits = torch.tensor([r.max_tokens for r in requests], dtype=torch.long, device=dev)
        string_rows = [i for i, r in enumerate(requests) if r.stop_strs]
        keep_kv = self.reuse_kv and self._kv_supported is True
        stored: set[tuple[int, ...]] = set()  # sequences this call put in the store

        out_tokens = torch.full((num_rows, max_new), self.pad_token_id, dtype=torch.long, device=dev)
        out_logprobs = torch.zeros((num_rows, max_new), dtype=torch.float32, device=dev)
        lengths = torch.zeros(num_rows, dtype=torch.long, device=dev)
        stopped = torch.zeros(num_rows, dtype=torch.bool, device=dev)  # ended on a stop
        done = limits == 0
        rows = torch.arange(num_rows, device=dev)  # original row of each live batch row

        # Rows with their own random stream (keyed rollouts): sampled independently of the batch.
        row_seeds = [r.seed for r in requests]
        keyed = any(seed is not None for seed in row_seeds)
        for step in range(max_new):
            live_seeds = [row_seeds[i] for i in rows.tolist()] if keyed else None
            tokens, logprobs = self._sample(logits, live_seeds, step)
            out_tokens[rows, step] = tokens
            out_logprobs[rows, step] = logprobs
            hit = (tokens[:, None] == stop_table[rows]).any(dim=-1)
            if string_rows:
                hit |= self._string_stop_hits(requests, rows, out_tokens, step)
            live = ~done[rows]
            finishing = live & (hit | (limits[rows] <= step + 1))
            lengths[rows] = torch.where(finishing, step + 1, lengths[rows])
            stopped[rows] |= finishing & hit
            done[rows] |= finishing
            still_live = live & ~finishing
            num_live = int(still_live.sum())
            if num_live == 0:
                break
            if num_live <= rows.numel() // 2:
                # Half the batch has stopped: drop finished rows so later steps cost less.
                if keep_kv:
                    gone = (~still_live).nonzero().squeeze(1)
                    stored = self._keep_rows(cache, shared, gone, rows, mask, width, lengths,
                                             requests, out_tokens, stored)
                keep = still_live.nonzero().squeeze(1)
                cache.batch_select_indices(keep)
                rows, tokens, next_pos = rows[keep], tokens[keep], next_pos[keep]
                if shared is None:
                    assert mask is not None  # None exactly when the rows share prompts
                    mask = mask[keep]
                else:
                    shared.set_rows(shared.row_prompt[keep])
            if shared is None:
                assert mask is not None  # None exactly when the rows share prompts
                mask = torch.cat([mask, mask.new_ones((rows.numel(), 1))], dim=1)
            if prefill is not None:
                logits, cache, shared, mask = self._verify_shared(tokens, next_pos, cache, shared,
                                                                  prefill, width + max_new - 1)
                prefill = None
            else:
                logits, cache = self._forward(tokens[:, None], mask, next_pos[:, None], cache,
                                              shared)
            next_pos = next_pos + 1
            self.stats.decode_steps += 1

        if keep_kv:
            stored = self._keep_rows(cache, shared, torch.arange(rows.numel(), device=dev), rows,
                                     mask, width, lengths, requests, out_tokens, stored)
            for (key, m), p in zip(hits, prompts):
                # superseded by the longer sequence just stored (the episode's next turn)
                if m and key is not None and len(key) <= len(p) and key not in stored:
                    self._kv.drop(key)
        lengths_l = lengths.tolist()
        tokens_l = out_tokens.tolist()
        logprobs_l = out_logprobs.tolist()
        stopped_l = stopped.tolist()
        results = []
        for i in range(num_rows):
            n = lengths_l[i]
            results.append(
                TokensWithLogprobs(
                    tokens=tokens_l[i][:n],
                    maybe_logprobs=logprobs_l[i][:n],
                    stop_reason="stop" if stopped_l[i] else "length",
                )
            )
            self.stats.generated_tokens += n
        return results

    def _assemble_past(self, hits: list, past_width: int, capacity: int):
        """A buffer cache (`_buffer_cache`) of `capacity` columns per layer holding each prompt's
        cached KV right-aligned in its first `past_width` columns (zeros, masked out, on the left),
        written straight into the buffers; empty if nothing is cached (the prefill's first write
        then allocates the buffers)."""
        cache = _buffer_cache(self._num_cache_layers, capacity)
        if not past_width:
            return cache
        stored = [self._kv.get(key) if m else None for key, m in hits]
        ref = next(s for s in stored if s is not None)
        for li, (layer, (k0, v0)) in enumerate(zip(cache.layers, ref)):
            # zeros, not empty: masked columns still enter q.k, and NaN garbage would survive that
            keys = k0.new_zeros((len(hits), k0.shape[0], capacity, k0.shape[2]))
            values = v0.new_zeros((len(hits), v0.shape[0], capacity, v0.shape[2]))
            for u, (s, (_, m)) in enumerate(zip(stored, hits)):
                if m and s is not None:  # (stored exactly when m)
                    keys[u, :, past_width - m : past_width] = s[li][0][:, :m]
                    values[u, :, past_width - m : past_width] = s[li][1][:, :m]
            layer.keys, layer.values, layer.device = keys, values, keys.device
            layer.length, layer.is_initialized = past_width, True
        return cache

    def _keep_rows(self, cache, shared, batch_rows, rows, mask, width, lengths, requests,
                   out_tokens, stored: set) -> set:
        """Store the KV of the given live batch rows: each row's real columns (its prompt and the
        sampled tokens fed back so far, i.e. all but the last one) under those tokens; return
        `stored` with their keys added. On the shared path (`shared` is the layout) a row's KV
        is its prompt's real columns followed by the first columns of its own buffer."""
        if batch_rows.numel() == 0:
            return stored
        n_fed = (lengths[rows[batch_rows]] - 1).clamp_(min=0).tolist()
        orig = rows[batch_rows].tolist()
        sampled = out_tokens[rows[batch_rows]].tolist()
        layer_kv = [(layer.keys, layer.values) for layer in cache.layers]
        for b, i, n, toks in zip(batch_rows.tolist(), orig, n_fed, sampled):
            key = requests[i].prompt + tuple(toks[:n])
            if shared is None:
                cols = mask[b, : width + n].nonzero().squeeze(1)
                kv = [(k[b].index_select(1, cols), v[b].index_select(1, cols)) for k, v in layer_kv]
            else:
                c = int(shared.row_prompt[b])
                kv = [shared.prompt_kv(li, c) for li in range(len(layer_kv))]
                if n:  # own buffers exist once a token was fed back
                    kv = [(torch.cat([kc, k[b, :, :n]], 1), torch.cat([vc, v[b, :, :n]], 1))
                          for (kc, vc), (k, v) in zip(kv, layer_kv)]
            self._kv.put(key, kv)
            stored.add(key)
        return stored

    def _verify_shared(self, tokens, next_pos, cache, shared, prefill, capacity: int):
        """A model's first shared decode step, also run on the expanded path (the prefill's
        prompt KV, `prefill` = (cache, mask), index-selected to every row in a buffer of
        `capacity` columns, as without sharing) and compared. Returns (logits, cache, shared,
        mask) to go on with: the shared path's when they agree; else, after a warning (once per
        model, which then always decodes expanded), the expanded path's, so this generation too
        is the expanded path's from here on."""
        base = base_model(self.model)
        row_prompt = shared.row_prompt
        prompt_cache, prompt_mask = prefill
        ref = _buffer_cache(self._num_cache_layers, capacity)
        width = prompt_mask.shape[1]
        for layer, src in zip(ref.layers, prompt_cache.layers):
            k = src.keys[:, :, :width].index_select(0, row_prompt)
            v = src.values[:, :, :width].index_select(0, row_prompt)
            layer.keys = k.new_zeros((*k.shape[:2], capacity, k.shape[-1]))
            layer.values = v.new_zeros((*v.shape[:2], capacity, v.shape[-1]))
            layer.keys[:, :, :width], layer.values[:, :, :width] = k, v
            layer.device, layer.length, layer.is_initialized = k.device, width, True
        mask = prompt_mask.index_select(0, row_prompt)
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        ref_logits, ref = self._forward(tokens[:, None], mask, next_pos[:, None], ref)
        logits, cache = self._forward(tokens[:, None], None, next_pos[:, None], cache, shared)
        half = next(base.parameters()).dtype in (torch.float16, torch.bfloat16)
        ref_logp = torch.log_softmax(ref_logits, -1)
        gap = float((ref_logp.exp() * (ref_logp - torch.log_softmax(logits, -1))).sum(-1).max())
        if gap <= (1e-2 if half else 1e-5):  # NaN fails too
            _SHARED_VERIFIED.add(base)
            return logits, cache, shared, None
        _SHARED_OK[base] = False
        self._shared_decode = False
        warnings.warn(
            f"HFSampler: decoding rows against their shared prompt's KV disagrees with the "
            f"expanded decode on this model (KL {gap:.3g} on a row); it decodes on "
            f"the expanded path from now on", RuntimeWarning, stacklevel=2)
        return ref_logits, ref, None, mask

    def _shared_decode_ok(self) -> bool:
        """Whether this model's decode can run through `_shared_prompt_attention` (checked once
        per model): per-layer attention modules that call their attention function with
        `module.layer_idx` and `num_key_value_groups`, as Llama, Qwen2/3 and Mistral do, and
        full attention everywhere (the cache check already rules out sliding and recurrent
        layers; a configured sliding window is ruled out here too)."""
        if self._shared_decode is None:
            base = base_model(self.model)
            verdict = _SHARED_OK.get(base)
            if verdict is None:
                config = getattr(base, "config", None)
                attn: list[Any] = [m for m in base.modules()
                        if hasattr(m, "layer_idx") and hasattr(m, "num_key_value_groups")]
                verdict = _SHARED_OK[base] = bool(
                    config is not None
                    and getattr(config, "_attn_implementation", None) in ("sdpa", "eager")
                    and not (getattr(config, "sliding_window", None)
                             and getattr(config, "use_sliding_window", True))
                    and sorted(m.layer_idx for m in attn) == list(range(self._num_cache_layers)))
            self._shared_decode = verdict
        return self._shared_decode

    def _string_stop_hits(
        self, requests: list[_Request], rows: torch.Tensor, out_tokens: torch.Tensor, step: int
    ) -> torch.Tensor:
        """Rows whose decoded tail now contains one of their stop strings (slow path)."""
        hits = torch.zeros(rows.numel(), dtype=torch.bool)
        rows_l = rows.tolist()
        for j, i in enumerate(rows_l):
            stops = requests[i].stop_strs
            if not stops:
                continue
            # A stop of k chars spans at most 4k byte-level tokens (+1 for a split character).
            window = 4 * max(len(s) for s in stops) + 1
            start = max(0, step + 1 - window)
            tail = self.tokenizer.decode(out_tokens[i, start : step + 1].tolist())
            hits[j] = any(s in tail for s in stops)
        return hits.to(rows.device)


class _SharedPrompts:
    """Where the decode rows' prompt KV lives, for `_shared_prompt_attention`.

    Per layer, the prefill's KV of the C distinct prompts (left-padded to W columns), kept in the
    layout the attention matmuls read without copies: `keys_t[layer]` [C * kv heads, D, W]
    (transposed once per generation), `values[layer]` [C * kv heads, W, D]; `bias` [C * kv
    heads, 1, W]: 0 on a prompt's real columns, the dtype's minimum on its padding. `row_prompt`
    [rows]: the prompt each live decode row continues. Rows are read in groups: `slots` places row
    r at `row_prompt[r] * group + (its rank among its prompt's rows)` of a [C * group] layout, so
    one matmul per prompt and head serves all its rows and the prompt KV is never copied per row;
    `slots` is None when the rows already are that layout (equal consecutive runs, C * group
    rows)."""

    def __init__(self, cache, mask: torch.Tensor, row_prompt: torch.Tensor) -> None:
        k0 = cache.layers[0].keys
        c, kv_heads, width, dim = k0.shape
        self.prompts, self.kv_heads, self.width = c, kv_heads, width
        self.keys_t = [layer.keys.transpose(-1, -2).reshape(c * kv_heads, dim, width)
                       for layer in cache.layers]
        self.values = [layer.values.reshape(c * kv_heads, width, dim) for layer in cache.layers]
        self.mask = mask.bool()  # [C, W], for `_keep_rows`
        bias = torch.zeros((c, kv_heads, 1, width), dtype=k0.dtype, device=k0.device)
        bias.masked_fill_(~self.mask[:, None, None, :], torch.finfo(k0.dtype).min)
        self.bias = bias.view(c * kv_heads, 1, width)
        self.set_rows(row_prompt)

    def prompt_kv(self, layer: int, c: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompt c's real columns at `layer`: keys and values [kv heads, len, D]."""
        cols = self.mask[c].nonzero().squeeze(1)
        h = slice(c * self.kv_heads, (c + 1) * self.kv_heads)
        return (self.keys_t[layer][h].transpose(-1, -2).index_select(1, cols),
                self.values[layer][h].index_select(1, cols))

    def set_rows(self, row_prompt: torch.Tensor) -> None:
        self.row_prompt = row_prompt
        owners = row_prompt.tolist()
        seen = [0] * self.prompts
        ranks = []
        for c in owners:
            ranks.append(seen[c])
            seen[c] += 1
        self.group = max(seen)
        if len(owners) == self.group * self.prompts and all(
                c == i // self.group for i, c in enumerate(owners)):
            self.slots = None
        else:
            self.slots = torch.tensor([c * self.group + r for c, r in zip(owners, ranks)],
                                      dtype=torch.long, device=row_prompt.device)


# Below this many elements (rows x heads x own columns x head dim) a row's scores and output over
# its own few decoded keys are a broadcast multiply and sum: on CPU a batched matmul of
# rows x heads tiny matrices costs several times more (measured: 256 rows, 4 heads, 8 columns).
_ELEMENTWISE_OWN = 1 << 22


def _shared_prompt_attention(module, query, key, value, attention_mask, scaling, dropout=0.0,
                             **kwargs):
    """transformers attention-function signature, for one decode token per row: `query` [B, H, 1,
    D] (RoPE applied), `key` / `value` [B, H_kv, n, D] the row's own decoded tokens so far (its
    `_BufferLayer(trim=True)` returns only the written columns), the prompts in
    `kwargs[_SHARED_KW]` (a `_SharedPrompts`). Softmax over (the prompt's real keys, the row's own
    keys) jointly. GQA: the H / H_kv query heads of one KV head are stacked as extra query rows,
    so no KV is repeated. Returns ([B, 1, H, D], None). `attention_mask` is None (the mask
    interface skips unknown attention names); dropout is off (generation runs in eval mode)."""
    layout: _SharedPrompts = kwargs[_SHARED_KW]
    layer = module.layer_idx
    rows, heads, t, dim = query.shape
    kv_heads, n = key.shape[1], key.shape[2]
    c, width, g = layout.prompts, layout.width, layout.group
    m = heads // kv_heads * t  # query rows per KV head
    q = query.reshape(rows, kv_heads, m, dim)

    def grouped(x: torch.Tensor) -> torch.Tensor:  # [B, Hkv, m, k] -> [C * Hkv, g * m, k]
        if layout.slots is not None:
            x = x.new_zeros((c * g, *x.shape[1:])).index_copy_(0, layout.slots, x)
        return x.reshape(c, g, kv_heads, m, -1).transpose(1, 2).reshape(c * kv_heads, g * m, -1)

    def per_row(x: torch.Tensor) -> torch.Tensor:  # [C * Hkv, g * m, k] -> [B, Hkv, m, k]
        x = x.view(c, kv_heads, g, m, -1).transpose(1, 2).reshape(c * g, kv_heads, m, -1)
        return x if layout.slots is None else x.index_select(0, layout.slots)

    # prompt part: scaled scores plus the padding bias in one batched matmul per prompt and head
    pre = torch.baddbmm(layout.bias, grouped(q), layout.keys_t[layer], alpha=scaling)
    small = q.numel() * n <= _ELEMENTWISE_OWN
    if small:
        own = (q[:, :, :, None, :] * key[:, :, None]).sum(-1) * scaling  # [B, Hkv, m, n]
    else:
        own = torch.matmul(q, key.transpose(-1, -2)) * scaling
    probs = torch.softmax(torch.cat([per_row(pre), own], dim=-1), dim=-1, dtype=torch.float32)
    p_pre, p_own = probs.to(query.dtype).split([width, n], dim=-1)
    if small:
        out = (p_own[..., None] * value[:, :, None]).sum(-2)
    else:
        out = torch.matmul(p_own, value)
    out = out + per_row(torch.bmm(grouped(p_pre), layout.values[layer]))
    return out.view(rows, heads, t, dim).transpose(1, 2), None


_BUFFER_CACHE_CLASS: Any = None


def _buffer_cache(num_layers: int, capacity: int, trim: bool = False):
    """An empty transformers `Cache` of `num_layers` `_BufferLayer`s of `capacity` columns each
    (the classes are defined on first use so that importing this module does not import
    transformers). `trim`: `update` returns only the columns written so far."""
    global _BUFFER_CACHE_CLASS
    if _BUFFER_CACHE_CLASS is None:
        _BUFFER_CACHE_CLASS = _define_buffer_cache()
    return _BUFFER_CACHE_CLASS(num_layers, capacity, trim)


def _define_buffer_cache():
    from transformers.cache_utils import Cache, DynamicLayer

    class _BufferLayer(DynamicLayer):
        """A full-attention cache layer over preallocated [rows, heads, capacity, head_dim] buffers:
        `update` writes the new columns in place at the current length and hands the model the
        whole buffer (the columns not yet written are masked: `get_mask_sizes` reports the full
        width, and the 2D mask is zero-padded to it). Rows are left-padded, so every row writes the
        same column. This avoids `DynamicLayer`'s `torch.cat` of the whole cache on every token."""

        keys: torch.Tensor  # set by lazy_initialization, before any update reads them
        values: torch.Tensor

        def __init__(self, capacity: int, trim: bool = False) -> None:
            super().__init__()
            self.capacity = capacity
            self.trim = trim
            self.length = 0

        def lazy_initialization(self, key_states, value_states) -> None:
            rows, heads = key_states.shape[:2]
            self.device = key_states.device
            shape = (rows, heads, self.capacity)
            self.keys = key_states.new_zeros((*shape, key_states.shape[-1]))
            self.values = value_states.new_zeros((*shape, value_states.shape[-1]))
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self.length + key_states.shape[-2]
            if end > self.capacity:
                raise RuntimeError(f"KV buffer overflow: {end} columns > capacity {self.capacity}")
            self.keys[:, :, self.length : end] = key_states
            self.values[:, :, self.length : end] = value_states
            self.length = end
            if self.trim:  # for `_shared_prompt_attention`, which takes no mask
                return self.keys[:, :, :end], self.values[:, :, :end]
            return self.keys, self.values

        def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
            return self.capacity, 0

        def get_seq_length(self) -> int:
            return self.length if self.is_initialized else 0

        def get_max_length(self) -> int:
            return self.capacity

    class _BufferCache(Cache):
        def __init__(self, num_layers: int, capacity: int, trim: bool = False) -> None:
            super().__init__(layers=[_BufferLayer(capacity, trim) for _ in range(num_layers)])

    return _BufferCache


def _is_plain_dynamic_cache(cache: Any) -> bool:
    """Whether per-row KV can be cut out of `cache` and put back later: a transformers
    `DynamicCache` whose layers are all full-attention `DynamicLayer`s (a sliding-window or
    recurrent layer does not hold one column per token)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    layers = getattr(cache, "layers", None)
    return (type(cache) is DynamicCache and bool(layers)
            and all(type(layer) is DynamicLayer and (keys := getattr(layer, "keys", None)) is not None
                    and keys.dim() == 4 for layer in layers))


def _embedding_rows(model: torch.nn.Module) -> int:
    hf: Any = model  # a transformers model (get_input_embeddings, config: unknown to nn.Module's typing)
    emb = hf.get_input_embeddings() if hasattr(hf, "get_input_embeddings") else None
    if emb is not None and hasattr(emb, "weight"):
        return int(emb.weight.shape[0])
    return int(hf.config.vocab_size)


def _default_pad_id(model: torch.nn.Module) -> int:
    config = getattr(model, "config", None)
    for source in (config, getattr(model, "generation_config", None)):
        for name in ("pad_token_id", "eos_token_id"):
            value = getattr(source, name, None)
            if isinstance(value, (list, tuple)):
                value = value[0] if value else None
            if value is not None:
                return int(value)
    return 0


def cache_kwargs(model: torch.nn.Module) -> tuple[str, bool]:
    """(the KV-cache keyword the model's forward takes, whether it takes `logits_to_keep`):
    `cache` in transformers >= 5.x (`past_key_values` is deprecated there), `past_key_values`
    before. Looks through DDP/DataParallel and PEFT wrappers."""
    if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        model = model.module
    candidates = [model]
    get_base = getattr(model, "get_base_model", None)
    if callable(get_base):
        candidates.append(get_base())
    for m in candidates:
        params = inspect.signature(m.forward).parameters
        if "cache" in params or "past_key_values" in params:
            return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params
    return "past_key_values", False
