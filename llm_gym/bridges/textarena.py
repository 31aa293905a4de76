"""TextArena games as llm-gym envs: `textarena/<Game>-v0` (`TextArenaSource`, `TextArenaSelfPlay`).

`TextArenaGame` gives one seat of a TextArena game the string-env face `FromText` drives:
`reset(seed)` makes the game (`textarena.make("<Game>-v0<variant>-raw")`, unwrapped, so each turn
shows only what is new: TextArena's own `LLMObservationWrapper` would resend the whole history),
resets it with the seed and lets the built-in opponent move until it is the agent's turn; the
observation is the seat's new messages as TextArena's wrappers write them (`[GAME] ...`,
`[Player 1] [4]`), the agent's own moves left out (they are already its turns). `step(text)` plays
the agent's move, then the opponent's, and returns TextArena's final reward for the agent's seat
when the game ends (two-player: 1 win, 0 draw, -1 loss; single-player games: their own score,
-1 after repeated invalid moves), else 0. Opponents (`opponent=`): "random" -- a move drawn from the
bracketed moves shown to it (`'[4]'`, `[play 2]`), tried on a copy of the game first so that it is
legal when one of them is; "optimal" for `TicTacToe-v0` (minimax) and `Nim-v0` (nim-sum). The agent's
seat is drawn from the seed (`agent_player="random"`) or fixed (0 / 1). TextArena draws from the
global `random` module, which `FromText` swaps for a private seeded copy on every call, so episodes
are reproducible. Splits: a game dealt on split="train" or "test" is redealt (from seeds derived
from the episode's) until its task key -- the dealt game with its hidden parts, and for two seats
the agent's seat and the opponent's generator -- hashes to that split, so a game with few tasks
(GuessTheNumber's 20 secrets) shows none in both; the games TextArena registers with one fixed
task (`FIXED_TASKS`: TowerOfHanoi, Countdown, Cryptarithm, PegJump) are not split, and those that
draw their task during play (`DRAWN_IN_PLAY`: Minesweeper) are split by the seed's parity.
Self-play: `TextArenaSelfPlay(game, seed, ...)` is an `EnvGroupBuilder` whose envs are both seats
of the same games (they wait for each other's moves). Which games are
registered, and why the others are not, is in `llm_gym.bridges` (`TEXTARENA`). A game the opponent
ends before the agent's first move (it forfeits by invalid moves) still shows the agent its intro
(`info["done_before_first_move"]`), and the agent's reply then only collects the final reward.
The card's `example_episode` is the game's first two moves from a fixed seed (random legal moves),
played when the card is first read (`llm_gym.bridges._example`).
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import random
import re
from typing import Any, Callable, Sequence

import numpy as np

from llm_gym.authoring import split_of
from llm_gym.bridges import TEXTARENA
from llm_gym.bridges._example import EXAMPLE_SEED, LazyCard, from_text_knobs, play_example
from llm_gym.env_source import EnvCard
from llm_gym.renderers import Renderer
from llm_gym.rl.types import Env, EnvGroupBuilder, Metrics, Trajectory
from llm_gym.wrappers.from_text import StringEnvSource, StringEpisode, _PrivateGlobalRNG

__all__ = ["TextArenaGame", "TextArenaSelfPlay", "TextArenaSource", "game_card"]

OPPONENTS = ("random", "optimal")
_MOVE = re.compile(r"\[[^\[\]\n]{1,40}\]")
_ROLE_TAG = re.compile(r"\[(GAME|Player \d+)\]")
_MAX_TRIALS = 32
_EXAMPLE_TRIES = 6  # seeds tried for a card example that lasts two moves
FIXED_TASKS = {  # games whose every episode is the same task, by TextArena's design
    "TowerOfHanoi-v0": "TextArena's TowerOfHanoi starts every game from the same tower (every "
    "disk on the first peg; the variant sets how many)",
    "Countdown-v0": "TextArena registers Countdown-v0 with fixed numbers and target (100 75 6 4 "
    "3 2 -> 532; game_kwargs numbers=None, target=None draw them)",
    "Cryptarithm-v0": "TextArena registers Cryptarithm-v0 with one equation (SEND + MORE = "
    "MONEY; game_kwargs equation= sets another)",
    "PegJump-v0": "TextArena's PegJump starts every game from the same board (every hole "
    "pegged but one, TextArena registers initial_empty=5; game_kwargs initial_empty= moves it)",
}
# Games whose task is drawn while they are played, not when they are dealt (Minesweeper places
# its mines at the first move): the dealt game is the same for every seed, so they are split by
# the seed's parity (FromText) and keyed by the episode's random stream.
DRAWN_IN_PLAY = {"Minesweeper-v0"}

_MAX_SPLIT_TRIES = 64  # deals tried for a task of the episode's split


def fixed_task(game: str, variant: str = "", game_kwargs: dict[str, Any] | None = None) -> str | None:
    """Why `game` (as registered: no variant, no game_kwargs) is one task by design, else None."""
    return None if variant or game_kwargs else FIXED_TASKS.get(game)


def split_of_task(key: Any) -> str:
    """The split a dealt game belongs to, by a stable hash of its task key: half each."""
    return split_of(json.dumps(key, separators=(",", ":")), modulus=2)


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as plain JSON data, the same in every process: sets sorted, floats by repr,
    patterns by their text, other objects by their type and fields (8 levels deep at most)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    if depth > 8:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        return sorted(([str(_plain(k, depth + 1)), _plain(v, depth + 1)] for k, v in value.items()),
                      key=repr)
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v, depth + 1) for v in value), key=repr)
    if isinstance(value, re.Pattern):
        return value.pattern
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict) and not callable(value):
        return [type(value).__name__, _plain(fields, depth + 1)]
    return f"<{type(value).__name__}>"


def _textarena():
    import textarena

    return textarena


# --- opponents -------------------------------------------------------------------------------
def _shown_moves(messages: Sequence[tuple]) -> list[str]:
    """Bracketed moves shown to a player (not its own actions), the latest messages' first."""
    ta = _textarena()
    moves: list[str] = []
    for _sender, text, kind in reversed(messages):
        if kind != ta.ObservationType.PLAYER_ACTION:
            moves += [m for m in _MOVE.findall(str(text)) if not _ROLE_TAG.fullmatch(m)]
    return list(dict.fromkeys(moves))


def _is_legal(env: Any, move: str) -> bool:
    """Whether `move` is accepted by a copy of the game: no invalid-move warning (TextArena's
    states count one in `error_count`, and reset `made_invalid_move` before `step` returns, so that
    flag alone misses every invalid move but the losing one), no loss by it."""
    trial = copy.deepcopy(env)
    player = trial.state.current_player_id
    errors_before = getattr(trial.state, "error_count", 0)
    try:
        trial.step(move)
    except Exception:
        return False
    state = trial.state
    if getattr(state, "made_invalid_move", False) or getattr(state, "error_count", 0) > errors_before:
        return False
    info = getattr(state, "game_info", {}).get(player, {})
    return not info.get("invalid_move", False)


def _variants(move: str, rng: random.Random, n: int) -> list[str]:
    """`n` random fillings of a move template ("[play X]", "[attack M O]", "[pile quantity]"):
    placeholder words (letters only, or "<name>"; a leading lowercase keyword before capital
    placeholders is kept) become small numbers, single capitals also letters with a digit ("A4")."""
    words = move[1:-1].split()
    holes = [i for i, w in enumerate(words)
             if w.isalpha() or re.fullmatch(r"<[A-Za-z_ ]+>", w)]  # "X", "pile", "<number>"
    if holes and holes[0] == 0 and words[0].islower() and any(words[i].isupper() for i in holes):
        holes = holes[1:]  # "[attack M O]": keep the verb
    if not holes:
        return []
    out = []
    for _ in range(n):
        filled = list(words)
        for i in holes:
            if words[i].isupper() and len(words[i]) == 1 and rng.random() < 0.3:
                filled[i] = rng.choice("ABCDEFGHIJ") + rng.choice("0123456789")
            else:
                filled[i] = str(rng.randrange(10))
        out.append("[" + " ".join(filled) + "]")
    return out


def random_move(env: Any, messages: Sequence[tuple], rng: random.Random) -> str:
    """A random legal move when one can be found: the bracketed moves shown to the player, then
    random fillings of them as templates, each tried on a copy of the game (at most 32 tries);
    else the first move shown (or "[0]"), which the game may reject."""
    return _random_move(env, messages, rng)[0]


def _random_move(env: Any, messages: Sequence[tuple], rng: random.Random) -> tuple[str, bool]:
    shown = _shown_moves(messages)
    rng.shuffle(shown)
    tried: set[str] = set()
    candidates = shown + [v for m in shown for v in _variants(m, rng, 12)]
    for move in candidates:
        if move in tried:
            continue
        tried.add(move)
        if len(tried) > _MAX_TRIALS:
            break
        if _is_legal(env, move):
            return move, True
    return (shown[0] if shown else "[0]"), False


def _tictactoe_move(env: Any, messages: Sequence[tuple], rng: random.Random) -> str:
    board = [c for row in env.state.game_state["board"] for c in row]
    me = "X" if env.state.current_player_id == 1 else "O"
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]

    def winner(b: list[str]) -> str | None:
        for a, c, d in lines:
            if b[a] and b[a] == b[c] == b[d]:
                return b[a]
        return None

    def value(b: list[str], turn: str) -> int:  # +1: `me` wins with best play
        w = winner(b)
        if w:
            return 1 if w == me else -1
        free = [i for i, c in enumerate(b) if not c]
        if not free:
            return 0
        other = "O" if turn == "X" else "X"
        scores = []
        for i in free:
            b[i] = turn
            scores.append(value(b, other))
            b[i] = ""
        return max(scores) if turn == me else min(scores)

    other = "O" if me == "X" else "X"
    best, moves = -2, []
    for i in (i for i, c in enumerate(board) if not c):
        board[i] = me
        v = value(board, other)
        board[i] = ""
        if v > best:
            best, moves = v, [i]
        elif v == best:
            moves.append(i)
    return f"[{rng.choice(moves)}]"


def _nim_move(env: Any, messages: Sequence[tuple], rng: random.Random) -> str:
    piles = list(env.state.game_state["piles"])
    nim_sum = 0
    for p in piles:
        nim_sum ^= p
    if nim_sum:
        for i, p in enumerate(piles):
            if p ^ nim_sum < p:
                return f"[{i} {p - (p ^ nim_sum)}]"
    i = max(range(len(piles)), key=lambda k: piles[k])  # a lost position: take one and hope
    return f"[{i} 1]"


OPTIMAL_OPPONENTS: dict[str, Callable[[Any, Sequence[tuple], random.Random], str]] = {
    "TicTacToe-v0": _tictactoe_move,
    "Nim-v0": _nim_move,
}


def _format(messages: Sequence[tuple], env: Any, skip_from: int | None) -> str:
    """A seat's messages as text, as TextArena's LLMObservationWrapper writes them."""
    ta = _textarena()
    roles = getattr(env.state, "role_mapping", {})
    lines = []
    for sender, text, kind in messages:
        if sender == skip_from and kind == ta.ObservationType.PLAYER_ACTION:
            continue
        name = "GAME" if sender == ta.GAME_ID else roles.get(sender, f"Player {sender}")
        lines.append(f"[{name}] {text}")
    return "\n".join(lines)


# --- one seat against the built-in opponent ----------------------------------------------------
class TextArenaGame:
    """The string-env face of one TextArena game, played from one seat (see the module docstring).

    `info` of the last step has `invalid_move` (1 when the agent's seat lost by invalid moves),
    `turns` (the agent's moves) and, against an opponent, `opponent_fallback_rate` (the fraction
    of its moves for which no legal move was found); `FromText` reports them as `env/<key>`."""

    def __init__(self, game: str, *, players: int, opponent: str = "random",
                 agent_player: int | str = "random", variant: str = "",
                 game_kwargs: dict[str, Any] | None = None, split: str | None = None) -> None:
        self.game = game
        self.split = split  # when set, reset deals only games whose task key hashes to it
        self.players = players
        self.opponent = opponent
        self.agent_player = agent_player
        self.variant = variant
        self.game_kwargs = dict(game_kwargs or {})
        self.env: Any = None
        self.agent = 0
        self._rng = random.Random(0)
        self._seen: dict[int, list[tuple]] = {}
        self._turns = 0
        self._opponent_moves = self._opponent_fallbacks = 0
        self._done_early = False

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        """Deal the game for `seed`; with a `split`, redeal from seeds derived from it until the
        game's task key belongs to the split (`split_of_task`), so no task is in both splits
        (GuessTheNumber has 20 secrets). A game fixed by design (`FIXED_TASKS`) is not split."""
        if (self.split is None or fixed_task(self.game, self.variant, self.game_kwargs)
                or self.game in DRAWN_IN_PLAY):
            return self._deal(seed)  # the seed's parity splits it (FromText)
        for k in range(_MAX_SPLIT_TRIES):
            dealt = self._deal(seed if seed is None or k == 0 else (seed + k * 0x9E3779B1) % 2**32)
            if split_of_task(self.task_key()) == self.split:
                return dealt
        raise ValueError(
            f"textarena/{self.game}{self.variant}: none of {_MAX_SPLIT_TRIES} deals from seed {seed} "
            f"is a task of split {self.split!r}: the game has too few distinct tasks for two "
            "disjoint splits")

    def task_key(self) -> Any:
        """The game as dealt, hidden parts included (a secret number, the bandit's odds, the
        opponent's hand): the game object's own fields and its `state.game_state` as plain
        JSON, and for a two-seat game the agent's seat and the built-in opponent's generator.
        None before a reset."""
        if self.env is None:
            return None
        fields = {k: v for k, v in vars(self.env).items() if k not in ("state", "env_id", "entry_point")}
        key = {"game": fields, "game_state": getattr(getattr(self.env, "state", None), "game_state", None)}
        if self.players > 1:
            key.update(agent=self.agent, opponent_rng=self._rng.getstate())
        return _plain(key)

    def _deal(self, seed: int | None) -> tuple[str, dict]:
        ta = _textarena()
        self.env = ta.make(f"{self.game}{self.variant}-raw", **self.game_kwargs)
        self._rng = random.Random(seed)
        if self.players == 1:
            self.agent = 0
        elif self.agent_player == "random":
            self.agent = self._rng.randrange(self.players)
        else:
            self.agent = int(self.agent_player)
        self._seen = {pid: [] for pid in range(self.players)}
        self._turns = self._opponent_moves = self._opponent_fallbacks = 0
        self.env.reset(num_players=self.players, seed=seed)
        done = self._done_early = self._opponents_move()
        return self._observation(), {"done_before_first_move": done}

    def _opponents_move(self) -> bool:
        """Let the other seats move until it is the agent's turn; whether the game ended."""
        done = False
        for _ in range(10_000):
            if done or self.env.state.current_player_id == self.agent:
                return done
            pid, messages = self.env.get_observation()
            self._seen.setdefault(pid, []).extend(messages)
            if self.opponent == "optimal":
                move, legal = OPTIMAL_OPPONENTS[self.game](self.env, self._seen[pid], self._rng), True
            else:
                move, legal = _random_move(self.env, self._seen[pid], self._rng)
            self._opponent_moves += 1
            self._opponent_fallbacks += not legal
            done, _ = self.env.step(move)
        raise RuntimeError(f"{self.game}: the opponent made 10,000 moves without the agent's turn")

    def _observation(self) -> str:
        queues = getattr(self.env.state, "observations", None)
        if isinstance(queues, dict) and self.agent in queues:
            # The agent's own queue: get_observation() pops the *current* player's, which is not
            # the agent's when the opponent ended the game before the agent's first move.
            messages, queues[self.agent] = list(queues[self.agent]), []
        else:
            _pid, messages = self.env.get_observation()
        self._seen.setdefault(self.agent, []).extend(messages)  # what the agent's seat was shown
        return _format(messages, self.env, skip_from=self.agent)

    def shown_to_agent(self) -> list[tuple]:
        """Every TextArena message the agent's seat was shown this game (for scripted agents)."""
        return list(self._seen.get(self.agent, []))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self._turns += 1
        if self._done_early:  # the game ended before the agent's first move: nothing to play
            done = True
        else:
            done, _ = self.env.step(action)
        if not done:
            done = self._opponents_move()
        if not done:
            return self._observation(), 0.0, False, False, {}
        rewards, game_info = self.env.close()
        rewards = rewards or {}
        mine = (game_info or {}).get(self.agent, {})
        info = {"invalid_move": float(bool(mine.get("invalid_move"))), "turns": self._turns}
        if self._opponent_moves:  # how often the random opponent found no legal move to play
            info["opponent_fallback_rate"] = self._opponent_fallbacks / self._opponent_moves
        return "", _reward_of(rewards.get(self.agent, 0.0), info), True, False, info


def _reward_of(value: Any, info: dict) -> float:
    """TextArena's final reward as a float. Some games (Cryptarithm, Slitherlink in 0.7.4) pass
    set_invalid_move's arguments in the wrong order, so the reward is the reason's text: that is
    an invalid move ending the game, scored as TextArena's default for one, -1 (metric
    `reward_not_a_number`)."""
    try:
        reward = float(value)
    except (TypeError, ValueError):
        reward = math.nan
    if not math.isfinite(reward):
        info["invalid_move"], info["reward_not_a_number"] = 1.0, 1.0
        return -1.0
    return reward


def game_card(game: str, entry: dict[str, Any]) -> EnvCard:
    """The card of `textarena/<game>` (`entry`: its spec kwargs); no example episode (the
    source's lazy card plays one)."""
    players = entry.get("players", 1)
    opponents = "random" + (", optimal" if game in OPTIMAL_OPPONENTS else "")
    knobs = {
        "players": f"seats the game is played with, fixed by the game: {players} "
        + ("(the agent and a built-in opponent) " if players == 2 else "(the agent alone) ")
        + f"(default {players})",
        "variant": "a TextArena variant suffix of the game, e.g. '-hard' (default '')",
        "game_kwargs": "keyword arguments for the TextArena game's constructor (default {})",
    }
    if players == 2:
        knobs["opponent"] = f"the built-in opponent: {opponents} (default 'random')"
        knobs["agent_player"] = "the agent's seat, 0, 1 or 'random' (drawn from the seed) (default 'random')"
    else:
        knobs["opponent"] = "the built-in opponent of two-player games; a single-player game has " \
            "none, so only 'random' is accepted and it does nothing (default 'random')"
        knobs["agent_player"] = "the agent's seat in two-player games; a single-player game has " \
            "seat 0 only, so 0 or 'random' (default 'random')"
    knobs.update(from_text_knobs(
        invalid_action_reward="reward for a reply that never reaches the game (out-of-vocabulary "
        "ids, invalid UTF-8, over max_action_chars) or that TextArena raised on (default -1.0)",
    ))
    vs = "against a built-in opponent" if players == 2 else "single-player"
    return EnvCard(
        id=f"textarena/{game}",
        family="textarena",
        description=(
            f"TextArena's {game} ({vs}), multi-turn: each turn shows what happened since the agent's "
            "last move, and the agent replies with its move in TextArena's bracket format."
        ),
        multi_turn=True,
        reward_range=(-1.0, 1.0),
        reward_meaning="TextArena's final reward for the agent's seat, at the game's last step "
        "(two-player: 1 win, 0 draw, -1 loss; single-player: the game's score; -1 after repeated "
        "invalid moves); -1 for a reply that never reached the game",
        difficulty_knobs=knobs,
        data_source=f"TextArena {TEXTARENA.version} games (generated from the seed)",
        license=TEXTARENA.license,
    )


class TextArenaSource(StringEnvSource):
    """Episodes of one TextArena game (`game`, e.g. "TicTacToe-v0") through `FromText`."""

    card = LazyCard(game_card("<Game>-v0", {"players": 2}))

    def __init__(self, *, renderer: Renderer, split: str = "train", game: str, players: int = 1,
                 opponent: str = "random", agent_player: int | str = "random", variant: str = "",
                 game_kwargs: dict[str, Any] | None = None, **options: Any) -> None:
        entry = TEXTARENA.entries.get(f"textarena/{game}")
        if isinstance(players, bool) or players not in (1, 2):
            raise ValueError(f"players must be 1 or 2, got {players!r}")
        if entry is not None and players != entry["players"]:
            raise ValueError(f"players: {game} is a {entry['players']}-player game, got {players!r}")
        self.card = game_card(game, {**(entry or {}), "players": players})
        if opponent not in OPPONENTS:
            raise ValueError(f"opponent must be one of {OPPONENTS}, got {opponent!r}")
        if opponent == "optimal" and game not in OPTIMAL_OPPONENTS:
            raise ValueError(
                f"opponent='optimal' exists for {sorted(OPTIMAL_OPPONENTS)}, not {game!r}; use 'random'"
            )
        if agent_player not in ("random", 0, 1) or isinstance(agent_player, bool):
            raise ValueError(f"agent_player must be 0, 1 or 'random', got {agent_player!r}")
        if players == 1 and agent_player == 1:
            raise ValueError(f"agent_player=1: {game} is a single-player game (seat 0 only)")
        if not isinstance(variant, str):
            raise TypeError(f"variant must be a str like '-hard', got {variant!r}")
        if game_kwargs is not None and not isinstance(game_kwargs, dict):
            raise TypeError(f"game_kwargs must be a dict, got {type(game_kwargs).__name__}")
        options.setdefault("reward_range", (-1.0, 1.0))
        self._game_args: dict[str, Any] = dict(game=game, players=players, opponent=opponent,
                               agent_player=agent_player, variant=variant, game_kwargs=game_kwargs)
        super().__init__(renderer=renderer, split=split, **options)

    def make_string_env(self) -> TextArenaGame:
        return TextArenaGame(**self._game_args, split=self.split)

    def fixed_task_reason(self) -> str | None:
        args = self._game_args
        return fixed_task(args["game"], args["variant"], args["game_kwargs"])

    def task_key(self, env: Any) -> Any:
        """`TextArenaGame.task_key` of the episode's game (None before its reset); for a game
        that draws its task during play (`DRAWN_IN_PLAY`), with the episode's random stream."""
        table = getattr(env, "string_env", None)
        if not isinstance(table, TextArenaGame):
            return None
        if table.game in DRAWN_IN_PLAY and isinstance(env, StringEpisode):
            return [table.task_key(), env.global_rng_fingerprint()]
        return table.task_key()

    def no_gold_reason(self) -> str | None:
        return ("TextArena's games ship no solver and no reference moves to script a winning game "
                "from; tests/llm_gym/bridges/test_bridges_textarena.py checks the translation against TextArena "
                "itself")

    # --- the card's example: the first two moves of a game from a fixed seed ---------------------
    def _example_key(self) -> tuple:
        import json

        return ("textarena", json.dumps(self._game_args, sort_keys=True, default=repr),
                self.system_prompt)

    def _example_episode(self) -> list[dict[str, str]]:
        """The first two moves of a game (random legal moves, as the test agent plays) from the
        first of a few fixed seeds whose game lasts that long; for a game that one legal move
        ends (ThreeCardMonte), a move the game rejects and then a legal one (TextArena lets a
        player retry an invalid move); else the longest of these episodes."""
        best: list[dict[str, str]] = []
        attempts = [(seed, False) for seed in range(EXAMPLE_SEED, EXAMPLE_SEED + _EXAMPLE_TRIES)]
        for seed, reject_first in attempts + [(EXAMPLE_SEED, True)]:
            game = TextArenaGame(**self._game_args)  # not one of the source's pooled envs
            rng = random.Random(seed)

            def move(env: TextArenaGame, turn: int, reject_first: bool = reject_first) -> str:
                if reject_first and turn == 0:
                    return "[?]"
                return random_move(env.env, env.shown_to_agent(), rng)

            with _PrivateGlobalRNG(seed).active():
                first, _ = game.reset(seed=seed)
                episode = play_example(game, first, move, system_prompt=self.system_prompt)
            replies = sum(m["role"] == "assistant" for m in episode)
            if replies >= 2:
                return episode
            if replies > sum(m["role"] == "assistant" for m in best):
                best = episode
        return best


# --- self-play --------------------------------------------------------------------------------
class _SharedGame:
    """One two-player TextArena game that two seat views take turns in."""

    def __init__(self, game: str, seed: int, variant: str, game_kwargs: dict[str, Any] | None,
                 turn_timeout_s: float) -> None:
        ta = _textarena()
        self.env = ta.make(f"{game}{variant}-raw", **dict(game_kwargs or {}))
        self.seed = seed
        self.rng = _PrivateGlobalRNG(seed)
        self.turn_timeout_s = turn_timeout_s
        self.started = False
        self.done = False
        self.rewards: dict[int, float] = {}
        self.changed = asyncio.Event()

    def start(self) -> None:
        if not self.started:
            self.started = True
            with self.rng.active():
                self.env.reset(num_players=2, seed=self.seed)

    def finish(self, rewards: dict[int, float] | None = None) -> None:
        if not self.done:
            self.done = True
            if rewards is None:
                with self.rng.active():
                    rewards = dict(self.env.close()[0] or {})
            self.rewards = {int(k): float(v) for k, v in rewards.items()}
        self._notify()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def wait_for(self, seat: int) -> bool:
        """Wait until it is `seat`'s turn or the game is over; False on a turn timeout."""
        while not self.done and self.env.state.current_player_id != seat:
            event = self.changed
            try:
                await asyncio.wait_for(event.wait(), self.turn_timeout_s)
            except asyncio.TimeoutError:
                return False
        return True


class _Seat:
    """One seat of a `_SharedGame` with the (async) string-env face; `forfeit()` ends the game
    with this seat losing (FromText calls it when the seat's reply never reaches the game)."""

    def __init__(self, shared: _SharedGame, seat: int) -> None:
        self.shared = shared
        self.seat = seat

    async def _turn(self) -> tuple[str, float, bool, bool, dict]:
        shared = self.shared
        if not await shared.wait_for(self.seat):
            shared.finish({self.seat: 0.0, 1 - self.seat: 0.0})
            return "", 0.0, True, True, {"turn_timeout": 1.0}
        if shared.done:
            return "", shared.rewards.get(self.seat, 0.0), True, False, {}
        with shared.rng.active():
            _pid, messages = shared.env.get_observation()
        return _format(messages, shared.env, skip_from=self.seat), 0.0, False, False, {}

    async def reset(self, seed: int | None = None) -> tuple[str, dict]:
        self.shared.start()
        obs, *_ = await self._turn()
        return obs, {}

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        shared = self.shared
        with shared.rng.active():
            done, _ = shared.env.step(action)
        if done:
            shared.finish()
        else:
            shared._notify()
        return await self._turn()

    def forfeit(self) -> None:
        if not self.shared.done:
            self.shared.finish({self.seat: -1.0, 1 - self.seat: 1.0})


class TextArenaSelfPlay(EnvGroupBuilder):
    """`num_games` two-player TextArena games, both seats played by the policy being trained.

    `make_envs()` returns 2 * `num_games` token-level envs (seat 0 and seat 1 of game 0, then of
    game 1, ...); all games start from `seed` (so a group compares the policy's play from one
    position). Each env's last step carries its seat's final reward (1 / 0 / -1); a seat whose reply
    never reaches the game loses it. `renderer` is a llm-gym `Renderer`; `**options` are
    `FromText`'s (e.g. `max_context_tokens`)."""

    def __init__(self, game: str, seed: int, renderer: Renderer, *, num_games: int = 1,
                 variant: str = "", game_kwargs: dict[str, Any] | None = None,
                 turn_timeout_s: float = 600.0, **options: Any) -> None:
        entry = TEXTARENA.entries.get(f"textarena/{game}")
        if entry is None or entry.get("players") != 2:
            two = sorted(k.split("/", 1)[1] for k, v in TEXTARENA.entries.items() if v.get("players") == 2)
            raise ValueError(f"self-play needs a registered two-player game, got {game!r}; one of {two}")
        self.game, self.seed, self.renderer = game, seed, renderer
        self.num_games, self.variant, self.game_kwargs = num_games, variant, game_kwargs
        self.turn_timeout_s = turn_timeout_s
        self.options = {"reward_range": (-1.0, 1.0), **options, "isolate_global_rng": False}

    async def make_envs(self) -> Sequence[Env]:
        envs = []
        for _ in range(self.num_games):
            shared = _SharedGame(self.game, self.seed, self.variant, self.game_kwargs, self.turn_timeout_s)
            for seat in (0, 1):
                source = StringEnvSource(renderer=self.renderer, env=_Seat(shared, seat), **self.options)
                envs.append(source.make_env(np.random.default_rng(self.seed)))
        return envs

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        return [(0.0, {"seat": float(i % 2)}) for i in range(len(trajectory_group))]

    def logging_tags(self) -> list[str]:
        return [f"textarena/{self.game}", "self_play"]
