"""Tic-tac-toe (`llm/TicTacToe-v0`) against a scripted opponent, and a self-play group builder.

Board rendering (shown in every prompt): three rows of cells separated by "|"; a free cell shows
its number, a taken one its mark. After X in the centre and O in the corner:

    O|2|3
    4|X|6
    7|8|9

The model moves by replying with the number of a free cell, read through the answer contract
`CELL` (`envs_catalog.games.moves.BoardMove`: an integer, digits or words, optionally after
"cell") under the one answer policy (`llm_gym.grading.POLICY`): the last declaration ("Move: 5",
"My move is cell 5", "Answer: five", `\\boxed{5}`), else the reply's last line stating a number
("5", "I'll take 5"), parsed completely. A read that is not one number ("5 or 9", "5, then 9")
is an illegal move (status "malformed"), and so is a second declared move with a different value
("conflicting"); text outside the declaration is not read. X always moves first; the model is X
when it moves first.

Single-agent rewards (`TicTacToeSource`), given on the last step, all other steps 0:
win +1, draw 0, loss -1. An illegal move (no single number, a number outside 1-9, an occupied
cell, a truncated response or out-of-vocabulary ids) scores `illegal_reward` (-1) and ends the
game (`illegal_move` metric), i.e. it counts as a loss. The opponent is "random" (uniform over
free cells) or "optimal" (minimax over the full game tree, cached; ties broken at random), and
draws its moves from a generator seeded from the source's `rng`, so the same seed replays the
same game.

Context bound: no observation grows past `max_context_tokens` (default 4096; a normal game is a
few hundred tokens). A legal move whose reply would take the next observation past it forfeits
the game: `illegal_reward`, metric `context_exceeded` = 1, `move_status` "context_exceeded" —
scored like an illegal move (not 0), so a long reply is never a way out of a lost position. A
move that ends the game (a win, a draw, the opponent's winning reply) is scored as usual, since
no further observation is built.

Self-play (`TicTacToeSelfPlayGroupBuilder`): `envs_catalog.games.two_player.SelfPlayGroupBuilder`
over `TicTacToeRules` from the empty board, in this id's voice ("I played 5."): each pair of envs
in a group are the X and O players of one shared game. A player's env waits (asyncio) for the
opponent's move inside `initial_observation` / `step`, so `llm_gym.rl.do_group_rollout` with any
`TokenCompleter` plays the game to the end as long as the two rollouts run concurrently (every
strategy in `llm_gym.rl.rollout_strategy` does). Step rewards are 0; `compute_group_rewards`
settles the game: winner +1, loser -1, draw 0 (an illegal move loses). If the other player stops
moving for `move_timeout_s` (e.g. its rollout hit a `RolloutLimits` cap), the game is abandoned:
both 0. `llm/SelfPlayTicTacToe-v0` (`envs_catalog.multiagent.selfplay`) is the same builder in a
neutral voice ("Opponent played 5.").

Held-out split: there is no dataset; split="test" draws the opponent's seeds from a disjoint
stream (odd seeds, train even), so evaluation games are different random games, not different
rules.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from envs_catalog.games.moves import BoardMove, read_integer_move
from envs_catalog.games.two_player import DRAW, SelfPlayGroupBuilder
from llm_gym.authoring import check_choice, check_float, check_int, child_seed
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import Action, ActionExtra, Env, Metrics, Observation, StepResult, StopCondition
from llm_gym.scripted import ScriptedCase

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
EMPTY_BOARD = " " * 9
OPPONENTS = ("random", "optimal")
DEFAULTS: dict[str, Any] = {
    "opponent": "random", "agent_first": "random", "illegal_reward": -1.0,
    "max_context_tokens": 4096,
}
OUTCOMES = ("win", "draw", "loss", "illegal_move", "context_exceeded")
_CELL_WORDS = "zero one two three four five six seven eight nine".split()
# What a move is, in every tic-tac-toe id: the number of a cell (whether it is free is the rules').
CELL = BoardMove(noun="cell", verb="take", low=1, high=9,
                 context="Tic-tac-toe. Free cells show their number.")


# --- rules ---------------------------------------------------------------------------------
def winner(board: str) -> str | None:
    """"X" or "O" if that mark has three in a line, else None."""
    for a, b, c in LINES:
        if board[a] != " " and board[a] == board[b] == board[c]:
            return board[a]
    return None


def free_cells(board: str) -> list[int]:
    """Free cells as 1-based numbers."""
    return [i + 1 for i, c in enumerate(board) if c == " "]


def play(board: str, cell: int, mark: str) -> str:
    i = cell - 1
    return board[:i] + mark + board[i + 1:]


def render_board(board: str) -> str:
    return "\n".join(
        "|".join(board[r * 3 + k] if board[r * 3 + k] != " " else str(r * 3 + k + 1) for k in range(3))
        for r in range(3)
    )


def other(mark: str) -> str:
    return "O" if mark == "X" else "X"


@functools.cache
def _value(board: str, mark: str) -> int:
    """Game value for `mark`, who is to move: +1 win, 0 draw, -1 loss under perfect play."""
    if winner(board) is not None:
        return -1  # the previous mover won
    cells = free_cells(board)
    if not cells:
        return 0
    return max(-_value(play(board, c, mark), other(mark)) for c in cells)


@functools.cache
def optimal_moves(board: str, mark: str) -> tuple[int, ...]:
    """All cells that keep the best achievable game value for `mark` (cached minimax)."""
    cells = free_cells(board)
    scores = {c: -_value(play(board, c, mark), other(mark)) for c in cells}
    best = max(scores.values())
    return tuple(c for c in cells if scores[c] == best)


def read_cell(text: str, board: str) -> tuple[int | None, str]:
    """(cell, "ok") for a reply naming one free cell of `board`, else (None, reason): the
    contract's status ("malformed", "conflicting", "no_answer", ...; `read_integer_move`),
    "out_of_range" or "occupied"."""
    cell, status = read_integer_move(CELL, text)
    if cell is None:
        return None, status
    if not 1 <= cell <= 9:
        return None, "out_of_range"
    if board[cell - 1] != " ":
        return None, "occupied"
    return cell, "ok"


def parse_move(renderer: Renderer, action: Sequence[int], board: str) -> tuple[int | None, str, str]:
    """(cell or None if illegal, reason, response text) for an action on `board`. Special tokens
    inside the reply read as line breaks, so "5<|pad|>9" is never cell 59."""
    message, termination = renderer.parse_response(action)
    text = str(message.get("content", ""))
    if not termination.is_clean:
        # "length": readable ids but no clean end (the sampler stops at the first stop, so in
        # practice a truncated reply); "malformed": ids outside the vocabulary.
        return None, "malformed" if renderer.has_invalid_ids(action) else "length", text
    cell, status = read_cell(text, board)
    return cell, status, text


def minimax_move(board: str, mark: str) -> int:
    """The gold player: the first (lowest) cell that keeps `mark`'s minimax value."""
    return optimal_moves(board, mark)[0]


def intro_text(mark: str, board: str, last_move: int | None, *, first_person: bool = True) -> str:
    """The first prompt of the player of `mark` (`last_move`: the opponent's opening, or None).
    `first_person`: the env speaks as the opponent ("I am O", "I played 5"), else of it ("the
    opponent is O", "Opponent played 5")."""
    them = "I am" if first_person else "the opponent is"
    lead = f"{'I' if first_person else 'Opponent'} played {last_move}.\n" if last_move is not None else ""
    return (
        f"Tic-tac-toe. You are {mark}, {them} {other(mark)}. Free cells show their number.\n"
        f"{lead}{render_board(board)}\n{CELL.instruction()}"
    )


def update_text(board: str, last_move: int, *, first_person: bool = True) -> str:
    """The message after the opponent's `last_move` (voice as in `intro_text`)."""
    return f"{'I' if first_person else 'Opponent'} played {last_move}.\n{render_board(board)}\nYour move."


_MARKS = ("X", "O")


class TicTacToeRules:
    """Tic-tac-toe as `envs_catalog.games.two_player.TwoPlayerRules`: the state is the
    9-character board string; seat 0 is X (moves first), seat 1 is O; moves are cells 1-9, read
    by `read_cell`. `first_person` picks the prompts' voice (see `intro_text`)."""

    opponents = OPPONENTS

    def __init__(self, first_person: bool = False) -> None:
        self.first_person = first_person

    def to_move(self, board: str) -> int:
        return 0 if board.count("X") == board.count("O") else 1

    def legal_moves(self, board: str) -> list[int]:
        return free_cells(board)

    def apply(self, board: str, cell: int) -> str:
        if board[cell - 1] != " ":
            raise ValueError(f"cell {cell} is taken")
        return play(board, cell, _MARKS[self.to_move(board)])

    def result(self, board: str) -> int | str | None:
        mark = winner(board)
        if mark is not None:
            return _MARKS.index(mark)
        return None if free_cells(board) else DRAW

    def max_moves(self, board: str) -> int:
        return len(free_cells(board))

    def answer_contract(self, board: str) -> BoardMove:
        return CELL

    def render(self, board: str) -> str:
        return render_board(board)

    def parse_move(self, text: str, board: str) -> tuple[int | None, str]:
        return read_cell(text, board)

    def intro(self, board: str, seat: int, last_move: int | None) -> str:
        return intro_text(_MARKS[seat], board, last_move, first_person=self.first_person)

    def update(self, board: str, seat: int, last_move: int) -> str:
        return update_text(board, last_move, first_person=self.first_person)

    def opponent_move(self, board: str, rng: random.Random, opponent: str) -> int:
        """A random free cell, or (opponent "optimal") a random minimax-optimal one."""
        mark = _MARKS[self.to_move(board)]
        cells = optimal_moves(board, mark) if opponent == "optimal" else free_cells(board)
        return cells[rng.randrange(len(cells))]


_RULES = TicTacToeRules(first_person=True)


# --- single agent vs a scripted opponent -------------------------------------------------------
class TicTacToeEnv(Env):
    """One game vs a scripted opponent. Final-step metrics: one-hot `win`, `draw`, `loss`,
    `illegal_move`, `context_exceeded`, and `moves`; other steps: the continuation's one-hot
    mode (`continuation/extended`, `continuation/appended`, `continuation/new_datum`)."""

    def __init__(
        self, renderer: Renderer, *, agent_first: bool, opponent: str, seed: int,
        illegal_reward: float = -1.0, continuation: Continuation | None = None,
        max_context_tokens: int = DEFAULTS["max_context_tokens"],
    ) -> None:
        self.renderer = renderer
        self.agent_mark = "X" if agent_first else "O"
        self.opponent = opponent
        self.illegal_reward = illegal_reward
        self.max_context_tokens = max_context_tokens
        self.continuation = continuation or Continuation(renderer)
        self._rng = random.Random(seed)
        self.board = EMPTY_BOARD
        self._ob: ModelInput | None = None
        self._messages: list[Message] = []  # the conversation so far, for the continuation
        self._moves = 0
        self._done = False

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    @property
    def answer_contract(self) -> BoardMove:
        """What a move is (`CELL`); whether the cell is free is checked after reading."""
        return CELL

    def _opponent_move(self) -> int:
        cell = _RULES.opponent_move(self.board, self._rng, self.opponent)
        self.board = _RULES.apply(self.board, cell)
        return cell

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        first = self._opponent_move() if self.agent_mark == "O" else None
        self._messages = [Message(role="user", content=intro_text(self.agent_mark, self.board, first))]
        self._ob = self.continuation.first(self._messages)
        return self._ob, self.stop_condition

    def _end(self, reward: float, outcome: str, logs: dict) -> StepResult:
        self._done = True
        metrics: Metrics = {k: float(outcome == k) for k in OUTCOMES}
        metrics["moves"] = self._moves
        logs["board"] = render_board(self.board)
        return StepResult(reward, True, ModelInput.empty(), self.stop_condition, metrics, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self._done:
            raise RuntimeError("TicTacToeEnv: call initial_observation() first; envs are single-use")
        cell, reason, text = parse_move(self.renderer, action, self.board)
        logs: dict[str, Any] = {"response": text, "move_status": reason}
        if cell is None:
            return self._end(self.illegal_reward, "illegal_move", logs)
        self._moves += 1
        self.board = play(self.board, cell, self.agent_mark)
        if winner(self.board):
            return self._end(1.0, "win", logs)
        if not free_cells(self.board):
            return self._end(0.0, "draw", logs)
        reply = self._opponent_move()
        if winner(self.board):
            return self._end(-1.0, "loss", logs)
        if not free_cells(self.board):
            return self._end(0.0, "draw", logs)
        # The game goes on: the next observation must stay under the cap. Checked before the
        # action is appended (a huge reply costs no copy), then on the built observation.
        if self._ob.length + len(action) >= self.max_context_tokens:
            return self._forfeit(logs)
        messages = self._messages + [
            {"role": "assistant", "content": text},
            {"role": "user", "content": update_text(self.board, reply)},
        ]
        turn = self.continuation.next(self._ob, action, messages)
        if turn.observation.length > self.max_context_tokens:
            return self._forfeit(logs)
        self._messages = messages
        self._ob = turn.observation
        return StepResult(0.0, False, self._ob, self.stop_condition, turn.metrics, logs)

    def _forfeit(self, logs: dict) -> StepResult:
        logs["move_status"] = "context_exceeded"
        return self._end(self.illegal_reward, "context_exceeded", logs)


class TicTacToeSource(EnvSource):
    """Games for `llm/TicTacToe-v0`; knobs in `DEFAULTS` (see the card)."""

    card = EnvCard(
        id="llm/TicTacToe-v0",
        family="games",
        description=(
            "Tic-tac-toe against a scripted opponent (random or minimax-optimal). The board is "
            "three rows like 'X|2|3' where free cells show their number; the model replies with "
            "the number of a free cell (digits or words, optionally after 'cell'), read under the "
            "one answer policy (llm_gym.grading.POLICY): the last 'Move:'/'Answer:' declaration, "
            "\\boxed{}, else the last line stating a number ('I'll take 5'), parsed completely, so "
            "'5 or 9' is an illegal move, and so is a second declared move with another value. "
            "Multi-turn with the prefix property. A self-play group "
            "builder (TicTacToeSelfPlayGroupBuilder) pits two rollouts of the policy against "
            "each other in one shared game."
        ),
        multi_turn=True,
        reward_range=(-1.0, 1.0),
        reward_meaning=(
            "On the last step: win +1, draw 0, loss -1; an illegal move (no single number read, "
            "two declared moves that differ, a cell outside 1-9 or taken) scores illegal_reward "
            "(-1) and ends the game, and so does a reply that would "
            "take the next observation past max_context_tokens (metric context_exceeded). "
            "Self-play: group reward winner +1, loser -1, draw 0."
        ),
        difficulty_knobs={
            "opponent": "'random' (uniform legal moves) or 'optimal' (minimax; cannot be beaten) "
            "(default 'random')",
            "agent_first": "True (model is X and starts), False (model is O) or 'random' "
            "(default 'random')",
            "illegal_reward": "reward of an illegal move, -1..0 (default -1.0)",
            "max_context_tokens": "no observation grows past this many tokens: a reply that "
            "would pass it forfeits the game (scored illegal_reward, stop context_exceeded), "
            "256-1000000 (default 4096)",
        },
        answer_contract="cell number 1-9 (BoardMove, an IntegerAnswer labelled 'answer'/'move'/'cell'); "
        "the prompt asks 'Reply with the number of the cell you take.'",
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": intro_text("X", EMPTY_BOARD, None)},
            {"role": "assistant", "content": "5"},
            {"role": "user", "content": update_text(play(play(EMPTY_BOARD, 5, "X"), 1, "O"), 1)},
            {"role": "assistant", "content": "9"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.opponent = check_choice("opponent", own["opponent"], OPPONENTS)
        self.agent_first = check_choice("agent_first", own["agent_first"], (True, False, "random"))
        self.illegal_reward = check_float("illegal_reward", own["illegal_reward"], -1.0, 0.0)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 256, 1_000_000
        )
        self.continuation = Continuation(renderer)

    def make_env(self, rng: np.random.Generator) -> TicTacToeEnv:
        agent_first = bool(rng.integers(2)) if self.agent_first == "random" else self.agent_first
        seed = 2 * (child_seed(rng) // 2) + (self.split == "test")
        return TicTacToeEnv(
            self.renderer, agent_first=agent_first, opponent=self.opponent, seed=seed,
            illegal_reward=self.illegal_reward, continuation=self.continuation,
            max_context_tokens=self.max_context_tokens,
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the minimax player, whose range is stated per opponent: it draws every game
        against the optimal opponent ([0, 0]: perfect play draws, so no player can do better) and
        never loses to the random one ([0, 1]: a random opponent can still stumble into a draw).
        Adversarial, each an illegal move on the first bad reply under the one answer policy,
        so the return is exactly illegal_reward: an occupied cell, cells 0 and 10, a backup move
        declared after the move, a hedge in digits and in words, a correction on the read line,
        two markers, a move in prose with another number, every free cell at once, no move, an
        empty reply."""
        bad = self.illegal_reward

        def two_free(env: TicTacToeEnv) -> tuple[int, int]:
            cells = free_cells(env.board)
            return cells[0], cells[-1] if len(cells) > 1 else cells[0] % 9 + 1

        def occupied(env: TicTacToeEnv, ob: str) -> str:
            taken = [i + 1 for i, c in enumerate(env.board) if c != " "]
            return str(taken[0]) if taken else "5"  # X on an empty board: 5, then a taken cell

        def two(fmt: str) -> Any:
            return lambda env, ob: fmt.format(*two_free(env))

        def words(env: TicTacToeEnv, ob: str) -> str:
            a, b = two_free(env)
            return f"{_CELL_WORDS[a]} or {_CELL_WORDS[b]}"

        def case(name: str, reply: Any) -> ScriptedCase:
            return ScriptedCase(name, "adversarial", reply, bad, bad)

        def gold(env: TicTacToeEnv, ob: str) -> str:
            return str(minimax_move(env.board, env.agent_mark))

        return [
            ScriptedCase("minimax vs the optimal opponent", "gold", gold, 0.0, 0.0,
                         knobs={"opponent": "optimal"},
                         note="perfect play draws: 0 is the best any player can guarantee"),
            ScriptedCase("minimax vs the random opponent", "gold", gold, 0.0, 1.0,
                         knobs={"opponent": "random"},
                         note="never loses; wins most games, but a random opponent may draw"),
            case("occupied cell", occupied),
            case("cell 0", lambda env, ob: "0"),
            case("cell 10", lambda env, ob: "10"),
            case("backup move declared", two("Move: {}\nMy backup move is {}.")),
            case("hedge", two("{} or {}")),
            case("hedge in words", words),
            case("correction", two("{}. Actually {}.")),
            case("two markers", two("My move: {}\nMy move: {}")),
            case("move in prose with another number", two("Cell {} is weak, so I take {}.")),
            case("every free cell", lambda env, ob: " ".join(map(str, free_cells(env.board)))),
            case("no move", lambda env, ob: "I am not sure."),
            case("empty reply", lambda env, ob: ""),
        ]

    def selfplay_group_builder(self, num_games: int = 1,
                               move_timeout_s: float = 300.0) -> "TicTacToeSelfPlayGroupBuilder":
        """A self-play group of `num_games` games (2 envs each) with this source's renderer."""
        return TicTacToeSelfPlayGroupBuilder(self.renderer, num_games=num_games,
                                             move_timeout_s=move_timeout_s)


# --- self-play -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TicTacToeSelfPlayGroupBuilder(SelfPlayGroupBuilder):
    """`SelfPlayGroupBuilder` of tic-tac-toe from the empty board in this id's voice: envs come in
    (X, O) pairs, envs[2k] is X of game k, envs[2k+1] its O. Picklable."""

    rules: Any = field(default_factory=lambda: TicTacToeRules(first_person=True))
    initial_state: Any = EMPTY_BOARD
