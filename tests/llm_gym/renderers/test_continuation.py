"""llm_gym.renderers.continuation: prefix-keeping multi-turn observations for every renderer.

Modes ("extended", "appended", "new_datum"), their one-hot metrics, the fallback policy, bad model
output, bounded caches, and `has_extension_property` per renderer. Tokenizers: the byte tokenizer
(chatml, role_colon) and the tiny in-process BPE with a ChatML template (`hf_chat_tokenizer`,
chat_template); real vocabularies are in test_real_tokenizers_multiturn.py.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from llm_gym import load_tokenizer
from llm_gym.model_input import ModelInput
from llm_gym.renderers import ChatMLRenderer, ChatTemplateRenderer, RoleColonRenderer
from llm_gym.renderers.continuation import (
    METRIC_KEYS,
    MODES,
    Continuation,
    ContinuationStep,
)
from tests._real_tokenizers import LLAMA3_TEMPLATE, QWEN3_THINKING_TEMPLATE

TOK = load_tokenizer()
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
PAD = TOK.convert_tokens_to_ids("<|pad|>")
GUESS = [{"role": "user", "content": "Guess my number."}]


def convo(*turns: str) -> list[dict]:
    """GUESS, then alternating assistant / user messages."""
    roles = ["assistant", "user"]
    return GUESS + [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)]


def assert_one_hot(step: ContinuationStep) -> None:
    assert step.mode in MODES
    assert step.metrics == {key: float(mode == step.mode) for mode, key in METRIC_KEYS.items()}


def template_ids(tok, messages, add_generation_prompt=True, **kwargs) -> list[int]:
    out = tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                  tokenize=True, **kwargs)
    out = out["input_ids"] if hasattr(out, "keys") else out
    return list(out)


def _byte_ids(text: str) -> list[int]:
    """`text` as byte-tokenizer ids, with `<|pad|>` / `<|eos|>` as their special ids."""
    ids: list[int] = []
    for i, piece in enumerate(text.replace("<|eos|>", "\0E\0").replace("<|pad|>", "\0P\0").split("\0")):
        if i % 2:
            ids.append(TOK.eos_token_id if piece == "E" else PAD)
        else:
            ids += TOK.encode(piece)
    return ids


# --- chatml and role_colon: the fast paths ---------------------------------------------------
def test_chatml_extends_and_equals_a_fresh_rendering_with_several_new_messages():
    r = ChatMLRenderer(TOK)
    cont = Continuation(r)
    ob = cont.first(GUESS)
    messages = GUESS + [
        {"role": "assistant", "content": "10"},
        {"role": "tool", "content": "higher"},
        {"role": "user", "content": "Again."},
    ]
    step = cont.next(ob, TOK.encode("10") + [IM_END], messages)
    assert_one_hot(step)
    assert step.mode == "extended" and step.keeps_prefix
    assert step.observation == r.build_generation_prompt(messages)
    assert cont.last_extension == (ob, step.observation)
    assert cont.last_extension[0] is ob and cont.last_extension[1] is step.observation


@pytest.mark.parametrize(
    "action, mode",
    [
        (TOK.encode("10") + [IM_END], "extended"),
        (TOK.encode("10"), "extended"),  # truncated: the turn is closed with <|im_end|>
        (TOK.encode("1") + [PAD] + TOK.encode("0") + [IM_END], "appended"),  # "1<|pad|>0" re-encodes as text
        (TOK.encode("10") + [TOK.eos_token_id], "appended"),  # EOS is not the turn end
        ([], "extended"),  # nothing sampled: the rendering of an empty reply
    ],
)
def test_chatml_modes_by_how_the_action_ended(action, mode):
    r = ChatMLRenderer(TOK)
    cont = Continuation(r)
    ob = cont.first(GUESS)
    content = r.parse_response(action)[0]["content"]
    messages = convo(content, "Higher.")
    step = cont.next(ob, action, messages)
    assert_one_hot(step)
    assert step.mode == mode
    ids = step.observation.to_ints()
    assert ids[: ob.length + len(action)] == ob.to_ints() + action
    tail = [] if action[-1:] == [IM_END] else [IM_END]
    assert ids[ob.length + len(action):] == tail + TOK.encode("\n") + ChatMLRenderer(TOK).build_generation_prompt(
        [{"role": "user", "content": "Higher."}]).to_ints()
    if mode == "extended":
        assert step.observation == r.build_generation_prompt(messages)
    else:
        assert step.observation != r.build_generation_prompt(messages)


def test_chatml_new_datum_fallback_is_the_fresh_rendering():
    r = ChatMLRenderer(TOK)
    cont = Continuation(r, fallback="new_datum")
    ob = cont.first(GUESS)
    action = TOK.encode("1") + [PAD] + TOK.encode("0") + [IM_END]
    messages = convo(r.parse_response(action)[0]["content"], "Higher.")
    step = cont.next(ob, action, messages)
    assert_one_hot(step)
    assert step.mode == "new_datum" and not step.keeps_prefix
    assert step.observation == r.build_generation_prompt(messages)
    assert cont.last_extension is None
    # a canonical action still extends
    step = cont.next(ob, TOK.encode("10") + [IM_END], convo("10", "Higher."))
    assert step.mode == "extended"


@pytest.mark.parametrize(
    "reply, mode, ending",
    [
        (" 10\n\nUser:", "extended", "Assistant: 10\n\nUser: Higher.\n\nAssistant:"),
        (" 10\n\n", "extended", "Assistant: 10\n\nUser: Higher.\n\nAssistant:"),
        (" 10", "extended", "Assistant: 10\n\nUser: Higher.\n\nAssistant:"),  # truncated
        (" 10 \n\nUser:", "extended", "Assistant: 10 \n\nUser: Higher.\n\nAssistant:"),
        (" 1<|pad|>0\n\nUser:", "appended", "Assistant: 1<|pad|>0\n\nUser: Higher.\n\nAssistant:"),
        (" 10<|eos|>", "appended", "Assistant: 10<|eos|>\n\nUser: Higher.\n\nAssistant:"),
    ],
)
def test_role_colon_modes(reply, mode, ending):
    r = RoleColonRenderer(TOK)
    cont = Continuation(r)
    ob = cont.first(GUESS)
    action = _byte_ids(reply)
    messages = convo(r.parse_response(action)[0]["content"], "Higher.")
    step = cont.next(ob, action, messages)
    assert_one_hot(step)
    assert step.mode == mode
    assert step.observation.to_ints()[: ob.length + len(action)] == ob.to_ints() + action
    assert TOK.decode(step.observation.to_ints()).endswith(ending)
    assert (step.observation == r.build_generation_prompt(messages)) == (mode == "extended")


def test_role_colon_cannot_put_a_tool_turn_after_a_sampled_user_header():
    r = RoleColonRenderer(TOK)
    cont = Continuation(r)
    ob = cont.first(GUESS)
    messages = GUESS + [{"role": "assistant", "content": "10"}, {"role": "tool", "content": "42"}]
    step = cont.next(ob, TOK.encode(" 10\n\nUser:"), messages)
    assert step.mode == "new_datum" and step.observation == r.build_generation_prompt(messages)
    step = cont.next(ob, TOK.encode(" 10\n\n"), messages)  # without the stop text it can
    assert step.mode == "extended" and step.observation == r.build_generation_prompt(messages)


def test_fast_path_tail_caches_are_bounded():
    for r in (ChatMLRenderer(TOK), RoleColonRenderer(TOK)):
        cont = Continuation(r)
        ob = cont.first(GUESS)
        for i in range(2100):
            cont.next(ob, TOK.encode("1"), convo("1", f"Feedback {i}."))
        assert 0 < len(cont._turns._tails) <= 1024


# --- chat_template: any HF template --------------------------------------------------------
@pytest.fixture(scope="module")
def chatml_template_renderer(hf_chat_tokenizer):
    return ChatTemplateRenderer(hf_chat_tokenizer)


def test_template_extends_when_the_action_is_the_templates_own_tokens(chatml_template_renderer):
    r = chatml_template_renderer
    tok = r.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    cont = Continuation(r)
    ob = cont.first(GUESS)
    assert ob.to_ints() == template_ids(tok, GUESS)
    messages = list(GUESS)
    for guess, feedback in [("10", "Higher."), ("15", "Lower.")]:
        action = tok.encode(guess, add_special_tokens=False) + [im_end]
        messages += [{"role": "assistant", "content": guess}, {"role": "user", "content": feedback}]
        step = cont.next(ob, action, messages)
        assert_one_hot(step)
        assert step.mode == "extended"
        assert step.observation.to_ints() == template_ids(tok, messages)
        assert step.observation.to_ints()[: ob.length + len(action)] == ob.to_ints() + action
        ob = step.observation
    # truncated (no <|im_end|>): still the template's rendering, which closes the turn
    messages = GUESS + [{"role": "assistant", "content": "10"}, {"role": "user", "content": "Higher."}]
    step = cont.next(cont.first(GUESS), tok.encode("10", add_special_tokens=False), messages)
    assert step.mode == "extended" and step.observation.to_ints() == template_ids(tok, messages)


def _split_tokens(tok, text: str) -> list[int]:
    """`text` one character per token: not the canonical tokenization of any merged word."""
    return [t for ch in text for t in tok.encode(ch, add_special_tokens=False)]


def test_template_appends_the_canonical_turn_after_non_canonical_tokens(chatml_template_renderer):
    r = chatml_template_renderer
    tok = r.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    cont = Continuation(r)
    ob = cont.first(GUESS)
    action = _split_tokens(tok, "hello world") + [im_end]
    assert action[:-1] != tok.encode("hello world", add_special_tokens=False)
    messages = convo("hello world", "Higher.")
    step = cont.next(ob, action, messages)
    assert_one_hot(step)
    assert step.mode == "appended"
    ids = step.observation.to_ints()
    assert ids[: ob.length + len(action)] == ob.to_ints() + action
    assert tok.decode(ids[ob.length + len(action):]) == "\n<|im_start|>user\nHigher.<|im_end|>\n<|im_start|>assistant\n"
    # the next turn, canonical again, is "extended": this turn's tokens are the template's own,
    # though the history (the split tokens above) is not
    messages2 = messages + [{"role": "assistant", "content": "7"}, {"role": "user", "content": "Lower."}]
    action2 = tok.encode("7", add_special_tokens=False) + [im_end]
    step2 = cont.next(step.observation, action2, messages2)
    assert step2.mode == "extended"
    assert step2.observation.to_ints()[: len(ids) + len(action2)] == ids + action2
    assert step2.observation.to_ints() != template_ids(tok, messages2)
    fresh = template_ids(tok, messages2)
    assert step2.observation.to_ints()[len(ids) + len(action2):] == fresh[len(fresh) - (
        step2.observation.length - len(ids) - len(action2)):]
    # with fallback="new_datum" the disagreement gives the fresh rendering
    step3 = Continuation(r, fallback="new_datum").next(ob, action, messages)
    assert step3.mode == "new_datum" and step3.observation.to_ints() == template_ids(tok, messages)


@pytest.mark.parametrize("fallback", ["append", "new_datum"])
def test_a_template_that_strips_thinking_falls_back(hf_chat_tokenizer, fallback):
    tok = hf_chat_tokenizer
    kwargs = {"chat_template": QWEN3_THINKING_TEMPLATE}
    r = ChatTemplateRenderer(tok, chat_template_kwargs=kwargs)
    assert not r.has_extension_property
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    cont = Continuation(r, fallback=fallback)
    ob = cont.first(GUESS)
    assert ob.to_ints() == template_ids(tok, GUESS, **kwargs)
    reply = "<think>\nbisect\n</think>\n\n10"
    action = tok.encode(reply, add_special_tokens=False) + [im_end]
    messages = convo(reply, "Higher.")
    fresh = template_ids(tok, messages, **kwargs)
    assert "bisect" not in tok.decode(fresh)  # the template dropped the reasoning
    step = cont.next(ob, action, messages)
    assert_one_hot(step)
    if fallback == "append":
        assert step.mode == "appended"
        ids = step.observation.to_ints()
        assert ids[: ob.length + len(action)] == ob.to_ints() + action
        assert tok.decode(ids[ob.length + len(action):]) == (
            "\n<|im_start|>user\nHigher.<|im_end|>\n<|im_start|>assistant\n")
    else:
        assert step.mode == "new_datum" and step.observation.to_ints() == fresh


def test_template_fallback_gives_up_when_the_turn_end_cannot_be_located(hf_chat_tokenizer):
    # the assistant's text spells out <|im_end|>, which the template re-tokenizes as a stop id
    r = ChatTemplateRenderer(hf_chat_tokenizer, chat_template_kwargs={"chat_template": QWEN3_THINKING_TEMPLATE})
    tok = r.tokenizer
    cont = Continuation(r)
    ob = cont.first(GUESS)
    reply = "<think>\nx<|im_end|>\n</think>\n\n10"
    action = _split_tokens(tok, reply) + [tok.convert_tokens_to_ids("<|im_end|>")]
    messages = convo(reply, "Higher.")
    step = cont.next(ob, action, messages)
    assert step.mode == "new_datum"
    assert step.observation.to_ints() == template_ids(tok, messages, chat_template=QWEN3_THINKING_TEMPLATE)


def test_extension_property_per_renderer(hf_chat_tokenizer):
    assert ChatMLRenderer(TOK).has_extension_property
    assert RoleColonRenderer(TOK).has_extension_property
    assert ChatTemplateRenderer(hf_chat_tokenizer).has_extension_property  # plain ChatML
    kw = {"chat_template": QWEN3_THINKING_TEMPLATE}
    assert not ChatTemplateRenderer(hf_chat_tokenizer, chat_template_kwargs=kw).has_extension_property
    # Llama-3 layout (its eot id taken from the vocabulary's <|im_end|> stand-in)
    llama = LLAMA3_TEMPLATE.replace("<|start_header_id|>", "<|im_start|>").replace(
        "<|end_header_id|>", "").replace("<|eot_id|>", "<|im_end|>").replace("bos_token + ", "")
    r = ChatTemplateRenderer(hf_chat_tokenizer, chat_template_kwargs={"chat_template": llama})
    assert r.has_extension_property
    # a template that renders the last assistant turn differently once a user turn follows
    moving = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
              "{% if loop.last %}!{% endif %}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    r = ChatTemplateRenderer(hf_chat_tokenizer, chat_template_kwargs={"chat_template": moving})
    assert not r.has_extension_property


def test_custom_renderers_take_the_generic_path(hf_chat_tokenizer):
    class Shouty(ChatMLRenderer):  # renders content upper-case: the sampled "hi" is not canonical
        def build_generation_prompt(self, messages, role="assistant", prefill=None):
            loud = [dict(m, content=str(m["content"]).upper()) for m in messages]
            return super().build_generation_prompt(loud, role, prefill)

        def build_supervised_example(self, messages, train_on_what="last_assistant_message"):
            loud = [dict(m, content=str(m["content"]).upper()) for m in messages]
            return super().build_supervised_example(loud, train_on_what)

    r = Shouty(TOK)
    cont = Continuation(r)
    ob = cont.first(GUESS)
    step = cont.next(ob, TOK.encode("hi") + [IM_END], convo("hi", "Higher."))
    assert step.mode == "appended"
    assert TOK.decode(step.observation.to_ints()).endswith(
        "GUESS MY NUMBER.<|im_end|>\n<|im_start|>assistant\nhi<|im_end|>\n"
        "<|im_start|>user\nHIGHER.<|im_end|>\n<|im_start|>assistant\n")
    step = cont.next(ob, TOK.encode("HI") + [IM_END], convo("HI", "Higher."))
    assert step.mode == "extended"

    class TextStops(RoleColonRenderer):  # a custom role-colon: text stops, no stop ids to count
        def render_message(self, message, ctx):
            return super().render_message(message, ctx)

    r = TextStops(TOK)
    cont = Continuation(r)
    ob = cont.first(GUESS)
    assert cont.next(ob, TOK.encode(" 10\n\nUser:"), convo("10", "Higher.")).mode == "extended"
    assert cont.next(ob, TOK.encode(" 10"), convo("10", "Higher.")).mode == "extended"  # truncated
    messages = convo("1<|pad|>0", "Higher.")
    step = cont.next(ob, _byte_ids(" 1<|pad|>0\n\nUser:"), messages)
    assert step.mode == "new_datum" and step.observation == r.build_generation_prompt(messages)


# --- bad model output, bad calls -----------------------------------------------------------
def _garbage_actions(vocab_size: int, stops: list[int]) -> list:
    rng = random.Random(0)
    actions = [[], [0], [vocab_size], [vocab_size + 10**6], [-1], [2**70], [0xFF, 0xFE, 0xC3],
               np.array([1, 2, 3], dtype=np.int64), tuple(stops), stops * 3, [True, 5]]
    for _ in range(60):
        n = rng.randrange(0, 40)
        ids = [rng.randrange(0, vocab_size) for _ in range(n)]
        if rng.random() < 0.3:
            ids.append(rng.choice(stops))
        if rng.random() < 0.1:
            ids.insert(rng.randrange(len(ids) + 1), vocab_size + rng.randrange(5))
        actions.append(ids)
    return actions


def test_bad_model_output_never_crashes_and_observations_stay_in_the_vocabulary(hf_chat_tokenizer):
    renderers = [ChatMLRenderer(TOK), RoleColonRenderer(TOK), ChatTemplateRenderer(hf_chat_tokenizer),
                 ChatTemplateRenderer(hf_chat_tokenizer,
                                      chat_template_kwargs={"chat_template": QWEN3_THINKING_TEMPLATE})]
    for r in renderers:
        vocab = r._vocab_size
        stops = [s for s in r.get_stop_sequences() if isinstance(s, int)] or [0]
        cont = Continuation(r)
        ob = cont.first(GUESS)
        seen = set()
        for action in _garbage_actions(vocab, stops):
            content = r.parse_response(action)[0]["content"]
            step = cont.next(ob, action, convo(content, "Higher."))
            assert_one_hot(step)
            seen.add(step.mode)
            ids = step.observation.to_ints()
            assert ids and max(ids) < vocab
            if step.keeps_prefix:
                sampled = [int(t) for t in action]
                assert ids[: ob.length + len(sampled)] == ob.to_ints() + sampled
            else:
                assert step.observation == r.build_generation_prompt(convo(content, "Higher."))
        assert "new_datum" in seen and ("appended" in seen or "extended" in seen), type(r).__name__


def test_bad_calls_are_clear_errors():
    r = ChatMLRenderer(TOK)
    cont = Continuation(r)
    ob = cont.first(GUESS)
    with pytest.raises(ValueError, match="assistant message parsed from the action"):
        cont.next(ob, [1], GUESS + [{"role": "user", "content": "more"}])  # no assistant message
    with pytest.raises(ValueError, match="at least one new"):
        cont.next(ob, [1], convo("1"))  # nothing after the assistant message
    with pytest.raises(ValueError, match="fallback"):
        Continuation(r, fallback="drop")
    with pytest.raises(TypeError, match="Renderer"):
        Continuation(TOK)
    with pytest.raises(ValueError, match="role"):
        cont.next(ob, [1], [{"content": "x"}, {"role": "user", "content": "y"}])


def test_one_continuation_serves_interleaved_episodes_deterministically(chatml_template_renderer):
    for r in (ChatMLRenderer(TOK), chatml_template_renderer):
        tok = r.tokenizer
        shared = Continuation(r)
        end = r.get_stop_sequences()[0]
        episodes = []
        for seed in range(3):
            rng = random.Random(seed)
            replies = [str(rng.randrange(100)) for _ in range(3)]
            episodes.append(replies)

        def run(cont, replies):
            ob, messages, modes = cont.first(GUESS), list(GUESS), []
            for reply in replies:
                messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "Next."}]
                step = cont.next(ob, tok.encode(reply, add_special_tokens=False) + [end], messages)
                ob = step.observation
                modes.append(step.mode)
            return ob, modes

        alone = [run(Continuation(r), replies) for replies in episodes]
        together = [run(shared, replies) for replies in episodes]
        assert alone == together
        assert all(mode == "extended" for _, modes in alone for mode in modes)


def test_observations_are_model_inputs_with_validated_ids(chatml_template_renderer):
    for r in (ChatMLRenderer(TOK), RoleColonRenderer(TOK), chatml_template_renderer):
        cont = Continuation(r)
        ob = cont.first(GUESS)
        step = cont.next(ob, [1, 2, 3], convo(r.parse_response([1, 2, 3])[0]["content"], "Hi."))
        assert isinstance(step.observation, ModelInput)
        assert all(type(t) is int for t in step.observation.tokens)
