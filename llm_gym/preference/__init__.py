"""Preference learning's types and dataset base (the cookbook's `tinker_cookbook.preference`).

`types` holds the pairwise `Comparison`, its human-labelled `LabeledComparison` and the
`PreferenceModel` interface a preference-reward env (`rl/preference_envs` in the cookbook) scores
completions with; `preference_datasets.ComparisonDatasetBuilder` is the base a dataset of labelled
comparisons subclasses. Both are light (no torch, no datasets import).
"""

from llm_gym.preference.preference_datasets import ComparisonDatasetBuilder
from llm_gym.preference.types import Comparison, LabeledComparison, PreferenceModel

__all__ = ["Comparison", "ComparisonDatasetBuilder", "LabeledComparison", "PreferenceModel"]
