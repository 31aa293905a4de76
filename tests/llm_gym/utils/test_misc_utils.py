"""`llm_gym.utils.misc_utils.dict_mean` as tinker-cookbook 0.6.1 defines it: key-wise means over the
dicts that have a value, None values skipped, a key that is None everywhere dropped."""

from __future__ import annotations

from llm_gym.utils.misc_utils import dict_mean


def test_dict_mean_averages_each_key_over_the_dicts_that_have_a_value():
    assert dict_mean([{"a": 1, "b": 2}, {"a": 3}, {"a": None, "b": 4}]) == {"a": 2.0, "b": 3.0}


def test_a_key_that_is_none_everywhere_is_left_out():
    assert dict_mean([{"a": None, "b": 1}, {"a": None}]) == {"b": 1.0}
    assert dict_mean([]) == {}
