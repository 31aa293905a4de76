"""Play an environment yourself: you type the policy's actions (the cookbook's `rl.play_w_env`).

`play_env(env, tokenizer)` runs one episode of a token-level `Env` with `ManualPolicy` as the
policy: each turn it prints the decoded observation and reads your action from stdin (several
lines, ended by two blank lines, unless `multiline=False`), encodes it with the tokenizer and
hands it to the env, then prints the episode's rewards. Useful to check an environment's prompts,
parsing and rewards by hand before training on it.
"""

from __future__ import annotations

import asyncio
import sys

from llm_gym.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl.rollouts import do_single_rollout
from llm_gym.rl.types import Env, Trajectory
from llm_gym.tokenizer_utils import Tokenizer, encode_without_special_tokens

_COLORS = {"green": 32, "yellow": 33, "blue": 34, "cyan": 36}


def _colored(text: str, color: str) -> str:
    """ANSI-coloured text on a terminal, plain text otherwise (pipes, logs)."""
    if not sys.stdout.isatty():
        return text
    return f"\033[{_COLORS[color]}m{text}\033[0m"


async def get_async_input(prompt: str, multiline: bool = False) -> str:
    """One line from stdin (or, with `multiline`, lines until two blank ones), read in a thread
    so the event loop keeps running."""
    loop = asyncio.get_running_loop()
    if not multiline:
        return await loop.run_in_executor(None, input, prompt)
    print(prompt + " (enter two blank lines when done)")
    lines: list[str] = []
    while True:
        line = await loop.run_in_executor(None, input, "")
        if line == "" and lines and lines[-1] == "":
            lines.pop()
            return "\n".join(lines)
        lines.append(line)


class ManualPolicy(TokenCompleter):
    """A `TokenCompleter` whose completions a person types: it shows the observation (decoded)
    and returns the typed text's tokens, without logprobs. `max_tokens` is not enforced: a
    person's answer is taken as typed."""

    def __init__(self, tokenizer: Tokenizer, multiline: bool = True, show_observation: bool = True):
        self.tokenizer = tokenizer
        self.step_count = 0
        self.multiline = multiline
        self.show_observation = show_observation

    async def __call__(
        self, model_input: ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        if self.show_observation:
            print(_colored(f"\n--- Step {self.step_count} ---", "green"))
            print(_colored("Observation:", "blue"))
            print(self.tokenizer.decode(model_input.to_ints()))
            print(_colored("-" * 60, "green"))
        prompt = "Your action:" if self.multiline else "Your action: "
        action = await get_async_input(_colored(prompt, "yellow"), multiline=self.multiline)
        self.step_count += 1
        return TokensWithLogprobs(tokens=encode_without_special_tokens(self.tokenizer, action), maybe_logprobs=None)


def print_trajectory_summary(trajectory: Trajectory) -> None:
    """Print the number of steps, the total reward and each non-zero step reward."""
    print(_colored("\n=== Game Summary ===", "cyan"))
    print(f"Total steps: {len(trajectory.transitions)}")
    print(f"Total reward: {sum(t.reward for t in trajectory.transitions)}")
    rewarded = [(i, t.reward) for i, t in enumerate(trajectory.transitions) if t.reward != 0]
    if rewarded:
        print("\nReward per step:")
        for i, reward in rewarded:
            print(f"  Step {i}: reward = {reward}")
    print(_colored("===================", "cyan"))


async def play_env(
    env: Env, tokenizer: Tokenizer, multiline: bool = True, show_observation: bool = True
) -> Trajectory:
    """Play one episode of `env` interactively, typing the actions; returns its trajectory."""
    print(_colored("Starting interactive environment session...", "cyan"))
    print("Type your actions when prompted. The episode ends when the environment says it is done.")
    policy = ManualPolicy(tokenizer, multiline=multiline, show_observation=show_observation)
    trajectory = await do_single_rollout(policy, env)
    print_trajectory_summary(trajectory)
    return trajectory


__all__ = ["ManualPolicy", "get_async_input", "play_env", "print_trajectory_summary"]
