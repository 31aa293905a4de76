"""Connect Four (`llm/ConnectFour-v0`) against a scripted opponent.

Board rendering (in every prompt): the column numbers, then the rows from top to bottom, "." for a
free cell; X moves first. After X in column 4 and O in column 3:

    1 2 3 4 5 6 7
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . O X . . .

The model replies with the number of a column that is not full, read through the rules' answer
contract (`ConnectFourRules.contract`, an `envs_catalog.games.moves.BoardMove`: an integer, digits
or words, optionally after "column") under the one answer policy (`llm_gym.grading.POLICY`): the
last declaration ("Column: 4", "My move is column 4", `\\boxed{4}`), else the reply's last line
stating a number ("4", "I'll play 4"), parsed completely. A read that is not one number ("3 or
4", "1, 2, 3, 4") is an illegal move (status "malformed"), and so is a second declared move with
a different value ("conflicting"); text outside the declaration is not read. Four in a row
across, down or diagonally wins.

Rewards (`envs_catalog.games.two_player.VersusEnv`), on the last step: win +1, draw 0, loss
-1; an illegal move (no single number, a column outside 1..cols, a full column, a truncated,
over-long or out-of-vocabulary reply) scores `illegal_reward` (-1) and ends the game; reaching
`max_turns` (default: the whole game) unfinished scores 0. Opponents: "random" (uniform over
open columns), "win_block" (one ply: takes a winning column, else blocks the model's immediate
win, else random) and "minimax" (negamax with alpha-beta to `depth` plies over a threat-count
heuristic, ties broken at random). The opponent draws from a generator seeded from the source's
`rng`, so the same seed replays the same game.

Held-out split: there is no dataset; split="test" seeds the opponent from a disjoint stream (odd
seeds, train even), so evaluation games are different games, not different rules.

Positions are bitboards: column c owns bits c*(rows+1) .. c*(rows+1)+rows-1 (bottom up) plus one
empty guard bit, so a four-in-a-row test is four shifts and ands.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs_catalog.games.moves import BoardMove, read_integer_move
from envs_catalog.games.two_player import DRAW, GameSource
from llm_gym.authoring import check_int
from llm_gym.env_source import EnvCard

OPPONENTS = ("random", "win_block", "minimax")
MARKS = ("X", "O")
_WIN = 10_000


@dataclass(frozen=True)
class C4State:
    """A position: each seat's pieces and all pieces as bitboards, the number of moves made and
    the last column played (1-based, None at the start)."""

    pieces: tuple[int, int]
    mask: int
    moves: int
    last: int | None = None


class ConnectFourRules:
    """The `TwoPlayerRules` of Connect Four on a `rows` x `cols` board (four to win); `depth` is
    the "minimax" opponent's search depth."""

    opponents = OPPONENTS

    def __init__(self, rows: int = 6, cols: int = 7, depth: int = 3) -> None:
        self.rows, self.cols, self.depth = rows, cols, depth
        self.h = rows + 1
        self.cells = rows * cols
        self._bottom = [1 << (c * self.h) for c in range(cols)]
        self._top = [1 << (c * self.h + rows - 1) for c in range(cols)]
        self._column = [((1 << rows) - 1) << (c * self.h) for c in range(cols)]
        self._board = sum(self._column)
        # search order: centre columns first (better pruning, and a sensible tie order)
        self._order = sorted(range(cols), key=lambda c: (abs(2 * c - (cols - 1)), c))
        self._centre = self._column[cols // 2] | (self._column[(cols - 1) // 2])
        # What a move is: a column number (whether the column exists and is open is parse_move's).
        self.contract = BoardMove(noun="column", verb="play", low=1, high=cols, show_range=True,
                                  context="Connect Four. A piece drops to the lowest free cell of "
                                  "its column; four in a row wins.")

    def __getstate__(self) -> dict[str, Any]:
        return {"rows": self.rows, "cols": self.cols, "depth": self.depth}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)

    # --- rules ---------------------------------------------------------------------------------
    def initial(self) -> C4State:
        return C4State((0, 0), 0, 0)

    def to_move(self, state: C4State) -> int:
        return state.moves % 2

    def open_columns(self, mask: int) -> list[int]:
        """Columns (0-based) that are not full."""
        return [c for c in range(self.cols) if not mask & self._top[c]]

    def legal_moves(self, state: C4State) -> list[int]:
        return [c + 1 for c in self.open_columns(state.mask)]

    def _drop_bit(self, mask: int, c: int) -> int:
        return (mask + self._bottom[c]) & self._column[c]

    def wins(self, p: int) -> bool:
        """Whether bitboard `p` holds four in a row."""
        for s in (1, self.h, self.h - 1, self.h + 1):
            m = p & (p >> s)
            if m & (m >> (2 * s)):
                return True
        return False

    def apply(self, state: C4State, move: int) -> C4State:
        c = move - 1
        if not 0 <= c < self.cols or state.mask & self._top[c]:
            raise ValueError(f"column {move} is not a legal move")
        bit = self._drop_bit(state.mask, c)
        seat = state.moves % 2
        pieces = list(state.pieces)
        pieces[seat] |= bit
        return C4State((pieces[0], pieces[1]), state.mask | bit, state.moves + 1, move)

    def result(self, state: C4State) -> int | str | None:
        if state.moves and self.wins(state.pieces[(state.moves - 1) % 2]):
            return (state.moves - 1) % 2
        if state.moves >= self.cells:
            return DRAW
        return None

    def max_moves(self, state: C4State) -> int:
        return self.cells - state.moves

    def answer_contract(self, state: C4State) -> BoardMove:
        return self.contract

    # --- text ----------------------------------------------------------------------------------
    def render(self, state: C4State) -> str:
        lines = [" ".join(str(c + 1) for c in range(self.cols))]
        for r in range(self.rows - 1, -1, -1):
            row = []
            for c in range(self.cols):
                bit = 1 << (c * self.h + r)
                row.append("X" if state.pieces[0] & bit else "O" if state.pieces[1] & bit else ".")
            lines.append(" ".join(row))
        return "\n".join(lines)

    def parse_move(self, text: str, state: C4State) -> tuple[int | None, str]:
        column, status = read_integer_move(self.contract, text)
        if column is None:
            return None, status
        if not 1 <= column <= self.cols:
            return None, "out_of_range"
        if state.mask & self._top[column - 1]:
            return None, "full_column"
        return column, "ok"

    def intro(self, state: C4State, seat: int, last_move: int | None) -> str:
        lead = f"Opponent played column {last_move}.\n" if last_move is not None else ""
        return (
            f"Connect Four, {self.cols} columns x {self.rows} rows. You are {MARKS[seat]}, the "
            f"opponent is {MARKS[1 - seat]}. A piece drops to the lowest free cell of its column; "
            f"four in a row (across, down or diagonal) wins.\n{lead}{self.render(state)}\n"
            f"{self.contract.instruction()}"
        )

    def update(self, state: C4State, seat: int, last_move: int) -> str:
        return f"Opponent played column {last_move}.\n{self.render(state)}\nYour move."

    # --- scripted players ----------------------------------------------------------------------
    def threats(self, p: int, mask: int) -> int:
        """Free cells (anywhere, not only playable now) that would complete four for `p`."""
        h = self.h
        r = (p << 1) & (p << 2) & (p << 3)
        for s in (h, h - 1, h + 1):
            p2 = (p << s) & (p << (2 * s))
            r |= p2 & (p << (3 * s))
            r |= p2 & (p >> s)
            p2 = (p >> s) & (p >> (2 * s))
            r |= p2 & (p << s)
            r |= p2 & (p >> (3 * s))
        return r & (self._board ^ mask)

    def _heuristic(self, me: int, opp: int, mask: int) -> int:
        return (4 * (self.threats(me, mask).bit_count() - self.threats(opp, mask).bit_count())
                + (me & self._centre).bit_count() - (opp & self._centre).bit_count())

    def _negamax(self, me: int, opp: int, mask: int, moves: int, depth: int, alpha: int, beta: int) -> int:
        """Value for `me` (to move) searched `depth` plies; wins found sooner score higher."""
        if moves >= self.cells:
            return 0
        playable = [c for c in self._order if not mask & self._top[c]]
        for c in playable:
            if self.wins(me | self._drop_bit(mask, c)):
                return _WIN + depth
        if depth <= 1:
            return self._heuristic(me, opp, mask)
        best = -_WIN * 2
        for c in playable:
            bit = self._drop_bit(mask, c)
            score = -self._negamax(opp, me | bit, mask | bit, moves + 1, depth - 1, -beta, -alpha)
            if score > best:
                best = score
            if best > alpha:
                alpha = best
            if alpha >= beta:
                break
        return best

    def best_moves(self, state: C4State, depth: int) -> list[int]:
        """The columns (1-based, centre first) of best negamax value at `depth` plies for the seat
        to move (each root move searched with a full window, so ties are exact)."""
        seat = state.moves % 2
        me, opp, mask = state.pieces[seat], state.pieces[1 - seat], state.mask
        scores: dict[int, int] = {}
        for c in self._order:
            if mask & self._top[c]:
                continue
            bit = self._drop_bit(mask, c)
            if self.wins(me | bit):
                scores[c] = _WIN * 2
            elif depth <= 1:
                scores[c] = self._heuristic(me | bit, opp, mask | bit)
            else:
                scores[c] = -self._negamax(opp, me | bit, mask | bit, state.moves + 1, depth - 1,
                                           -_WIN * 3, _WIN * 3)
        best = max(scores.values())
        return [c + 1 for c, v in scores.items() if v == best]

    def win_block_moves(self, state: C4State) -> list[int]:
        """Winning columns, else columns that block the other seat's immediate win, else all."""
        seat = state.moves % 2
        me, opp, mask = state.pieces[seat], state.pieces[1 - seat], state.mask
        cols = self.open_columns(mask)
        wins = [c for c in cols if self.wins(me | self._drop_bit(mask, c))]
        if wins:
            return [c + 1 for c in wins]
        blocks = [c for c in cols if self.wins(opp | self._drop_bit(mask, c))]
        return [c + 1 for c in (blocks or cols)]

    def opponent_move(self, state: C4State, rng: random.Random, opponent: str) -> int:
        if opponent == "minimax":
            moves = self.best_moves(state, self.depth)
        elif opponent == "win_block":
            moves = self.win_block_moves(state)
        else:
            moves = self.legal_moves(state)
        return moves[rng.randrange(len(moves))]


def strong_move(env: Any, _ob: str = "") -> str:
    """The gold player: the first (centre-most) best column of a 4-ply negamax."""
    return str(env.rules.best_moves(env.state, 4)[0])


class ConnectFourSource(GameSource):
    """Games for `llm/ConnectFour-v0`; knobs in the card."""

    OPPONENTS = OPPONENTS
    GAME_DEFAULTS: dict[str, Any] = {"rows": 6, "cols": 7, "depth": 3}
    rules: ConnectFourRules  # what make_rules() returns
    card = EnvCard(
        id="llm/ConnectFour-v0",
        family="games",
        description=(
            "Connect Four (default 7 columns x 6 rows) against a scripted opponent: random, "
            "one-ply win-or-block, or depth-limited minimax. The board is shown as rows of "
            "'X', 'O' and '.' under the column numbers; the model replies with the number of "
            "the column it plays (digits or words, optionally after 'column'), read under the one "
            "answer policy (llm_gym.grading.POLICY): the last 'Move:'/'Column:'/'Answer:' "
            "declaration, \\boxed{}, else the last line stating a number ('I'll play 4'), parsed "
            "completely, so '3 or 4' is an illegal move, as are a second declared move with "
            "another value, a full or out-of-range column and a reply over 256 characters. "
            "Multi-turn with the prefix property; "
            "the self-play version is llm/SelfPlayConnectFour-v0."
        ),
        multi_turn=True,
        reward_range=(-1.0, 1.0),
        reward_meaning=(
            "On the last step: win +1, draw 0, loss -1; an illegal move (no single number read, "
            "two declared moves that differ, a full or missing column, a reply over 256 "
            "characters) scores illegal_reward (-1) and ends the game; a game cut by "
            "max_turns scores 0."
        ),
        difficulty_knobs={
            "opponent": "'random' (uniform over open columns), 'win_block' (wins if it can, else "
            "blocks an immediate win, else random) or 'minimax' (negamax to `depth` plies) "
            "(default 'random')",
            "depth": "search depth of the 'minimax' opponent, 1-5 plies (default 3)",
            "rows": "board rows, 4-9 (default 6)",
            "cols": "board columns, 4-9 (default 7)",
            "agent_first": "True (model is X and starts), False (model is O) or 'random' "
            "(default 'random')",
            "illegal_reward": "reward of an illegal move, -1..0 (default -1.0)",
            "max_turns": "model moves before the game is cut (scored 0), 1 to ceil(rows*cols/2) "
            "(default the whole game, 21 on 7x6)",
        },
        answer_contract="column number 1-cols (BoardMove, an IntegerAnswer labelled "
        "'answer'/'move'/'column'); the prompt asks 'Reply with the number of the column (1-7) you play.'",
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": ConnectFourRules().intro(C4State((0, 0), 0, 0), 0, None)},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": ConnectFourRules().update(
                ConnectFourRules().apply(ConnectFourRules().apply(C4State((0, 0), 0, 0), 4), 3), 0, 3)},
            {"role": "assistant", "content": "4"},
        ],
    )

    def _set_game_knobs(self, own: dict[str, Any]) -> None:
        self.rows = check_int("rows", own["rows"], 4, 9)
        self.cols = check_int("cols", own["cols"], 4, 9)
        self.depth = check_int("depth", own["depth"], 1, 5)

    def make_rules(self) -> ConnectFourRules:
        return ConnectFourRules(self.rows, self.cols, self.depth)

    def initial_state(self, rng: np.random.Generator) -> C4State:
        return self.rules.initial()

    def max_agent_turns(self) -> int:
        return (self.rows * self.cols + 1) // 2

    def wide_state(self) -> tuple[C4State, int]:
        return self.rules.initial(), self.cols  # every board renders to the same length

    def scripted_cases(self) -> list:
        from llm_gym.scripted import ScriptedCase

        bad = self.illegal_reward
        cols = self.cols

        def fill_a_column(env: Any, _ob: str) -> str:
            # play a full column once one exists; until then the fullest open column that does
            # not win (so the game cannot end in the model's favour first)
            rules, state = env.rules, env.state
            full = [c for c in range(1, cols + 1) if c not in rules.legal_moves(state)]
            if full:
                return str(full[0])
            seat = rules.to_move(state)
            counts = {c: sum(1 for r in range(rules.rows) if state.mask >> ((c - 1) * rules.h + r) & 1)
                      for c in rules.legal_moves(state)}
            safe = [c for c in counts if not rules.wins(state.pieces[seat] | rules._drop_bit(state.mask, c - 1))]
            return str(max(safe or counts, key=lambda c: (counts[c], -c)))

        return [
            ScriptedCase("4-ply negamax vs random", "gold", strong_move, 1.0, 1.0,
                         note="empirical: won every game of seeds 0-399 on both splits, either side; "
                         "a random opponent could in principle defend"),
            ScriptedCase("column 0", "adversarial", lambda env, ob: "0", -1.0, bad),
            ScriptedCase("column past the edge", "adversarial", lambda env, ob: str(cols + 1), -1.0, bad),
            ScriptedCase("full column", "adversarial", fill_a_column, -1.0, bad,
                         note="stacks one column until it is full, then plays it"),
            ScriptedCase("backup move declared", "adversarial",
                         lambda env, ob: "Move: 3\nMy backup move is 4.", -1.0, bad),
            ScriptedCase("hedge", "adversarial", lambda env, ob: "3 or 4", -1.0, bad),
            ScriptedCase("two markers", "adversarial", lambda env, ob: "Move: 4\nMove: 5", -1.0, bad),
            ScriptedCase("move in prose with another number", "adversarial",
                         lambda env, ob: "Column 2 looks weak, so I drop my piece in column 4.", -1.0, bad),
            ScriptedCase("list of columns", "adversarial", lambda env, ob: "1, 2, 3, 4", -1.0, bad),
            ScriptedCase("no move", "adversarial", lambda env, ob: "I am not sure.", -1.0, bad),
            ScriptedCase("empty reply", "adversarial", lambda env, ob: "", -1.0, bad),
        ]
