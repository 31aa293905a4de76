"""Renderers: prompts, stop sequences, parsing and supervised weights, for every built-in renderer
over the byte tokenizer and over a BPE tokenizer built in-process (no downloads)."""

from __future__ import annotations

import asyncio
import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from llm_gym.completers import RendererMessageCompleter
from llm_gym.renderers import (
    ChatMLRenderer,
    ChatTemplateRenderer,
    Message,
    ParseTermination,
    Renderer,
    RoleColonRenderer,
    TrainOnWhat,
    ensure_text,
    get_renderer,
    get_text_content,
)
from llm_gym.model_input import ModelInput
from llm_gym.tokenizers import ByteTokenizer

CONVERSATIONS = [
    [Message(role="user", content="What is 2 + 2?"), Message(role="assistant", content="The answer is 4.")],
    [
        Message(role="system", content="You are a helpful assistant. Answer with a number."),
        Message(role="user", content="What is 12 + 30?"),
        Message(role="assistant", content="42"),
        Message(role="user", content="again, with ünïcödé and\nnewlines"),
        Message(role="assistant", content="The answer is 42 again!\n(still)"),
    ],
    [Message(role="user", content="hello"), Message(role="assistant", content="")],
]

# (renderer name, tokenizer kind, text the weighted span decodes to, given the final content)
CASES = [
    ("chatml", "byte", lambda c: c + "<|im_end|>"),
    ("role_colon", "byte", lambda c: " " + c + "\n\nUser:"),  # the stop overlap is trained
    ("chatml", "hf", lambda c: c + "<|im_end|>"),
    ("role_colon", "hf", lambda c: " " + c + "\n\nUser:"),
    ("chat_template", "hf", lambda c: c + "<|im_end|>"),
]


@pytest.fixture
def make(request, byte_tokenizer):
    def _make(name: str, kind: str):
        tok = byte_tokenizer if kind == "byte" else request.getfixturevalue("hf_chat_tokenizer")
        return get_renderer(name, tok), tok

    return _make


def _runs(weights):
    """Contiguous [start, end) runs of weight 1."""
    runs, start = [], None
    for i, w in enumerate(list(weights) + [0.0]):
        if w == 1.0 and start is None:
            start = i
        elif w != 1.0 and start is not None:
            runs.append((start, i))
            start = None
    return runs


@pytest.mark.parametrize("name,kind,expected", CASES, ids=[f"{n}-{k}" for n, k, _ in CASES])
@pytest.mark.parametrize("convo_idx", range(len(CONVERSATIONS)))
def test_prompt_is_prefix_and_weights_cover_exactly_the_final_turn(make, name, kind, expected, convo_idx):
    renderer, tok = make(name, kind)
    messages = CONVERSATIONS[convo_idx]
    prompt = renderer.build_generation_prompt(messages[:-1]).to_ints()
    full_mi, weights = renderer.build_supervised_example(messages)
    full = full_mi.to_ints()
    assert len(weights) == len(full)
    assert set(weights) <= {0.0, 1.0}
    assert full[: len(prompt)] == prompt, "generation prompt is not a token prefix of the example"
    runs = _runs(weights)
    assert len(runs) == 1
    start, end = runs[0]
    assert start == len(prompt), "training must start right after the generation prompt"
    assert tok.decode(full[start:end], skip_special_tokens=False) == expected(messages[-1]["content"])
    # Sampling then parsing the trained span gives back the assistant message, cleanly ended.
    parsed, term = renderer.parse_response(full[start:end])
    assert parsed["content"] == messages[-1]["content"]
    assert term is ParseTermination.STOP_SEQUENCE


@pytest.mark.parametrize("name,kind,expected", CASES, ids=[f"{n}-{k}" for n, k, _ in CASES])
def test_all_assistant_messages_trains_every_assistant_turn(make, name, kind, expected):
    renderer, tok = make(name, kind)
    messages = CONVERSATIONS[1]
    full_mi, weights = renderer.build_supervised_example(messages, TrainOnWhat.ALL_ASSISTANT_MESSAGES)
    full = full_mi.to_ints()
    runs = _runs(weights)
    assistant = [m["content"] for m in messages if m["role"] == "assistant"]
    wanted = [expected(c) for c in assistant]
    if name == "role_colon":  # only the last message gets the stop overlap "User:"
        wanted = [w.removesuffix("User:") for w in wanted[:-1]] + wanted[-1:]
    assert [tok.decode(full[a:b], skip_special_tokens=False) for a, b in runs] == wanted
    # and each run starts where the generation prompt for the messages before it ends
    idx = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    for (a, _), i in zip(runs, idx):
        assert a == renderer.build_generation_prompt(messages[:i]).length


def test_chat_template_is_token_for_token_apply_chat_template(hf_chat_tokenizer):
    renderer = ChatTemplateRenderer(hf_chat_tokenizer)
    for messages in CONVERSATIONS:
        for k in range(1, len(messages) + 1):
            convo = [dict(m) for m in messages[:k]]
            gen = hf_chat_tokenizer.apply_chat_template(convo, add_generation_prompt=True, tokenize=True)
            full = hf_chat_tokenizer.apply_chat_template(convo, add_generation_prompt=False, tokenize=True)
            assert renderer.build_generation_prompt(convo).to_ints() == list(gen["input_ids"])
            assert renderer.build_supervised_example(convo)[0].to_ints() == list(full["input_ids"])
    # the BPE actually merges (so "token-for-token" is a real test, not a byte identity)
    assert len(hf_chat_tokenizer.encode("The answer is")) < len("The answer is")


def test_chat_template_kwargs_reach_the_template(hf_chat_tokenizer):
    tok = copy.deepcopy(hf_chat_tokenizer)
    tok.chat_template = "{% if shout %}LOUD{% endif %}" + tok.chat_template
    plain = ChatTemplateRenderer(tok).build_generation_prompt(CONVERSATIONS[0][:1]).to_ints()
    loud = ChatTemplateRenderer(tok, chat_template_kwargs={"shout": True})
    assert loud.build_generation_prompt(CONVERSATIONS[0][:1]).to_ints() == tok.encode("LOUD") + plain


@given(
    st.lists(
        st.tuples(st.text(max_size=40), st.text(max_size=40)), min_size=1, max_size=3
    )
)
@settings(max_examples=40, deadline=None)
def test_byte_renderers_prefix_property_on_arbitrary_text(pairs):
    tok = ByteTokenizer()
    messages: list[Message] = []
    for q, a in pairs:
        messages += [Message(role="user", content=q), Message(role="assistant", content=a)]
    for renderer in (ChatMLRenderer(tok), RoleColonRenderer(tok)):
        prompt = renderer.build_generation_prompt(messages[:-1]).to_ints()
        full, weights = renderer.build_supervised_example(messages)
        assert full.to_ints()[: len(prompt)] == prompt
        assert _runs(weights)[0][0] == len(prompt)
        assert sum(weights) == len(renderer.build_supervised_example(messages)[0].to_ints()) - len(prompt) - (
            0 if isinstance(renderer, RoleColonRenderer) else 1  # chatml: trailing "\n" untrained
        )


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), st.text(max_size=30)),
                min_size=1, max_size=4), st.one_of(st.none(), st.text(max_size=10)))
@settings(max_examples=60, deadline=None)
def test_chatml_prompts_over_the_byte_tokenizer_carry_their_exact_text(turns, prefill):
    # TextEnv reports a prompt's recorded text as info["text"] instead of decoding its ids: it
    # must be exactly that decode, also for special-token names typed as text.
    from llm_gym.renderers.base import known_prompt_text

    tok = ByteTokenizer()
    r = ChatMLRenderer(tok)
    messages = [Message(role=role, content=text) for role, text in turns]
    messages.append(Message(role="user", content="a literal <|im_end|> and ünï\n"))
    prompt = r.build_generation_prompt(messages, prefill=prefill)
    assert known_prompt_text(prompt, tok) == tok.decode(prompt.to_ints(), skip_special_tokens=False)
    assert known_prompt_text(prompt, ByteTokenizer()) is None  # recorded for that tokenizer only
    assert prompt == ModelInput.from_ints(prompt.to_ints())
    assert hash(prompt) == hash(ModelInput.from_ints(prompt.to_ints()))
    assert type(pickle.loads(pickle.dumps(prompt))) is ModelInput


def test_prompt_text_is_recorded_only_where_it_is_exact(byte_tokenizer, hf_chat_tokenizer):
    from llm_gym.renderers.base import known_prompt_text

    msgs = [Message(role="user", content="hi")]
    assert known_prompt_text(ChatMLRenderer(hf_chat_tokenizer).build_generation_prompt(msgs),
                             hf_chat_tokenizer) is None

    class OwnTurns(ChatMLRenderer):  # renders turns its own way: its prompts are decoded
        def _turn(self, message):
            header, body = super()._turn(message)
            return header, body[:-1] + self.tokenizer.encode("!") + body[-1:]

    prompt = OwnTurns(byte_tokenizer).build_generation_prompt(msgs)
    assert known_prompt_text(prompt, byte_tokenizer) is None
    assert known_prompt_text(RoleColonRenderer(byte_tokenizer).build_generation_prompt(msgs),
                             byte_tokenizer) is None


def test_prefill_and_generation_prompt_layout(byte_tokenizer):
    r = ChatMLRenderer(byte_tokenizer)
    msgs = [Message(role="user", content="hi")]
    prompt = r.build_generation_prompt(msgs)
    assert byte_tokenizer.decode(prompt.to_ints()) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    pre = r.build_generation_prompt(msgs, prefill="The")
    assert pre.to_ints() == prompt.to_ints() + byte_tokenizer.encode("The")
    rc = RoleColonRenderer(byte_tokenizer)
    assert byte_tokenizer.decode(rc.build_generation_prompt(msgs).to_ints()) == "<|bos|>User: hi\n\nAssistant:"
    assert rc.build_generation_prompt(msgs).to_ints()[0] == byte_tokenizer.bos_token_id  # the id
    # the cookbook appends prefill as is (no space added)
    assert rc.build_generation_prompt(msgs, prefill="x").to_ints() == (
        rc.build_generation_prompt(msgs).to_ints() + byte_tokenizer.encode("x"))


def test_stop_sequences(byte_tokenizer, hf_chat_tokenizer):
    assert ChatMLRenderer(byte_tokenizer).get_stop_sequences() == [260, 258]
    assert RoleColonRenderer(byte_tokenizer).get_stop_sequences() == ["\n\nUser:"]
    im_end = hf_chat_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert ChatTemplateRenderer(hf_chat_tokenizer).get_stop_sequences() == [
        im_end, hf_chat_tokenizer.eos_token_id
    ]


def test_chatml_parse_response(byte_tokenizer):
    r, t = ChatMLRenderer(byte_tokenizer), byte_tokenizer
    assert r.parse_response(t.encode("42") + [260] + t.encode("junk")) == (
        {"role": "assistant", "content": "42"}, ParseTermination.STOP_SEQUENCE)
    assert r.parse_response(t.encode("42") + [258, 260]) == (
        {"role": "assistant", "content": "42"}, ParseTermination.EOS)
    assert r.parse_response(t.encode("4") + [260, 258])[1] is ParseTermination.STOP_SEQUENCE
    # no stop: truncated, which the cookbook calls MALFORMED
    assert r.parse_response(t.encode("42")) == ({"role": "assistant", "content": "42"}, ParseTermination.MALFORMED)
    assert r.parse_response([]) == ({"role": "assistant", "content": ""}, ParseTermination.MALFORMED)
    msg, term = r.parse_response([0xFF] + t.encode("4") + [260])
    assert (msg["content"], term) == ("\ufffd4", ParseTermination.STOP_SEQUENCE)
    msg, term = r.parse_response([9999, 52, -3, 260])
    assert (msg["content"], term) == ("4", ParseTermination.MALFORMED)
    assert r.parse_response(np.array(t.encode("42") + [260]))[0]["content"] == "42"
    assert r.parse_response(tuple(t.encode("42") + [260]))[0]["content"] == "42"


@given(st.lists(st.one_of(st.integers(-2, 270), st.booleans(), st.sampled_from([260, 258, 1.0])),
                max_size=6))
@settings(max_examples=200, deadline=None)
def test_chatml_parse_response_fast_path_agrees_with_the_general_path(ids):
    # parse_response takes a shortcut for a list that ends on <|im_end|>; whatever the list, the
    # outcome is the general path's.
    r = ChatMLRenderer(ByteTokenizer())
    for tokens in (ids, ids + [260]):
        try:
            expected = r._parse_at_stop_ids(tokens, r._parse_stops, r._turn_ends)
        except TypeError as exc:
            with pytest.raises(TypeError, match=str(exc)[:20]):
                r.parse_response(tokens)
            continue
        assert r.parse_response(tokens) == expected


def test_role_colon_parse_response(byte_tokenizer):
    r, t = RoleColonRenderer(byte_tokenizer), byte_tokenizer
    S, M, E = ParseTermination.STOP_SEQUENCE, ParseTermination.MALFORMED, ParseTermination.EOS
    assert r.parse_response(t.encode(" 42\n\nUser: next")) == ({"role": "assistant", "content": "42"}, S)
    assert r.parse_response(t.encode(" 42\n\n") + [258]) == ({"role": "assistant", "content": "42"}, E)
    # whitespace inside the content is kept; only the " " prefix and "\n\n" suffix go
    assert r.parse_response(t.encode("  4 2 \n\n\n\nUser:")) == ({"role": "assistant", "content": " 4 2 "}, S)
    # a mid-response EOS is not an end: it stays in the content, and the reply never ended
    assert r.parse_response(t.encode(" 42") + [258] + t.encode("x")) == (
        {"role": "assistant", "content": "42<|eos|>x"}, M)
    assert r.parse_response(t.encode(" 4") + [259] + t.encode("2\n\nUser:"))[0]["content"] == "4<|im_start|>2"
    assert r.parse_response(t.encode(" 42"))[1] is M  # truncated
    assert r.parse_response(t.encode(" 42\n\nUser:") + [258])[1] is M  # stop, then EOS
    assert r.parse_response(t.encode(" 4\n\nUser: 2\n\nUser:"))[1] is M  # two delimiters
    assert r.parse_response([])[1] is M and r.parse_response([258]) == ({"role": "assistant", "content": ""}, E)
    assert r.parse_response([300] + t.encode(" 4\n\nUser:"))[1] is M  # out of vocabulary


def test_chat_template_parse_response(hf_chat_tokenizer):
    tok = hf_chat_tokenizer
    r = ChatTemplateRenderer(tok)
    im_end, eos = tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id
    body = tok.encode("The answer is 4.", add_special_tokens=False)
    assert r.parse_response(body + [im_end, 5]) == (
        {"role": "assistant", "content": "The answer is 4."}, ParseTermination.STOP_SEQUENCE)
    assert r.parse_response(body + [eos])[1] is ParseTermination.EOS
    assert r.parse_response(body)[1] is ParseTermination.MALFORMED
    assert r.parse_response(body + [len(tok) + 7, im_end])[1] is ParseTermination.MALFORMED


def test_chat_template_eos_that_is_the_end_of_turn_counts_as_stop_sequence(hf_chat_tokenizer):
    tok = copy.deepcopy(hf_chat_tokenizer)
    tok.eos_token = "<|im_end|>"  # as in Qwen instruct tokenizers
    r = ChatTemplateRenderer(tok)
    assert r.get_stop_sequences() == [tok.convert_tokens_to_ids("<|im_end|>")]
    assert r.parse_response(tok.encode("4") + [tok.eos_token_id])[1] is ParseTermination.STOP_SEQUENCE


def test_parse_termination_is_cookbook_compatible():
    assert [m.value for m in ParseTermination] == ["stop_sequence", "eos", "malformed"]
    assert all(bool(m) for m in ParseTermination)  # a str enum: every member is truthy
    assert not ParseTermination.MALFORMED.is_clean and not ParseTermination.MALFORMED.is_stop_sequence
    assert ParseTermination.EOS.is_clean and not ParseTermination.EOS.is_stop_sequence
    assert ParseTermination.STOP_SEQUENCE.is_stop_sequence
    assert ParseTermination.EOS == "eos" and str(ParseTermination.MALFORMED) == "malformed"


def test_get_renderer_auto_and_errors(byte_tokenizer, hf_chat_tokenizer):
    assert isinstance(get_renderer(None, byte_tokenizer), ChatMLRenderer)
    assert isinstance(get_renderer("auto", hf_chat_tokenizer), ChatTemplateRenderer)
    base = copy.deepcopy(hf_chat_tokenizer)
    base.chat_template = None
    assert isinstance(get_renderer("auto", base), RoleColonRenderer)
    with pytest.raises(ValueError, match="chat_template"):
        ChatTemplateRenderer(base)
    r = RoleColonRenderer(byte_tokenizer)
    assert get_renderer(r, byte_tokenizer) is r
    with pytest.raises(ValueError, match="unknown renderer 'chatmll'"):
        get_renderer("chatmll", byte_tokenizer)
    assert issubclass(type(get_renderer("role_colon", byte_tokenizer)), Renderer)


def test_chatml_needs_im_tokens():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    wl = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    wl.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=wl, unk_token="[UNK]")
    with pytest.raises(ValueError, match="im_start"):
        ChatMLRenderer(tok)
    assert isinstance(get_renderer(None, tok), RoleColonRenderer)


def test_message_helpers():
    assert get_text_content({"role": "user", "content": "x"}) == "x"
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert get_text_content({"role": "user", "content": parts}) == "ab"
    assert ensure_text("x") == "x" and ensure_text(parts) == "ab"
    with pytest.raises(ValueError, match="non-text"):
        ensure_text([{"type": "image", "image": "..."}])
    with pytest.raises(TypeError):
        ensure_text(3)
    with pytest.raises(TypeError):
        get_text_content({"content": 3})


@pytest.mark.parametrize(
    "messages,exc",
    [
        ("hello", TypeError),
        ([{"role": "user"}], ValueError),
        (["hello"], ValueError),
        ([{"role": "user", "content": 5}], TypeError),
        ([{"role": 1, "content": "x"}], TypeError),
    ],
)
def test_bad_messages_are_rejected(byte_tokenizer, messages, exc):
    for r in (ChatMLRenderer(byte_tokenizer), RoleColonRenderer(byte_tokenizer)):
        with pytest.raises(exc):
            r.build_generation_prompt(messages)
        with pytest.raises(exc):
            r.build_supervised_example(messages)


def test_parse_response_rejects_text(byte_tokenizer):
    with pytest.raises(TypeError, match="token ids"):
        ChatMLRenderer(byte_tokenizer).parse_response("42<|im_end|>")


def test_renderer_message_completer(byte_tokenizer, scripted_policy):
    r = ChatMLRenderer(byte_tokenizer)
    policy = scripted_policy([byte_tokenizer.encode("hi there") + [260]])
    completer = RendererMessageCompleter(policy, r, max_tokens=16)
    msgs = [Message(role="user", content="hello")]
    reply = asyncio.run(completer(msgs))
    assert reply == {"role": "assistant", "content": "hi there"}
    seen, stop, max_tokens = policy.calls[0]
    assert seen == r.build_generation_prompt(msgs).to_ints()
    assert stop == [260, 258] and max_tokens == 16


def test_renderer_message_completer_with_a_cookbook_style_completer(byte_tokenizer):
    from llm_gym.completers import TokenCompleter, TokensWithLogprobs

    class CookbookCompleter(TokenCompleter):
        async def __call__(self, model_input, stop):
            return TokensWithLogprobs(byte_tokenizer.encode("ok") + [260], None)

    completer = RendererMessageCompleter(CookbookCompleter(), ChatMLRenderer(byte_tokenizer))
    assert asyncio.run(completer([Message(role="user", content="hi")]))["content"] == "ok"


def test_train_on_what_has_the_cookbooks_seven_modes(byte_tokenizer):
    assert [m.value for m in TrainOnWhat] == [
        "last_assistant_message", "last_assistant_turn", "all_assistant_messages", "all_messages",
        "all_tokens", "all_user_and_system_messages", "customized"]
    r, t = RoleColonRenderer(byte_tokenizer), byte_tokenizer
    convo = CONVERSATIONS[1]

    def trained_text(what, messages=convo):
        full, w = r.build_supervised_example(messages, what)
        return t.decode([tok for tok, x in zip(full.to_ints(), w) if x], skip_special_tokens=False)

    assert trained_text(TrainOnWhat.LAST_ASSISTANT_TURN) == " The answer is 42 again!\n(still)\n\nUser:"
    assert trained_text(TrainOnWhat.ALL_USER_AND_SYSTEM_MESSAGES).startswith(" You are a helpful")
    assert trained_text(TrainOnWhat.ALL_TOKENS).startswith("System:")  # headers too, not the BOS
    assert trained_text(TrainOnWhat.ALL_MESSAGES) == trained_text(TrainOnWhat.ALL_TOKENS).replace(
        "System:", "").replace("User:", "", 2).replace("Assistant:", "")
    flagged = [dict(m, trainable=i == 0) for i, m in enumerate(convo)]
    assert trained_text(TrainOnWhat.CUSTOMIZED, flagged) == " " + convo[0]["content"] + "\n\n"
    with pytest.raises(ValueError, match="trainable"):
        r.build_supervised_example(flagged)
    with pytest.raises(ValueError, match="trainable"):
        r.build_supervised_example(convo, TrainOnWhat.CUSTOMIZED)
    # LAST_ASSISTANT_MESSAGE trains nothing when the conversation ends with a user message
    assert trained_text(TrainOnWhat.LAST_ASSISTANT_MESSAGE, convo[:-1]) == ""


def test_build_supervised_examples_and_extension_property(byte_tokenizer, hf_chat_tokenizer):
    convo = CONVERSATIONS[1]
    for r in (RoleColonRenderer(byte_tokenizer), ChatMLRenderer(byte_tokenizer),
              ChatTemplateRenderer(hf_chat_tokenizer)):  # a plain ChatML template keeps history
        assert r.has_extension_property
        assert r.build_supervised_examples(convo) == [
            r.build_supervised_example(convo, TrainOnWhat.LAST_ASSISTANT_TURN)]
    # a template that renders the last message differently rewrites history: no extension property
    rewrites = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                "{% if loop.last %}!{% endif %}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    ct = ChatTemplateRenderer(hf_chat_tokenizer, chat_template_kwargs={"chat_template": rewrites})
    assert not ct.has_extension_property
    examples = ct.build_supervised_examples(convo, TrainOnWhat.ALL_ASSISTANT_MESSAGES)
    assert [ex[0].length for ex in examples] == [
        ct.build_supervised_example(convo[: i + 1])[0].length for i in (2, 4)]
    with pytest.raises(NotImplementedError, match="extension property"):
        ct.build_supervised_examples(convo, TrainOnWhat.ALL_TOKENS)


def test_render_message_is_the_cookbooks_layout(byte_tokenizer):
    from llm_gym.renderers import RenderContext, RenderedMessage

    r, t = RoleColonRenderer(byte_tokenizer), byte_tokenizer
    out = r.render_message(Message(role="assistant", content="hi"), RenderContext(idx=1, is_last=True))
    assert isinstance(out, RenderedMessage)
    assert [t.decode(c.tokens) for c in (out.header, *out.output, out.stop_overlap)] == [
        "Assistant:", " hi\n\n", "User:"]
    chatml = ChatMLRenderer(byte_tokenizer)
    convo = [Message(role="user", content="x"), Message(role="assistant", content="y")]
    chunks = [chatml.render_message(m, RenderContext(i, i == 1)) for i, m in enumerate(convo)]
    flat = [tok for c in chunks for tok in [*c.header.tokens, *(x for o in c.output for x in o.tokens)]]
    # the chunks concatenate to the generation prompt's tokens (minus the open assistant header)
    assert flat + chatml._newline == chatml.build_generation_prompt(convo).to_ints()[: len(flat) + 1]
    assert t.decode(chunks[1].header.tokens, skip_special_tokens=False) == "\n<|im_start|>assistant\n"


def test_renderer_registry(byte_tokenizer):
    from llm_gym.renderers import (
        get_registered_renderer_names,
        is_renderer_registered,
        register_renderer,
        unregister_renderer,
    )

    seen = []

    def factory(tokenizer, image_processor=None):
        seen.append(image_processor)
        return RoleColonRenderer(tokenizer)

    assert not is_renderer_registered("Test/mine")
    register_renderer("Test/mine", factory)
    try:
        assert is_renderer_registered("Test/mine") and "Test/mine" in get_registered_renderer_names()
        assert isinstance(get_renderer("Test/mine", byte_tokenizer), RoleColonRenderer) and seen == [None]
    finally:
        assert unregister_renderer("Test/mine") and not unregister_renderer("Test/mine")
    with pytest.raises(ValueError, match="register_renderer"):
        get_renderer("Test/mine", byte_tokenizer)


def test_renderers_pickle(byte_tokenizer, hf_chat_tokenizer):
    import pickle

    msgs = CONVERSATIONS[1][:-1]
    for r in (ChatMLRenderer(byte_tokenizer), RoleColonRenderer(byte_tokenizer),
              RoleColonRenderer(hf_chat_tokenizer), ChatTemplateRenderer(hf_chat_tokenizer)):
        copy_ = pickle.loads(pickle.dumps(r))
        assert type(copy_) is type(r)
        assert copy_.build_generation_prompt(msgs) == r.build_generation_prompt(msgs)


def test_tool_and_part_types_are_importable():
    from llm_gym.renderers import TextPart, ThinkingPart, ToolCall, ToolSpec, UnparsedToolCall

    call = ToolCall(function=ToolCall.FunctionBody(name="f", arguments="{}"), id="c1")
    assert call.type == "function" and call.function.name == "f"
    assert UnparsedToolCall(raw_text="x", error="bad").error == "bad"
    assert TextPart(type="text", text="a")["text"] == "a"
    assert ThinkingPart(type="thinking", thinking="b")["thinking"] == "b"
    assert ToolSpec(name="f", description="d", parameters={})["name"] == "f"
