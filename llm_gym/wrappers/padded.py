"""`PaddedTokens`: a fixed-shape view of a token env, for classic RL libraries.

Stable-Baselines3, Tianshou, torchrl and PufferLib build their networks and replay buffers from
fixed-shape spaces (`Box`, `MultiDiscrete`, `Dict` of those) and cannot read the variable-length
`llm_gym.spaces.TokenSequence` of `gym.make("llm/Math-v0")`. This wrapper pads each observation to
`max_obs_len` token slots plus a `length` field (truncating longer ones by a documented rule and
reporting it in `info`), and reads each action from `max_action_len` token slots that end at the
first pad id (or, by default, right after the first stop token, as a sampler would stop). The
episode underneath is unchanged, so rewards are exactly those a token policy would get for the
same tokens; it composes with `gymnasium.vector` (`gym.make_vec(..., wrappers=[...])`) and with
`gymnasium.wrappers.FlattenObservation` for libraries that want one flat vector.
"""

from __future__ import annotations

from typing import Any, Literal, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["PaddedTokens"]

TruncationSide = Literal["left", "right"]
TokenSpaceKind = Literal["multidiscrete", "box"]


class PaddedTokens(
    gym.Wrapper[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray],
    gym.utils.RecordConstructorArgs,
):
    """Fixed-shape observations and actions over a token-sequence env.

    Args:
        env: a Gymnasium env whose observation and action spaces are token sequences
            (`llm_gym.spaces.TokenSequence`, or any `Sequence(Discrete(V))`), e.g.
            `gym.make("llm/Math-v0")`.
        max_obs_len: token slots in an observation. Longer observations are truncated (below).
        max_action_len: token slots in an action: the most tokens one step can send.
        pad_id: the id that fills unused slots and ends an action. Default: the vocabulary size
            `V`, an id outside the vocabulary, so padding is never mistaken for a real token and
            slots take `V + 1` values. A real id in `0..V-1` (a tokenizer's pad token) keeps `V`
            values, but then the policy cannot send that token.
        truncation_side: which end of an observation longer than `max_obs_len` is dropped.
            `"left"` (default) drops the oldest tokens and keeps the most recent ones -- the end of
            the prompt, where the latest turn and the assistant header the policy answers sit
            (HF tokenizers' `truncation_side="left"`, as used for generation). `"right"` keeps the
            first `max_obs_len` tokens.
        stop_at_stop_tokens: cut an action right after its first stop token (the integer ids in
            the env's `info["stop_condition"]`), as a sampler stops there; the slots after it are
            ignored. `False` sends every slot up to the first pad.
        token_space: the space of the observation's token slots. `"multidiscrete"` (default):
            each slot a categorical over `0..n-1`, which SB3 one-hot-encodes (fine for small
            vocabularies). `"box"`: an int64 `Box` in `[0, n-1]`, which SB3 reads as raw numbers
            (the cheap choice for large vocabularies and custom embedding feature extractors).
            Actions are `MultiDiscrete` either way (SB3 has no integer `Box` actions).

    Observation: `{"tokens": int64 (max_obs_len,), "length": int64 (1,)}` -- the first `length`
    slots are the observation's tokens (after truncation), the rest are `pad_id`. A finished
    episode's last observation (empty) is all padding with length 0. `unpad_observation(obs)`
    returns the tokens.

    Action: `MultiDiscrete([n] * max_action_len)`, `n = max(V, pad_id + 1)`. The tokens sent are
    the slots before the first `pad_id`, cut after the first stop token when
    `stop_at_stop_tokens`; an all-pad action sends the empty response. The env scores whatever is
    sent: an empty, unfinished (no stop token) or out-of-vocabulary action gets the env's defined
    reward and metrics (`info["invalid_tokens"]` counts out-of-vocabulary ids), never an
    exception. Integral float arrays are accepted (cast to int64); an action of the wrong shape,
    or with non-integral or non-finite values, raises `ValueError`/`TypeError` (a caller bug, not
    model output). `pad_action(tokens)` builds an action from token ids.

    `info` is the env's, plus `"obs_length"` (the observation's length before truncation),
    `"obs_tokens_dropped"` (how many tokens truncation removed; 0 when it fit) and, after `step`,
    `"action_length"` (the action sent its first `action_length` slots: `action_tokens(action)`).
    Every added entry is a plain int, so batched infos keep a fixed shape (Tianshou's replay
    buffer stores `info`). `truncated_observations` counts truncated observations since
    construction.

    Libraries: SB3 `PPO("MultiInputPolicy", env)`; torchrl `GymWrapper(env)` (slots become
    one-hot unless `categorical_action_encoding=True`); Tianshou's `DummyVectorEnv` reads
    attributes from `env.unwrapped`, so give its policy this wrapper's `action_space`, not the
    vector env's.

    `env.spec` records the wrapper (`gym.make(env.spec)` rebuilds it), as Gymnasium's own
    wrappers do.
    """

    def __init__(
        self,
        env: gym.Env,
        max_obs_len: int,
        max_action_len: int,
        *,
        pad_id: int | None = None,
        truncation_side: TruncationSide = "left",
        stop_at_stop_tokens: bool = True,
        token_space: TokenSpaceKind = "multidiscrete",
    ) -> None:
        # Recorded so `env.spec` (and `spec.make()`, which `check_env` uses) rebuilds the wrapper.
        gym.utils.RecordConstructorArgs.__init__(
            self, max_obs_len=max_obs_len, max_action_len=max_action_len, pad_id=pad_id,
            truncation_side=truncation_side, stop_at_stop_tokens=stop_at_stop_tokens,
            token_space=token_space,
        )
        gym.Wrapper.__init__(self, env)
        self.max_obs_len = _positive_int("max_obs_len", max_obs_len)
        self.max_action_len = _positive_int("max_action_len", max_action_len)
        if truncation_side not in ("left", "right"):
            raise ValueError(f"truncation_side must be 'left' or 'right', got {truncation_side!r}")
        if token_space not in ("multidiscrete", "box"):
            raise ValueError(f"token_space must be 'multidiscrete' or 'box', got {token_space!r}")
        obs_vocab = _vocab_size("observation", env.observation_space)
        action_vocab = _vocab_size("action", env.action_space)
        vocab = max(obs_vocab, action_vocab)
        if pad_id is None:
            pad_id = vocab
        if (
            isinstance(pad_id, bool)
            or not isinstance(pad_id, (int, np.integer))
            or not 0 <= pad_id <= vocab
        ):
            raise ValueError(
                f"pad_id must be an int in [0, {vocab}] (the default, the vocabulary size {vocab}, "
                f"is an id outside the vocabulary), got {pad_id!r}"
            )
        self.pad_id = int(pad_id)
        self.vocab_size = vocab
        self.num_token_values = n = max(vocab, self.pad_id + 1)
        self.truncation_side: TruncationSide = truncation_side
        self.stop_at_stop_tokens = bool(stop_at_stop_tokens)
        self.token_space: TokenSpaceKind = token_space
        if token_space == "multidiscrete":
            tokens_space: spaces.Space[Any] = spaces.MultiDiscrete(
                np.full(self.max_obs_len, n, dtype=np.int64), dtype=np.int64
            )
        else:
            tokens_space = spaces.Box(0, n - 1, shape=(self.max_obs_len,), dtype=np.int64)
        # cast: gymnasium types a Dict space's samples as dict[str, Any]; here they are arrays.
        self.observation_space = cast("spaces.Space[dict[str, np.ndarray]]", spaces.Dict(
            {
                "tokens": tokens_space,
                "length": spaces.Box(0, self.max_obs_len, shape=(1,), dtype=np.int64),
            }
        ))
        self.action_space = spaces.MultiDiscrete(
            np.full(self.max_action_len, n, dtype=np.int64), dtype=np.int64
        )
        self.truncated_observations = 0
        self._stop_ids = np.empty(0, dtype=np.int64)

    # --- observations -------------------------------------------------------------------------
    def _pad_observation(
        self, obs: Any, info: dict[str, Any]
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        ids = np.asarray(obs, dtype=np.int64).reshape(-1)
        full = ids.shape[0]
        if full > self.max_obs_len:
            keep = self.max_obs_len
            ids = ids[full - keep:] if self.truncation_side == "left" else ids[:keep]
            self.truncated_observations += 1
        tokens = np.full(self.max_obs_len, self.pad_id, dtype=np.int64)
        tokens[: ids.shape[0]] = ids
        info = dict(info)
        info["obs_length"] = full
        info["obs_tokens_dropped"] = full - ids.shape[0]
        stop = info.get("stop_condition")
        if stop is not None:
            self._stop_ids = np.asarray(
                [s for s in stop if isinstance(s, (int, np.integer)) and not isinstance(s, bool)],
                dtype=np.int64,
            )
        return {"tokens": tokens, "length": np.array([ids.shape[0]], dtype=np.int64)}, info

    def unpad_observation(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The token ids of a padded observation (`obs["tokens"][:obs["length"]]`)."""
        length = int(np.asarray(obs["length"]).reshape(-1)[0])
        return np.asarray(obs["tokens"], dtype=np.int64)[:length].copy()

    # --- actions ------------------------------------------------------------------------------
    def action_tokens(self, action: Any) -> np.ndarray:
        """The int64 token ids that `step(action)` sends (see the class docstring)."""
        arr = np.asarray(action)
        if arr.shape != (self.max_action_len,):
            raise ValueError(
                f"PaddedTokens actions have shape ({self.max_action_len},) (max_action_len token "
                f"slots), got shape {arr.shape}; build one with pad_action(token_ids)"
            )
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise TypeError(
                    f"PaddedTokens action slots must be integer ids, got {arr.tolist()[:8]!r}"
                )
            arr = arr.astype(np.int64)
        elif arr.dtype.kind not in "iu":
            raise TypeError(f"PaddedTokens action slots must be integer ids, got dtype {arr.dtype}")
        end = self.max_action_len
        pads = np.flatnonzero(arr == self.pad_id)
        if pads.size:
            end = int(pads[0])
        if self.stop_at_stop_tokens and self._stop_ids.size:
            stops = np.flatnonzero(np.isin(arr[:end], self._stop_ids))
            if stops.size:
                end = int(stops[0]) + 1
        return arr[:end].astype(np.int64)

    def pad_action(self, tokens: Any) -> np.ndarray:
        """An action (int64, `(max_action_len,)`) that sends `tokens`: the ids, then `pad_id`.

        Raises `ValueError` when `tokens` has more than `max_action_len` ids or contains
        `pad_id` (which would end the action early)."""
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if ids.shape[0] > self.max_action_len:
            raise ValueError(
                f"{ids.shape[0]} tokens do not fit in max_action_len={self.max_action_len} slots"
            )
        if np.any(ids == self.pad_id):
            raise ValueError(
                f"tokens contain pad_id {self.pad_id}, which would end the action early"
            )
        action = np.full(self.max_action_len, self.pad_id, dtype=np.int64)
        action[: ids.shape[0]] = ids
        return action

    # --- gym.Wrapper --------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._pad_observation(obs, info)

    def step(
        self, action: Any
    ) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        tokens = self.action_tokens(action)
        obs, reward, terminated, truncated, info = self.env.step(tokens)
        padded, info = self._pad_observation(obs, info)
        info["action_length"] = len(tokens)
        return padded, reward, terminated, truncated, info


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _vocab_size(what: str, space: spaces.Space[Any]) -> int:
    """`V` of a `Sequence(Discrete(V))` space (a `TokenSequence` included)."""
    feature = getattr(space, "feature_space", None)
    if (
        not isinstance(space, spaces.Sequence)
        or not isinstance(feature, spaces.Discrete)
        or int(feature.start) != 0
    ):
        raise TypeError(
            f"PaddedTokens needs token-sequence spaces (llm_gym.spaces.TokenSequence or "
            f"Sequence(Discrete(V)) starting at 0); the {what} space is {space!r}. A string env "
            "must be turned into a token env first"
        )
    return int(feature.n)
