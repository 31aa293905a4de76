"""Gymnasium wrappers for llm-gym envs.

- `TextActions`: string observations and actions over a token env.
- `rl_dataset` / `SourceRLDataset` / `SourceEnvGroupBuilder`: a registered llm-gym id straight from
  its `EnvSource` as seed-API groups and datasets, the same episodes as through `gym.make` without
  the Gymnasium round trip (what the trainer consumes).
- `Curriculum` / `CurriculumRLDataset` / `CurriculumTracker` / `CurriculumEnvGroupBuilder` / `int_ladder`:
  difficulty knobs stepped up and down a ladder by the running solve rate, as a dataset of groups
  the trainer consumes.
- `GymEnvGroupBuilder` / `GymRLDataset`: any token-space Gymnasium env as seed-API groups and
  datasets (`rl_dataset` uses them for ids that are not llm-gym sources).
- `GroupAdvantages`: a vector-env wrapper that resets groups of G sub-envs on the same task and
  reports GRPO group-centred advantages in `info["group_advantage"]`.
- `FromText` / `StringEnvSource`: any string-in/string-out env (Gymnasium `Text` spaces, GEM,
  TextArena, SkyRL-gym, or a duck-typed `reset`/`step` object) as a token env.
- `PaddedTokens`: a fixed-shape `Dict`/`MultiDiscrete` view of a token env for Stable-Baselines3,
  torchrl and Tianshou.
- `ToolActionsEnv` / `ToolActionsSource` / `register_tool_actions`: any multi-turn env played through
  one `act(message)` tool, as TRL's `environment_factory` path plays it.
"""

from llm_gym.wrappers.curriculum import (
    Curriculum,
    CurriculumEnvGroupBuilder,
    CurriculumRLDataset,
    CurriculumTracker,
    int_ladder,
)
from llm_gym.wrappers.from_text import FromText, StringEnvSource
from llm_gym.wrappers.grouping import GymEnvAdapter, GymEnvGroupBuilder, GymRLDataset
from llm_gym.wrappers.padded import PaddedTokens
from llm_gym.wrappers.source import SourceEnvGroupBuilder, SourceRLDataset, rl_dataset
from llm_gym.wrappers.text import TextActions
from llm_gym.wrappers.tool_actions import ToolActionsEnv, ToolActionsSource, register_tool_actions
from llm_gym.wrappers.vector import GroupAdvantages

__all__ = ["Curriculum", "CurriculumEnvGroupBuilder", "CurriculumRLDataset", "CurriculumTracker", "FromText",
           "GroupAdvantages", "GymEnvAdapter", "GymEnvGroupBuilder", "GymRLDataset", "PaddedTokens",
           "SourceEnvGroupBuilder", "SourceRLDataset", "StringEnvSource", "TextActions", "ToolActionsEnv",
           "ToolActionsSource", "int_ladder", "register_tool_actions", "rl_dataset"]
