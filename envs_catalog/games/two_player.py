"""Two-player board games as text envs: the rules protocol, play vs a scripted opponent, self-play.

A game is a `TwoPlayerRules` object (legal moves, apply, result, the answer contract a move is
read through and the move reader on it, per-seat prompts and scripted opponents) over an
immutable state; seat 0 moves first. Every reply is read under the one answer policy
(`llm_gym.grading.POLICY`) by the contract `rules.answer_contract(state)`, which both seat envs
expose as `answer_contract`; legality is the rules' business. Three things are built on it,
once for every game (`ConnectFourRules`, `NimRules` and `TicTacToeRules`, each in its game's module
of `envs_catalog.games`; the self-play ids in `envs_catalog.multiagent.selfplay` import them):

- `VersusEnv`: one seat played by the policy against a scripted opponent (a single-use seed-API
  `Env`, the Gymnasium face of every `GameSource` id). Rewards on the last step: win +1, draw 0,
  loss -1; an illegal move (see `read_reply` and the game's reader) scores `illegal_reward` and
  ends the game; reaching `max_turns` unfinished scores 0 (`unfinished`). Observations keep the
  prefix property (`llm_gym.renderers.continuation.Continuation`). A reply is capped at
  `MAX_REPLY_CHARS` characters / `MAX_REPLY_TOKENS` tokens (longer: illegal, "too_long"), so an
  episode stays under the first prompt + `max_turns * (MAX_REPLY_TOKENS + one update turn)`
  tokens, which each source states as `max_context_tokens`.
- `GameSource`: the `EnvSource` base of the board-game ids (knobs `opponent`, `agent_first`,
  `illegal_reward`, `max_turns`, plus the game's own); `source.selfplay_group_builder(seed,
  num_games)` makes self-play groups from the start position `seed` draws, and
  `SelfPlayDataset` is an `RLDataset` of them.
- `SelfPlayGroupBuilder`: an `EnvGroupBuilder` whose envs are the two seats of shared games
  (envs[2k] seat 0 of game k, envs[2k+1] its seat 1), both played by the policy being trained.
  A `_Match` coordinator (asyncio.Condition) makes each seat's `initial_observation` / `step` wait
  for the other seat's move; every wait is bounded by `move_timeout_s` and a game by its rules'
  `max_moves`, so nothing waits forever: a seat whose opponent stops moving (its rollout was cut
  by `RolloutLimits`, cancelled, or retried on a fresh group) ends the game as "abandoned".
  Step rewards are 0; `compute_group_rewards` settles each game zero-sum: winner +1, loser -1,
  draw and abandoned 0, an illegal move loses. A seat whose game ended before its first move
  (the opponent's opening was illegal) returns `InitialObservationOverflow` from
  `initial_observation`: one empty transition, no training tokens, its group reward still +1.
  Run self-play groups with a strategy that runs a group's rollouts concurrently and does not
  replace single seats (`FailFast`, the default); a `RetryOnFailure` retry plays seat 0 of a fresh
  game nobody else joins, which ends "abandoned" after `move_timeout_s`.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Hashable, Protocol, Sequence

import numpy as np

from llm_gym.authoring import check_choice, check_float, check_int, child_seed
from llm_gym.env_source import EnvSource
from llm_gym.grading import AnswerContract
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import (
    Action, ActionExtra, Env, EnvGroupBuilder, InitialObservationOverflow, Metrics, Observation,
    RLDataset, StepResult, StopCondition, Trajectory,
)

DRAW = "draw"
MAX_REPLY_CHARS = 256  # a move is a few characters; longer replies are illegal ("too_long")
MAX_REPLY_TOKENS = 4 * MAX_REPLY_CHARS
_LOGGED_CHARS = 300
OUTCOMES = ("win", "draw", "loss", "illegal_move", "unfinished")

State = Any
Move = Hashable


class TwoPlayerRules(Protocol):
    """What a two-player game provides. States are immutable and picklable; seat 0 moves first.

    - `opponents`: the names of the scripted opponents `opponent_move` knows.
    - `to_move(state)`: the seat (0 or 1) to move.
    - `legal_moves(state)`: the moves available to the seat to move (non-empty until the end).
    - `apply(state, move)`: the state after the seat to move plays a legal `move`.
    - `result(state)`: the winning seat, `DRAW`, or None while the game goes on.
    - `answer_contract(state)`: what a move is (an `llm_gym.grading.AnswerContract`), the
      prompt's instruction and the reader of `parse_move`.
    - `parse_move(text, state)`: `(move, "ok")` for a reply whose move, read through
      `answer_contract(state)`, is legal, else `(None, reason)`; never raises.
    - `intro(state, seat, last_move)` / `update(state, seat, last_move)`: the first prompt of
      `seat` (rules, board, answer format; `last_move` is the opponent's opening, or None) and
      the message after the opponent's `last_move`.
    - `render(state)`: the board as text (logged at the end).
    - `max_moves(state)`: a bound on the moves left (the game ends by then).
    - `opponent_move(state, rng, opponent)`: a scripted opponent's move (`rng` a random.Random).
    """

    opponents: tuple[str, ...]

    def to_move(self, state: State) -> int: ...
    def legal_moves(self, state: State) -> Sequence[Move]: ...
    def apply(self, state: State, move: Move) -> State: ...
    def result(self, state: State) -> int | str | None: ...
    def answer_contract(self, state: State) -> AnswerContract: ...
    def parse_move(self, text: str, state: State) -> tuple[Move | None, str]: ...
    def intro(self, state: State, seat: int, last_move: Move | None) -> str: ...
    def update(self, state: State, seat: int, last_move: Move) -> str: ...
    def render(self, state: State) -> str: ...
    def max_moves(self, state: State) -> int: ...
    def opponent_move(self, state: State, rng: random.Random, opponent: str) -> Move: ...


def read_reply(renderer: Renderer, action: Sequence[int]) -> tuple[str, str | None]:
    """(reply text, None) for a cleanly ended, short reply, else (text, reason): "malformed"
    (ids outside the vocabulary), "length" (no clean end: a truncated reply) or "too_long"."""
    if len(action) > MAX_REPLY_TOKENS:
        return "", "too_long"
    message, termination = renderer.parse_response(action)
    text = str(message.get("content", ""))
    if not termination.is_clean:
        return text, "malformed" if renderer.has_invalid_ids(action) else "length"
    if len(text) > MAX_REPLY_CHARS:
        return text, "too_long"
    return text, None


def parse_action(rules: TwoPlayerRules, renderer: Renderer, action: Sequence[int],
                 state: State) -> tuple[Move | None, str, str]:
    """(move or None if illegal, reason, reply text) for a sampled action on `state`."""
    text, problem = read_reply(renderer, action)
    if problem is not None:
        return None, problem, text
    move, reason = rules.parse_move(text, state)
    return move, reason, text


# --- one seat vs a scripted opponent -------------------------------------------------------------
class VersusEnv(Env):
    """One game: the policy plays `agent_seat` against the scripted `opponent`. Final-step
    metrics: one-hot `win` / `draw` / `loss` / `illegal_move` / `unfinished`, and `moves` (the
    policy's legal moves); other steps: the continuation's one-hot mode. `state` is public (the
    scripted cases' oracles read it)."""

    def __init__(
        self, renderer: Renderer, rules: TwoPlayerRules, state: State, *, agent_seat: int,
        opponent: str, seed: int, illegal_reward: float = -1.0, max_turns: int | None = None,
        continuation: Continuation | None = None,
    ) -> None:
        self.renderer = renderer
        self.rules = rules
        self.state = state
        self.agent_seat = agent_seat
        self.opponent = opponent
        self.illegal_reward = illegal_reward
        self.max_turns = max_turns if max_turns is not None else rules.max_moves(state)
        self.continuation = continuation or Continuation(renderer)
        self._rng = random.Random(seed)
        self._ob: ModelInput | None = None
        self._messages: list[Message] = []
        self._moves = 0
        self._done = False

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    @property
    def answer_contract(self) -> AnswerContract:
        """What the reply the env waits for is (`rules.answer_contract` of the current state)."""
        return self.rules.answer_contract(self.state)

    def _opponent_move(self) -> Move:
        move = self.rules.opponent_move(self.state, self._rng, self.opponent)
        self.state = self.rules.apply(self.state, move)
        return move

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        opening = None
        if self.rules.to_move(self.state) != self.agent_seat:
            opening = self._opponent_move()
        text = self.rules.intro(self.state, self.agent_seat, opening)
        self._messages = [Message(role="user", content=text)]
        self._ob = self.continuation.first(self._messages)
        return self._ob, self.stop_condition

    def _end(self, reward: float, outcome: str, logs: dict) -> StepResult:
        self._done = True
        metrics: Metrics = {k: float(outcome == k) for k in OUTCOMES}
        metrics["moves"] = self._moves
        logs["board"] = self.rules.render(self.state)
        return StepResult(reward, True, ModelInput.empty(), self.stop_condition, metrics, logs)

    def _settled(self, logs: dict) -> StepResult | None:
        result = self.rules.result(self.state)
        if result is None:
            return None
        if result == DRAW:
            return self._end(0.0, "draw", logs)
        return self._end(1.0, "win", logs) if result == self.agent_seat else self._end(-1.0, "loss", logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self._done:
            raise RuntimeError(f"{type(self).__name__}: call initial_observation() first; envs are single-use")
        move, reason, text = parse_action(self.rules, self.renderer, action, self.state)
        logs: dict[str, Any] = {"response": text[:_LOGGED_CHARS], "move_status": reason}
        if move is None:
            return self._end(self.illegal_reward, "illegal_move", logs)
        self._moves += 1
        self.state = self.rules.apply(self.state, move)
        if (done := self._settled(logs)) is not None:
            return done
        reply = self._opponent_move()
        if (done := self._settled(logs)) is not None:
            return done
        if self._moves >= self.max_turns:
            return self._end(0.0, "unfinished", logs)
        self._messages += [
            Message(role="assistant", content=text),
            Message(role="user", content=self.rules.update(self.state, self.agent_seat, reply)),
        ]
        turn = self.continuation.next(self._ob, action, self._messages)
        self._ob = turn.observation
        return StepResult(0.0, False, self._ob, self.stop_condition, turn.metrics, logs)


# --- the EnvSource base of the board games -------------------------------------------------------
class GameSource(EnvSource):
    """Base of the board-game sources. Subclasses set `card`, `OPPONENTS`, `GAME_DEFAULTS` (their
    own knobs and defaults), `HAS_AGENT_FIRST`, and implement `_set_game_knobs(own)`,
    `make_rules()` and `initial_state(rng)`. Common knobs: `opponent`, `agent_first` (when the
    game has it), `illegal_reward` (-1..0, default -1) and `max_turns` (1 to the game's bound,
    default the bound: never reached)."""

    OPPONENTS: tuple[str, ...] = ("random",)
    GAME_DEFAULTS: dict[str, Any] = {}
    HAS_AGENT_FIRST = True

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        defaults = {"opponent": self.OPPONENTS[0], "illegal_reward": -1.0, "max_turns": None,
                    **({"agent_first": "random"} if self.HAS_AGENT_FIRST else {}), **self.GAME_DEFAULTS}
        own = {k: knobs.pop(k, v) for k, v in defaults.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.opponent = check_choice("opponent", own["opponent"], self.OPPONENTS)
        self.agent_first = (
            check_choice("agent_first", own["agent_first"], (True, False, "random"))
            if self.HAS_AGENT_FIRST else True
        )
        self.illegal_reward = check_float("illegal_reward", own["illegal_reward"], -1.0, 0.0)
        self._set_game_knobs(own)
        self.rules = self.make_rules()
        self.turn_bound = self.max_agent_turns()
        self.max_turns = (
            self.turn_bound if own["max_turns"] is None
            else check_int("max_turns", own["max_turns"], 1, self.turn_bound)
        )
        self.continuation = Continuation(renderer)
        self.max_context_tokens = self._context_bound()

    def _context_bound(self) -> int:
        """A bound on any observation's length in tokens (`max_context_tokens`): the first prompt
        plus, per turn, the longest reply `read_reply` lets through and the rendered update turn,
        measured on the game's widest texts (`wide_state()`), with a 4-token slack per turn for
        the end-of-turn ids a continuation may add."""
        state, move = self.wide_state()
        first = self.renderer.build_generation_prompt(
            [Message(role="user", content=self.rules.intro(state, 1, move))]).length
        update = self.renderer.build_generation_prompt(
            [Message(role="user", content=self.rules.update(state, 0, move))]).length
        return first + self.max_turns * (MAX_REPLY_TOKENS + update + 4)

    def wide_state(self) -> tuple[State, Move]:
        """A state and a move whose prompts are at least as long as any the game shows."""
        raise NotImplementedError

    def _set_game_knobs(self, own: dict[str, Any]) -> None:
        """Validate and store the game's own knobs (`own` holds every knob with its default)."""

    def make_rules(self) -> TwoPlayerRules:
        raise NotImplementedError

    def initial_state(self, rng: np.random.Generator) -> State:
        raise NotImplementedError

    def max_agent_turns(self) -> int:
        """The most moves the policy can make in one game (the `max_turns` bound)."""
        raise NotImplementedError

    def make_env(self, rng: np.random.Generator) -> VersusEnv:
        state = self.initial_state(rng)
        agent_first = bool(rng.integers(2)) if self.agent_first == "random" else self.agent_first
        # Train games seed the opponent with even seeds, test games with odd ones (disjoint streams).
        seed = 2 * (child_seed(rng) // 2) + (self.split == "test")
        return VersusEnv(
            self.renderer, self.rules, state, agent_seat=0 if agent_first else 1,
            opponent=self.opponent, seed=seed, illegal_reward=self.illegal_reward,
            max_turns=self.max_turns, continuation=self.continuation,
        )

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-1.0, 1.0)  # a loss is -1 whatever illegal_reward is

    def selfplay_group_builder(self, seed: int = 0, num_games: int = 1,
                               move_timeout_s: float = 300.0) -> "SelfPlayGroupBuilder":
        """A self-play group of `num_games` games (2 seats each), all from the start position that
        `seed` draws (the same rule as `make_env`, so the split holds), with this renderer."""
        state = self.initial_state(np.random.default_rng(seed))
        return SelfPlayGroupBuilder(self.renderer, self.rules, state, num_games=num_games,
                                    move_timeout_s=move_timeout_s)


# --- self-play -----------------------------------------------------------------------------------
class _Match:
    """One game shared by its two seat envs; `changed` wakes the waiting seat."""

    def __init__(self, rules: TwoPlayerRules, state: State) -> None:
        self.rules = rules
        self.state = state
        self.moves_left = rules.max_moves(state)
        self.last_move: Move | None = None
        self.result: int | str | None = rules.result(state)  # seat, DRAW, "abandoned"
        self.illegal_by: int | None = None
        self.changed = asyncio.Condition()

    def play(self, seat: int, move: Move | None) -> None:
        """Seat `seat` moves (None: an illegal move, which loses)."""
        if move is None:
            self.result, self.illegal_by = 1 - seat, seat
            return
        self.state = self.rules.apply(self.state, move)
        self.last_move = move
        self.moves_left -= 1
        self.result = self.rules.result(self.state)
        if self.result is None and self.moves_left <= 0:  # unreachable for sound rules: a safety net
            self.result = DRAW

    async def notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def wait_for_turn(self, seat: int, timeout_s: float) -> None:
        """Return once it is `seat`'s move or the game is over; abandon the game on timeout."""
        async with self.changed:
            try:
                await asyncio.wait_for(
                    self.changed.wait_for(
                        lambda: self.result is not None or self.rules.to_move(self.state) == seat
                    ),
                    timeout_s,
                )
            except (asyncio.TimeoutError, TimeoutError):
                if self.result is None:
                    self.result = "abandoned"
                self.changed.notify_all()


class SeatEnv(Env):
    """One seat of a shared self-play game. Step rewards are 0; `outcome()` settles the game."""

    def __init__(self, renderer: Renderer, match: _Match, seat: int, *, move_timeout_s: float,
                 continuation: Continuation) -> None:
        self.renderer = renderer
        self.match = match
        self.seat = seat
        self.move_timeout_s = move_timeout_s
        self.continuation = continuation
        self._ob: ModelInput | None = None
        self._messages: list[Message] = []
        self._done = False

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    @property
    def answer_contract(self) -> AnswerContract:
        """What this seat's next move is (`rules.answer_contract` of the shared game's state)."""
        return self.match.rules.answer_contract(self.match.state)

    async def initial_observation(self) -> tuple[Observation, StopCondition] | InitialObservationOverflow:
        match = self.match
        await match.wait_for_turn(self.seat, self.move_timeout_s)
        if match.result is not None:  # over before this seat's first move: nothing to sample
            self._done = True
            return InitialObservationOverflow(0.0, {"game_over_before_first_move": 1.0})
        text = match.rules.intro(match.state, self.seat, match.last_move)
        self._messages = [Message(role="user", content=text)]
        self._ob = self.continuation.first(self._messages)
        return self._ob, self.stop_condition

    def outcome(self) -> tuple[float, Metrics]:
        """(group reward, metrics) for this seat once the game is settled."""
        result = self.match.result
        metrics: Metrics = {
            "win": float(result == self.seat),
            "loss": float(result == 1 - self.seat),
            "draw": float(result == DRAW),
            "abandoned": float(result is None or result == "abandoned"),
            "illegal_move": float(self.match.illegal_by == self.seat),
            "seat": float(self.seat),
        }
        return metrics["win"] - metrics["loss"], metrics

    def _done_result(self, logs: dict) -> StepResult:
        self._done = True
        logs["board"] = self.match.rules.render(self.match.state)
        return StepResult(0.0, True, ModelInput.empty(), self.stop_condition, {}, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self._done:
            raise RuntimeError("SeatEnv: call initial_observation() first; envs are single-use")
        match = self.match
        if match.result is not None:
            return self._done_result({"move_status": "game_over"})
        move, reason, text = parse_action(match.rules, self.renderer, action, match.state)
        logs: dict[str, Any] = {"response": text[:_LOGGED_CHARS], "move_status": reason}
        match.play(self.seat, move)
        await match.notify()
        if match.result is not None:
            return self._done_result(logs)
        await match.wait_for_turn(self.seat, self.move_timeout_s)
        if match.result is not None:
            return self._done_result(logs)
        self._messages += [
            Message(role="assistant", content=text),
            Message(role="user", content=match.rules.update(match.state, self.seat, match.last_move)),
        ]
        turn = self.continuation.next(self._ob, action, self._messages)
        self._ob = turn.observation
        return StepResult(0.0, False, self._ob, self.stop_condition, turn.metrics, logs)


@dataclass(frozen=True)
class SelfPlayGroupBuilder(EnvGroupBuilder):
    """`num_games` self-play games of `rules` from `initial_state`; envs come in seat pairs:
    envs[2k] is seat 0 (moves first) of game k, envs[2k+1] its seat 1, so the group size is
    even. Picklable (the shared game state is created in `make_envs`)."""

    renderer: Renderer
    rules: Any  # a TwoPlayerRules
    initial_state: Any
    num_games: int = 1
    move_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        check_int("num_games", self.num_games, 1, 1_000_000)
        check_float("move_timeout_s", self.move_timeout_s, 1e-3, 1e9)
        if self.rules.result(self.initial_state) is not None:
            raise ValueError("initial_state is already a finished game")

    async def make_envs(self) -> Sequence[Env]:
        continuation = Continuation(self.renderer)
        envs: list[Env] = []
        for _ in range(self.num_games):
            match = _Match(self.rules, self.initial_state)
            envs += [SeatEnv(self.renderer, match, seat, move_timeout_s=self.move_timeout_s,
                             continuation=continuation) for seat in (0, 1)]
        return envs

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        return [env.outcome() if isinstance(env, SeatEnv) else (0.0, {}) for env in env_group]

    def logging_tags(self) -> list[str]:
        return [f"{type(self.rules).__name__}_selfplay"]


class SelfPlayDataset(RLDataset):
    """`n_batches` batches of `batch_size` self-play groups of `source` (a `GameSource`); group
    `j` of batch `i` starts from the position seed `SeedSequence([seed, i, j])` draws, so batch
    `i` is the same on every machine. Each group has `num_games` games (2 * num_games envs)."""

    def __init__(self, source: GameSource, batch_size: int, n_batches: int, *, seed: int = 0,
                 num_games: int = 1, move_timeout_s: float = 300.0) -> None:
        self.source = source
        self.batch_size = check_int("batch_size", batch_size, 1, 1_000_000)
        self.n_batches = check_int("n_batches", n_batches, 1, 10**12)
        self.seed, self.num_games, self.move_timeout_s = seed, num_games, move_timeout_s

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        if not 0 <= index < self.n_batches:
            raise IndexError(f"batch index {index} out of range [0, {self.n_batches})")
        return [
            self.source.selfplay_group_builder(
                int(np.random.SeedSequence([self.seed, index, j]).generate_state(2, np.uint64)[0] >> 1),
                self.num_games, self.move_timeout_s,
            )
            for j in range(self.batch_size)
        ]

    def __len__(self) -> int:
        return self.n_batches
