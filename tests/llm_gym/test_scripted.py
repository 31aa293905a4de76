"""llm_gym.scripted: replies encoded as a sampler returns them, cases run through the seed API."""

from __future__ import annotations

import json

import pytest

from envs_catalog.math.arithmetic import MathSource
from envs_catalog.tools.calculator import CalculatorSource
from llm_gym import get_renderer, load_tokenizer
from llm_gym.renderers import ToolCall
from llm_gym.renderers.tools import format_assistant_text
from llm_gym.scripted import ScriptedCase, reply_tokens, run_scripted_case

TOK = load_tokenizer()


def test_reply_tokens_end_where_a_sampler_stops():
    chatml, role_colon = get_renderer("chatml", TOK), get_renderer("role_colon", TOK)
    assert TOK.decode(reply_tokens(chatml, "42")) == "42<|im_end|>"
    assert TOK.decode(reply_tokens(role_colon, "42")) == " 42\n\nUser:"
    call = format_assistant_text({"role": "assistant", "content": "", "tool_calls": [
        ToolCall(function=ToolCall.FunctionBody(name="calculator", arguments=json.dumps({"expression": "1+1"})))]})
    text = TOK.decode(reply_tokens(role_colon, call, ["\n\nUser:", "</tool_call>"]))
    assert text.endswith("</tool_call>") and "User:" not in text


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
def test_a_tool_episode_keeps_the_prefix_property_under_scripted_replies(renderer_name):
    source = CalculatorSource(renderer=get_renderer(renderer_name, TOK))
    seen: list[str] = []

    def reply(env, ob: str) -> str:
        seen.append(ob)
        if len(seen) == 1:
            return format_assistant_text({"role": "assistant", "content": "", "tool_calls": [
                ToolCall(function=ToolCall.FunctionBody(name="calculator",
                                                        arguments=json.dumps({"expression": "2*3"})))]})
        return str(env.answer)

    outcome = run_scripted_case(source, ScriptedCase("call then answer", "gold", reply, -1, 1), 0)
    assert outcome.turns == 2 and len(seen) == 2
    first_prompt_and_reply = seen[0] + TOK.decode(reply_tokens(source.renderer, outcome.replies[0],
                                                               ["\n\nUser:", "</tool_call>"]
                                                               if renderer_name == "role_colon" else None))
    assert seen[1].startswith(first_prompt_and_reply)


def test_a_case_outside_its_range_is_reported_not_raised():
    source = MathSource(renderer=get_renderer("chatml", TOK))
    wrong = ScriptedCase("claims gold", "gold", lambda env, ob: str(env.answer + 1), 1.0, 1.0)
    outcome = run_scripted_case(source, wrong, 0)
    assert not outcome.ok and outcome.episode_return == 0.0


def test_bad_cases_are_refused():
    with pytest.raises(ValueError, match="kind"):
        ScriptedCase("x", "golden", lambda e, o: "", 0, 1)
    with pytest.raises(ValueError, match="low"):
        ScriptedCase("x", "gold", lambda e, o: "", 1, 0)
