"""Tinker-style completers over fake sampling clients: `client.sample(...)` is called and whatever it
returns awaited (a future-like object, a coroutine, or the response itself); a client with only
`sample_async` is used through that; one with both uses `sample`; one with neither is refused at
the first call. The sampled sequence's id and the response's prompt-cache count reach
`TokensWithLogprobs`."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from llm_gym.completers import TinkerMessageCompleter, TinkerTokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput

PROMPT = ModelInput.from_ints([5, 6, 7])


def response(tokens=(1, 2), logprobs=(-0.5, -1.5), stop_reason="stop", sequence_id="sq-1", cache_hits=3):
    seq = SimpleNamespace(tokens=list(tokens), stop_reason=stop_reason,
                          logprobs=None if logprobs is None else list(logprobs))
    if sequence_id is not None:
        seq.sequence_id = sequence_id
    resp = SimpleNamespace(sequences=[seq])
    if cache_hits is not None:
        resp.prompt_cache_hit_tokens = cache_hits
    return resp


class AwaitableResult:
    """Future-like (awaitable, not a coroutine), as a Tinker `APIFuture` is; counts awaits."""

    def __init__(self, value):
        self.value, self.awaited = value, 0

    def __await__(self):
        self.awaited += 1
        yield from asyncio.sleep(0).__await__()
        return self.value


def call_record(args, kwargs):
    prompt = kwargs["prompt"] if "prompt" in kwargs else args[0]
    params = kwargs["sampling_params"]
    return {"prompt": list(prompt.to_ints()), "prompt_kw": "prompt" in kwargs,
            "num_samples": kwargs["num_samples"], "temperature": params.temperature,
            "max_tokens": params.max_tokens, "stop": params.stop}


class SampleOnly:
    """`sample(...)` returns an awaitable (`mode` "future" or "coroutine") or the response itself."""

    def __init__(self, resp=None, mode="future"):
        self.resp, self.mode, self.calls, self.results = resp or response(), mode, [], []

    def sample(self, *args, **kwargs):
        self.calls.append(call_record(args, kwargs))
        if self.mode == "plain":
            return self.resp
        if self.mode == "coroutine":
            async def later():
                await asyncio.sleep(0)
                return self.resp
            return later()
        result = AwaitableResult(self.resp)
        self.results.append(result)
        return result


class SampleAsyncOnly:
    def __init__(self, resp=None):
        self.resp, self.calls = resp or response(), []

    async def sample_async(self, *args, **kwargs):
        self.calls.append(call_record(args, kwargs))
        await asyncio.sleep(0)
        return self.resp


class Both(SampleOnly):
    def __init__(self, resp=None):
        super().__init__(resp)
        self.async_calls = 0

    async def sample_async(self, *args, **kwargs):
        self.async_calls += 1
        raise AssertionError("sample_async must not be used when sample exists")


class Renderer:
    """The three renderer calls the message completer makes."""

    def __init__(self, parsed=None):
        self.parsed = parsed or {"role": "assistant", "content": "hello"}
        self.seen_messages, self.seen_tokens = [], []

    def build_generation_prompt(self, messages):
        self.seen_messages.append(messages)
        return PROMPT

    def get_stop_sequences(self):
        return [99]

    def parse_response(self, tokens):
        self.seen_tokens.append(tokens)
        return dict(self.parsed), True


def complete(completer, *args, **kwargs):
    return asyncio.run(completer(*args, **kwargs))


# --- TinkerTokenCompleter ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["future", "coroutine", "plain"])
def test_token_completer_awaits_whatever_sample_returns(mode):
    client = SampleOnly(mode=mode)
    out = complete(TinkerTokenCompleter(client, max_tokens=16, temperature=0.7), PROMPT, [0])
    assert isinstance(out, TokensWithLogprobs)
    assert (out.tokens, out.maybe_logprobs, out.stop_reason) == ([1, 2], [-0.5, -1.5], "stop")
    assert (out.sequence_id, out.prompt_cache_hit_tokens) == ("sq-1", 3)
    assert len(client.calls) == 1
    assert client.calls[0] == {"prompt": [5, 6, 7], "prompt_kw": True, "num_samples": 1,
                               "temperature": 0.7, "max_tokens": 16, "stop": [0]}
    if mode == "future":
        assert [r.awaited for r in client.results] == [1]


def test_token_completer_falls_back_to_sample_async():
    client = SampleAsyncOnly(response(stop_reason="length", sequence_id="only-async", cache_hits=0))
    out = complete(TinkerTokenCompleter(client, max_tokens=8), PROMPT, [0])
    assert (out.tokens, out.stop_reason, out.sequence_id) == ([1, 2], "length", "only-async")
    assert len(client.calls) == 1 and client.calls[0]["prompt"] == [5, 6, 7]
    assert client.calls[0]["temperature"] == 1.0  # the default


def test_token_completer_prefers_sample_when_both_exist():
    client = Both()
    out = complete(TinkerTokenCompleter(client, max_tokens=8), PROMPT, [0])
    assert out.sequence_id == "sq-1"
    assert len(client.calls) == 1 and client.async_calls == 0


def test_token_completer_without_sampling_interface_fails_at_first_call():
    completer = TinkerTokenCompleter(object(), max_tokens=8)  # constructing is fine
    with pytest.raises(TypeError, match="sample"):
        complete(completer, PROMPT, [0])


def test_token_completer_defaults_when_response_has_no_id_or_cache_count():
    out = complete(TinkerTokenCompleter(SampleOnly(response(sequence_id=None, cache_hits=None)), max_tokens=4),
                   PROMPT, [0])
    assert (out.sequence_id, out.prompt_cache_hit_tokens) == (None, 0)
    out = complete(TinkerTokenCompleter(SampleOnly(response(cache_hits=None)), max_tokens=4), PROMPT, [0])
    assert (out.sequence_id, out.prompt_cache_hit_tokens) == ("sq-1", 0)
    resp = response()
    resp.prompt_cache_hit_tokens = None  # present but unknown
    out = complete(TinkerTokenCompleter(SampleOnly(resp), max_tokens=4), PROMPT, [0])
    assert out.prompt_cache_hit_tokens == 0


def test_token_completer_budget_and_context_window():
    client = SampleOnly()
    complete(TinkerTokenCompleter(client, max_tokens=16), PROMPT, [0], max_tokens=5)
    complete(TinkerTokenCompleter(client, max_tokens=4), PROMPT, [0], max_tokens=50)
    complete(TinkerTokenCompleter(client, max_tokens=16, context_window=10), PROMPT, [0])  # 10 - 3 left
    assert [c["max_tokens"] for c in client.calls] == [5, 4, 7]
    with pytest.raises(ValueError):
        complete(TinkerTokenCompleter(client, max_tokens=16, context_window=3), PROMPT, [0])
    assert len(client.calls) == 3  # refused before sampling


def test_token_completer_needs_logprobs():
    with pytest.raises(ValueError):
        complete(TinkerTokenCompleter(SampleOnly(response(logprobs=None)), max_tokens=4), PROMPT, [0])


# --- TinkerMessageCompleter ----------------------------------------------------------------------


@pytest.mark.parametrize("make_client", [SampleOnly, SampleAsyncOnly, Both, lambda: SampleOnly(mode="plain")],
                         ids=["sample", "sample_async", "both", "sample-plain"])
def test_message_completer_samples_through_any_interface(make_client):
    client = make_client()
    renderer = Renderer()
    reply = complete(TinkerMessageCompleter(client, renderer, max_tokens=12, temperature=0.3),
                     [{"role": "user", "content": "hi"}])
    assert reply == {"role": "assistant", "content": "hello"}
    assert renderer.seen_messages == [[{"role": "user", "content": "hi"}]]
    assert renderer.seen_tokens == [[1, 2]]
    assert len(client.calls) == 1
    call = client.calls[0]
    assert (call["prompt"], call["num_samples"], call["temperature"], call["max_tokens"], call["stop"]) == (
        [5, 6, 7], 1, 0.3, 12, [99])  # the renderer's stop sequences by default
    assert getattr(client, "async_calls", 0) == 0


def test_message_completer_keeps_tool_calls_and_explicit_stop():
    client = SampleOnly()
    parsed = {"role": "assistant", "content": "", "tool_calls": [{"name": "f"}], "thinking": "x"}
    reply = complete(TinkerMessageCompleter(client, Renderer(parsed), max_tokens=3, stop_condition=["</s>"]),
                     [{"role": "user", "content": "hi"}])
    assert reply == {"role": "assistant", "content": "", "tool_calls": [{"name": "f"}]}
    assert client.calls[0]["stop"] == ["</s>"]


def test_message_completer_without_sampling_interface_fails_at_first_call():
    completer = TinkerMessageCompleter(SimpleNamespace(sample="not callable"), Renderer(), max_tokens=3)
    with pytest.raises(TypeError):
        complete(completer, [{"role": "user", "content": "hi"}])
