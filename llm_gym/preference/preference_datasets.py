"""The base of labelled-comparison datasets (the cookbook's `preference.preference_datasets`).

A `ComparisonDatasetBuilder` loads raw train/test rows (`get_train_and_test_datasets`, typically
HuggingFace `datasets.Dataset`s) and turns each row into a `LabeledComparison`, or None to skip it
(`example_to_labeled_comparison`). The preference-reward RL dataset reads prompts from it; a
reward-model dataset reads the labels. The cookbook's class is a `chz` config with one field,
`swap`. llm_gym does not depend on chz: where chz is installed the class is a chz class too (so a
ported `@chz.chz` subclass keeps `swap` as a field), otherwise a plain class whose constructor
takes `swap=`.
"""

from __future__ import annotations

from typing import Any

from llm_gym.preference.types import LabeledComparison

try:  # optional: only to stay a chz class where the cookbook's users have chz
    import chz as _chz  # pyright: ignore[reportMissingImports]  (the cookbook's, not in .venv)
except ImportError:
    _chz = None

__all__ = ["ComparisonDatasetBuilder"]


class ComparisonDatasetBuilder:
    """Subclass and implement `get_train_and_test_datasets` and `example_to_labeled_comparison`.

    `swap`: whether consumers should also use each comparison with A and B exchanged (data
    augmentation)."""

    swap: bool = False

    if _chz is None:

        def __init__(self, *, swap: bool = False) -> None:
            self.swap = swap

    def get_train_and_test_datasets(self) -> tuple[Any, Any | None]:
        """(train rows, optional test rows): sized and indexable, e.g. `datasets.Dataset`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement get_train_and_test_datasets() -> (train, test or None)"
        )

    def example_to_labeled_comparison(self, example: dict) -> LabeledComparison | None:
        """The comparison in one row, or None to skip the row."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement example_to_labeled_comparison(example)"
        )

    def get_labeled_comparisons(self) -> tuple[list[LabeledComparison], list[LabeledComparison] | None]:
        """Every row of both splits turned into comparisons, skipped rows left out."""
        train, test = self.get_train_and_test_datasets()

        def convert(rows: Any) -> list[LabeledComparison]:
            out = [self.example_to_labeled_comparison(rows[i]) for i in range(len(rows))]
            return [lc for lc in out if lc is not None]

        return convert(train), None if test is None else convert(test)


if _chz is not None:
    ComparisonDatasetBuilder = _chz.chz(ComparisonDatasetBuilder)
