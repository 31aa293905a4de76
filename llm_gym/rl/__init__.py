"""The seed RL API (Tinker-cookbook compatible): envs, groups, rollouts and training data."""

from llm_gym.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from llm_gym.rl.data_processing import (
    Datum,
    assemble_training_data,
    compute_advantages,
    remove_constant_reward_groups,
    trajectory_to_data,
    turn_rewards,
)
from llm_gym.rl.dataset_utils import EpochCycledRLDataset, cycle_permutation, epoch_batch_index
from llm_gym.rl.interleaved import InterleavedRLDatasetBuilder
from llm_gym.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
from llm_gym.rl.tool_env import AgentToolMessageEnv, build_agent_tool_env
from llm_gym.rl.problem_env import ProblemEnv, ProblemGroupBuilder
from llm_gym.rl.rollout_limits import ParseErrorPolicy, RolloutLimits, TerminationRewardPolicy
from llm_gym.rl.rollout_presets import RolloutConfig
from llm_gym.rl.rollout_runner import SamplingTurnTimeoutError, run_rollout
from llm_gym.rl.rollout_strategy import (
    FailFast,
    MinViableGroup,
    RetryOnFailure,
    RolloutBudgetExhausted,
    RolloutResult,
    RolloutStrategy,
)
from llm_gym.rl.outcome import episode_correct
from llm_gym.rl.rollouts import (
    RolloutErrorCounter,
    do_group_rollout,
    do_group_rollout_and_filter_constant_reward,
    do_single_rollout,
    get_rollout_executor,
    set_rollout_executor,
)
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    InitialObservationOverflow,
    Logprobs,
    Logs,
    Metrics,
    Observation,
    RLDataset,
    RLDatasetBuilder,
    RolloutError,
    StepResult,
    StopReason,
    Trajectory,
    TrajectoryGroup,
    Transition,
)

__all__ = [
    "Action", "ActionExtra", "AgentToolMessageEnv", "build_agent_tool_env", "Datum", "Env", "EnvFromMessageEnv",
    "EnvGroupBuilder", "FailFast", "InitialObservationOverflow", "Logprobs", "Logs",
    "MessageEnv", "MessageStepResult", "Metrics", "MinViableGroup", "Observation", "ParseErrorPolicy", "ProblemEnv",
    "ProblemGroupBuilder", "RLDataset",
    "RLDatasetBuilder", "RetryOnFailure", "RolloutBudgetExhausted", "RolloutError",
    "RolloutConfig", "RolloutLimits", "RolloutResult", "RolloutStrategy", "SamplingTurnTimeoutError", "StepResult",
    "StopCondition", "StopReason", "TerminationRewardPolicy",
    "TokenCompleter", "TokensWithLogprobs", "Trajectory", "TrajectoryGroup", "Transition",
    "assemble_training_data", "compute_advantages", "episode_correct", "do_group_rollout",
    "do_group_rollout_and_filter_constant_reward", "do_single_rollout",
    "RolloutErrorCounter", "get_rollout_executor", "set_rollout_executor",
    "remove_constant_reward_groups", "run_rollout", "trajectory_to_data", "turn_rewards",
    "EpochCycledRLDataset", "cycle_permutation", "epoch_batch_index", "InterleavedRLDatasetBuilder",
]
