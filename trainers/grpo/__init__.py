"""GRPO for `llm_gym` environments: config, losses, the training loop, checkpoints and logging.

`train(GRPOConfig(...))` runs an SFT warm start (optional) then GRPO on any registered env id (or
any `RLDataset` passed in) and returns the run summary. The torch-heavy modules are imported only
when their names are first used, so `import trainers.grpo` is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainers.grpo.config import ConfigError, GRPOConfig

if TYPE_CHECKING:  # what the lazy names below are, for type checkers (no import at run time)
    from trainers.grpo.losses import LOSSES, policy_loss
    from trainers.grpo.trainer import train

__all__ = ["ConfigError", "GRPOConfig", "LOSSES", "train", "policy_loss"]


def __getattr__(name: str) -> Any:
    if name == "train":
        from trainers.grpo.trainer import train

        return train
    if name in ("LOSSES", "policy_loss"):
        from trainers.grpo import losses

        return getattr(losses, name)
    raise AttributeError(name)
