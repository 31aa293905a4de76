"""The Tinker cookbook's exception hierarchy (`tinker_cookbook.exceptions`), same names and bases.

Environment and dataset code raises these (`ConfigurationError` for a bad builder argument,
`DataError` for bad data) and callers catch them by name, so they exist here for code whose imports
were switched to `llm_gym`. Each also derives from the builtin the cookbook chose (`ValueError`,
`RuntimeError`, ...), so `except ValueError` keeps working.
"""

from __future__ import annotations


class TinkerCookbookError(Exception):
    """Base of every error below (the cookbook's name, kept so `except` clauses port unchanged)."""



class ConfigurationError(TinkerCookbookError, ValueError):
    """A configuration value (model or renderer name, hyperparameter, required field) is invalid."""


class DataError(TinkerCookbookError, ValueError):
    """Training or evaluation data is wrong."""


class DataFormatError(DataError):
    """Data is structurally malformed (e.g. a JSONL line without `messages`)."""


class DataValidationError(DataError):
    """Data is well formed but violates a logical constraint."""


class RendererError(TinkerCookbookError, ValueError):
    """A renderer cannot be found, or messages cannot be rendered or parsed."""


class TrainingError(TinkerCookbookError, RuntimeError):
    """An error inside a training loop."""


class CheckpointError(TrainingError):
    """Saving or loading a checkpoint failed."""


class AllTrajectoriesFailedError(TrainingError):
    """Every rollout of a batch failed, so there is nothing to train on."""


class WeightsError(TinkerCookbookError):
    """Base of weight download / merge / adapter errors."""


class WeightsDownloadError(WeightsError, RuntimeError):
    """Downloading weights failed."""


class WeightsMergeError(WeightsError, ValueError):
    """Merging adapter weights into a base model failed."""


class WeightsAdapterError(WeightsError, ValueError):
    """An adapter's weights are incompatible with the requested operation."""


class SandboxError(TinkerCookbookError, RuntimeError):
    """A code sandbox failed to start or run."""


class EvalError(TinkerCookbookError, RuntimeError):
    """An evaluation failed."""


class EvalTimeoutError(EvalError, TimeoutError):
    """An evaluation ran past its time limit."""


class EvalGradingError(EvalError):
    """Grading an evaluation sample failed."""


class BenchmarkNotFoundError(EvalError, KeyError):
    """No benchmark is registered under the requested name."""


__all__ = [
    "AllTrajectoriesFailedError",
    "BenchmarkNotFoundError",
    "CheckpointError",
    "ConfigurationError",
    "DataError",
    "DataFormatError",
    "DataValidationError",
    "EvalError",
    "EvalGradingError",
    "EvalTimeoutError",
    "RendererError",
    "SandboxError",
    "TinkerCookbookError",
    "TrainingError",
    "WeightsAdapterError",
    "WeightsDownloadError",
    "WeightsError",
    "WeightsMergeError",
]
