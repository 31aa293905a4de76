"""Self-play board games: `llm/SelfPlayTicTacToe-v0`, `llm/SelfPlayConnectFour-v0`, `llm/SelfPlayNim-v0`.

Training is self-play: `source.selfplay_group_builder(seed, num_games)` (or a `SelfPlayDataset`
of them, both in `envs_catalog.games.two_player`) gives an `EnvGroupBuilder` whose envs are
the two seats of shared games, both played by the policy; `compute_group_rewards` scores each game
zero-sum (win +1, loss -1, draw 0, an illegal move loses; an abandoned game 0). The Gymnasium face
(`gym.make(id)`: one env at a time, nobody to pair it with) plays one seat against a scripted
opponent instead — the fallback, with the same prompts, reader and rewards as the game's own id
(`opponent` knob) — so `check_env`, the fuzz tests and evaluation runs work on a single env.

Each game brings its rules object from `envs_catalog.games`: `TicTacToeRules` (in its neutral
voice, "Opponent played 5."), `ConnectFourRules`, `NimRules`, and with it the answer contract a
move is read through under the one answer policy (`llm_gym.grading.POLICY`; both seat envs and
the fallback expose it as `answer_contract`); this module only adds the self-play ids' cards and
defaults.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs_catalog.games import tictactoe as ttt
from envs_catalog.games.connect_four import ConnectFourSource
from envs_catalog.games.nim import NimSource
from envs_catalog.games.tictactoe import TicTacToeRules
from envs_catalog.games.two_player import GameSource
from llm_gym.env_source import EnvCard


def _minimax_cell(env: Any, _ob: str = "") -> str:
    board = env.state
    return str(ttt.minimax_move(board, "XO"[TicTacToeRules().to_move(board)]))


_SELFPLAY_NOTE = (
    " Self-play: source.selfplay_group_builder(seed, num_games) pairs two rollouts of the policy "
    "in each shared game (envs 2k and 2k+1 are seats 0 and 1; each seat waits for the other's "
    "move, every wait bounded); gym.make plays one seat against the scripted `opponent` "
    "(the fallback)."
)
_SELFPLAY_REWARD = (
    " Self-play groups: step rewards 0, group reward winner +1, loser -1 (an illegal move "
    "loses), draw or abandoned game 0 — zero-sum per game."
)


class SelfPlayTicTacToeSource(GameSource):
    """`llm/SelfPlayTicTacToe-v0`: tic-tac-toe self-play; the fallback opponent is random or
    minimax-optimal."""

    OPPONENTS = ("random", "optimal")
    card = EnvCard(
        id="llm/SelfPlayTicTacToe-v0",
        family="multiagent",
        description=(
            "Tic-tac-toe self-play: both seats of each game are the policy being trained, "
            "through a group builder with a move-by-move coordinator. Board rows like 'X|2|3' "
            "(free cells show their number); the reply is one free cell number (digits or words, "
            "optionally after 'cell'), read under the one answer policy (llm_gym.grading.POLICY): "
            "the last 'Move:'/'Answer:' declaration, else the last line stating a number, parsed "
            "completely, so '3 or 7' or a second declared move with another value is an illegal "
            "move, which loses." + _SELFPLAY_NOTE
        ),
        multi_turn=True,
        reward_range=(-1.0, 1.0),
        reward_meaning=(
            "Fallback (gym.make) on the last step: win +1, draw 0, loss -1, illegal move "
            "illegal_reward (-1) and the game ends." + _SELFPLAY_REWARD
        ),
        difficulty_knobs={
            "opponent": "fallback opponent: 'random' or 'optimal' (minimax) (default 'random')",
            "agent_first": "fallback seat: True (X, starts), False (O) or 'random' (default 'random')",
            "illegal_reward": "fallback reward of an illegal move, -1..0 (default -1.0)",
            "max_turns": "fallback model moves before the game is cut (scored 0), 1-5 (default 5)",
        },
        answer_contract=ttt.TicTacToeSource.card.answer_contract,
        data_source="generated on the fly (no dataset); rules from envs_catalog.games.tictactoe",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": TicTacToeRules().intro(ttt.EMPTY_BOARD, 0, None)},
            {"role": "assistant", "content": "5"},
            {"role": "user", "content": TicTacToeRules().update("O   X    ", 0, 1)},
            {"role": "assistant", "content": "9"},
        ],
    )

    def make_rules(self) -> TicTacToeRules:
        return TicTacToeRules()

    def initial_state(self, rng: np.random.Generator) -> str:
        return ttt.EMPTY_BOARD

    def max_agent_turns(self) -> int:
        return 5

    def wide_state(self) -> tuple[str, int]:
        return ttt.EMPTY_BOARD, 9

    def scripted_cases(self) -> list:
        from llm_gym.scripted import ScriptedCase

        bad = self.illegal_reward

        def occupied(env: Any, _ob: str) -> str:
            taken = [i + 1 for i, c in enumerate(env.state) if c != " "]
            return str(taken[0]) if taken else "5"  # first move: 5, then an occupied cell

        return [
            ScriptedCase("minimax vs optimal draws", "gold", _minimax_cell, 0.0, 0.0,
                         knobs={"opponent": "optimal"}, note="perfect play draws; 0 is the best"),
            ScriptedCase("minimax vs random never loses", "gold", _minimax_cell, 0.0, 1.0,
                         note="a random opponent can force no loss but can hold a draw"),
            ScriptedCase("occupied cell", "adversarial", occupied, -1.0, bad),
            ScriptedCase("cell 10", "adversarial", lambda env, ob: "10", -1.0, bad),
            ScriptedCase("hedge", "adversarial", lambda env, ob: "3 or 7", -1.0, bad),
            ScriptedCase("two declared moves", "adversarial", lambda env, ob: "Move: 3\nMove: 7",
                         -1.0, bad),
            ScriptedCase("empty reply", "adversarial", lambda env, ob: "", -1.0, bad),
        ]


def _selfplay_card(base: EnvCard, id_: str, game: str, knobs: dict[str, str] | None = None) -> EnvCard:
    return EnvCard(
        id=id_,
        family="multiagent",
        description=(
            f"{game} self-play: both seats of each game are the policy being trained, through a "
            f"group builder with a move-by-move coordinator; same board, prompts, answer contract "
            f"(read under the one answer policy, llm_gym.grading.POLICY) and knobs as {base.id}."
            + _SELFPLAY_NOTE
        ),
        multi_turn=True,
        reward_range=base.reward_range,
        reward_meaning="Fallback (gym.make): " + base.reward_meaning + _SELFPLAY_REWARD,
        difficulty_knobs={
            k: ("fallback opponent: " + v if k == "opponent" else v)
            for k, v in base.difficulty_knobs.items()
        } | (knobs or {}),
        answer_contract=base.answer_contract,
        data_source=base.data_source,
        license=base.license,
        example_episode=base.example_episode,
    )


class SelfPlayConnectFourSource(ConnectFourSource):
    """`llm/SelfPlayConnectFour-v0`: Connect Four self-play (knobs of `llm/ConnectFour-v0`)."""

    card = _selfplay_card(ConnectFourSource.card, "llm/SelfPlayConnectFour-v0", "Connect Four")


class SelfPlayNimSource(NimSource):
    """`llm/SelfPlayNim-v0`: Nim self-play from one start position per group (knobs of
    `llm/Nim-v0`, but start='any' by default: both won and lost positions for the first seat)."""

    GAME_DEFAULTS: dict[str, Any] = {**NimSource.GAME_DEFAULTS, "start": "any"}
    card = _selfplay_card(NimSource.card, "llm/SelfPlayNim-v0", "Nim", {
        "start": "'winning' (only positions the first seat wins with perfect play) or 'any' "
        "(default 'any': self-play sees both kinds)",
    })
