"""`TextActions`: drive a token env with strings (text observations, text actions).

For users who want to talk to an environment in text -- scripted agents, API-model baselines,
debugging in a REPL -- without touching token ids. The wrapped env stays the same episode
underneath, so rewards are exactly what a token policy would get for the same tokens.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from llm_gym.spaces import FreeText
from llm_gym.tokenizers import vocab_size_of

__all__ = ["TextActions"]


class TextActions(gym.Wrapper[str, str, np.ndarray, np.ndarray]):
    """String-in, string-out view of a token env (e.g. `gym.make("llm/Math-v0")`).

    Args:
        env: a Gymnasium env with token-id observations and actions.
        tokenizer: encodes actions and decodes observations; defaults to `env.unwrapped.tokenizer`.
        append_stop: end each action the way a sampler would: with the renderer's first stop
            token when its stops are token ids, with the tokens of its first stop string when they
            are text, else with the tokenizer's EOS id (when it has one).
            Set False to send exactly the encoded text.

    Observations are the decoded token observations (special tokens kept, so the chat structure
    stays visible); `info["observation_tokens"]` keeps the ids. Actions are strings, encoded
    without special tokens. Both spaces are `llm_gym.spaces.FreeText`.
    """

    # gymnasium annotates `Wrapper.env` with the wrapper's own (here: text) types; it is the token env.
    env: gym.Env[np.ndarray, np.ndarray]

    def __init__(self, env: gym.Env, tokenizer: Any = None, append_stop: bool = True) -> None:
        super().__init__(env)
        if isinstance(env.observation_space, gym.spaces.Text) or isinstance(env.action_space, gym.spaces.Text):
            raise TypeError(
                f"TextActions turns a token env into a text one, but {type(env.unwrapped).__name__} "
                "already has Text spaces; to train it, make it a token env: "
                "llm_gym.wrappers.FromText(env)"
            )
        self.tokenizer: Any = tokenizer if tokenizer is not None else getattr(env.unwrapped, "tokenizer", None)
        if self.tokenizer is None:
            raise ValueError(
                f"TextActions needs a tokenizer: {type(env.unwrapped).__name__} has no `tokenizer` "
                "attribute, so pass TextActions(env, tokenizer=...)"
            )
        self._vocab_size = vocab_size_of(self.tokenizer)
        self._suffix = self._stop_suffix() if append_stop else []
        self.observation_space = FreeText()
        self.action_space = FreeText()

    def _stop_suffix(self) -> list[int]:
        renderer = getattr(self.env.unwrapped, "renderer", None)
        stops = renderer.get_stop_sequences() if renderer is not None else []
        if stops and isinstance(stops[0], (int, np.integer)):
            return [int(stops[0])]
        if stops and isinstance(stops[0], str):
            # A text stop (role_colon's "\n\nUser:") is sent as its tokens: ending with EOS
            # instead would lose the format credit under the cookbook's strict ProblemEnv.
            return list(self.tokenizer.encode(stops[0], add_special_tokens=False))
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return [int(eos)] if isinstance(eos, (int, np.integer)) else []

    def encode_action(self, action: str) -> np.ndarray:
        """The token ids `step(action)` sends (including the stop suffix)."""
        if not isinstance(action, str):
            raise TypeError(f"TextActions actions are str, got {type(action).__name__}")
        ids = list(self.tokenizer.encode(action, add_special_tokens=False)) + self._suffix
        return np.asarray(ids, dtype=np.int64)

    def _decode(self, obs: Any) -> str:
        arr = np.asarray(obs, dtype=np.int64)
        arr = arr[(arr >= 0) & (arr < self._vocab_size)]
        return self.tokenizer.decode(arr.tolist(), skip_special_tokens=False)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        info = dict(info)
        info["observation_tokens"] = obs
        return self._decode(obs), info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(self.encode_action(action))
        info = dict(info)
        info["observation_tokens"] = obs
        return self._decode(obs), reward, terminated, truncated, info
