"""Bridges: environments of other libraries, registered as llm-gym ids when the library is installed.

One small module per library translates its envs into llm-gym's (`reasoning_gym.py`: datasets as
single-turn `ProblemEnv`s; `textarena.py`, `gem.py`, `skyrl.py`: string envs through
`llm_gym.wrappers.FromText`). This module holds what registration needs and nothing else: for each
bridge the committed list of ids it registers (checked against the pinned package by
`tests/llm_gym/bridges/test_bridges_*.py`), the ids it leaves out with the reason, and a spec function that the
`llm_gym.envs` entry points in `pyproject.toml` call. A spec function returns no specs unless the
library can be imported (`importlib.util.find_spec`, which imports nothing), so `import llm_gym` never
imports a bridged library and stays fast; `gym.make` imports it when an id is made. Install a bridge
with its extra: `pip install "llm-gym[reasoning-gym]"` (or `[textarena]`, `[gem]`, `[skyrl]`,
`[bridges]` for all four).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BRIDGES",
    "Bridge",
    "bridge_specs",
    "gem_specs",
    "reasoning_gym_specs",
    "skyrl_specs",
    "textarena_specs",
]


@dataclass(frozen=True)
class Bridge:
    """One bridged library: its import name, distribution and pinned version, the extra that
    installs it, its id prefix, and its committed id table (`entries`: bridge id -> spec kwargs
    plus "turns") and skip list (upstream name -> reason)."""

    name: str
    module: str  # the third-party import name
    distribution: str
    version: str  # the pin in pyproject.toml's extra (tests check the installed version)
    extra: str
    source: str  # "llm_gym.bridges.<bridge>:<SourceClass>"
    license: str
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def specs(self) -> list[dict[str, Any]]:
        out = []
        for env_id, entry in self.entries.items():
            kwargs = {k: v for k, v in entry.items() if k not in _META_KEYS}
            spec: dict[str, Any] = {"id": env_id, "source": self.source, "kwargs": kwargs}
            if entry.get("max_episode_steps"):
                spec["max_episode_steps"] = entry["max_episode_steps"]
            out.append(spec)
        return out


_META_KEYS = {"turns", "max_episode_steps", "note"}

# --- reasoning-gym ---------------------------------------------------------------------------
# Every dataset of reasoning-gym 0.1.23 that generates offline, as rg/<name>-v0. `size` is the
# number of tasks per split where the default (10,000) would make the dataset's constructor slow
# (those datasets draw all their tasks up front).
_RG_DATASETS = [
    "ab", "acre", "advanced_geometry", "aiw", "arc_1d", "arc_agi", "base_conversion",
    "basic_arithmetic", "bf", "binary_alternation", "binary_matrix", "bitwise_arithmetic",
    "boxnet", "caesar_cipher", "calendar_arithmetic", "chain_sum", "circuit_logic",
    "color_cube_rotation", "complex_arithmetic", "count_bits", "count_primes", "countdown",
    "course_schedule", "cryptarithm", "decimal_arithmetic", "decimal_chain_sum", "dice",
    "emoji_mystery", "family_relationships", "figlet_font", "fraction_simplification",
    "futoshiki", "game_of_life", "gcd", "graph_color", "group_anagrams", "gsm_symbolic",
    "intermediate_integration", "isomorphic_strings", "jugs", "kakurasu", "knight_swap",
    "knights_knaves", "largest_island", "lcm", "leg_counting", "letter_counting",
    "letter_jumble", "list_functions", "mahjong_puzzle", "manipulate_matrix", "maze",
    "mini_sudoku", "modulo_grid", "n_queens", "needle_haystack", "number_filtering",
    "number_format", "number_sequence", "number_sorting", "palindrome_generation",
    "palindrome_partitioning", "polynomial_equations", "polynomial_multiplication", "pool_matrix",
    "power_function", "prime_factorization", "products", "propositional_logic", "puzzle24",
    "quantum_lock", "ransom_note", "rearc", "rectangle_count", "rotate_matrix", "rotten_oranges",
    "rubiks_cube", "rush_hour", "self_reference", "sentence_reordering", "shortest_path",
    "simple_equations", "simple_geometry", "simple_integration", "sokoban", "spell_backward",
    "spiral_matrix", "string_insertion", "string_manipulation", "string_splitting",
    "string_synthesis", "sudoku", "survo", "syllogism", "time_intervals", "tower_of_hanoi",
    "tsumego", "word_ladder", "word_sequence_reversal", "word_sorting", "zebra_puzzles",
]
_RG_SIZES: dict[str, int] = {}
_RG_SKIPPED = {
    "composite": "a mixture of other datasets, configured by a list of dataset specs: make the "
    "member datasets instead",
    "codeio": "its items exec code samples inside the caller's process while they are generated "
    "(they write files into the working directory, print, warn, and could run anything): "
    "untrusted code runs only in llm_gym.sandbox",
    "game_of_life_halting": "its score_answer gives full credit to any non-empty answer "
    "(bool(answer) == bool(expected)), so the reward cannot be trusted",
}

REASONING_GYM = Bridge(
    name="reasoning-gym",
    module="reasoning_gym",
    distribution="reasoning-gym",
    version="0.1.23",
    extra="reasoning-gym",
    source="llm_gym.bridges.reasoning_gym:ReasoningGymSource",
    license="Apache-2.0",
    entries={
        f"rg/{name}-v0": {"dataset": name, "turns": "single",
                          **({"size": _RG_SIZES[name]} if name in _RG_SIZES else {})}
        for name in _RG_DATASETS
    },
    skipped=_RG_SKIPPED,
)

# --- TextArena ---------------------------------------------------------------------------------
# TextArena 0.7.4's games (default variant; others through the `variant` knob) as
# textarena/<Game>-v0, with the number of seats the bridge plays (2: the agent and a built-in
# opponent).
_TA_SINGLE = [
    "2048-v0", "Bandit-v0", "Blackjack-v0", "Countdown-v0", "Crosswords-v0", "Cryptarithm-v0",
    "FifteenPuzzle-v0", "FrozenLake-v0", "GuessTheNumber-v0", "LightsOut-v0", "LogicPuzzle-v0",
    "Mastermind-v0", "Minesweeper-v0", "PegJump-v0", "RushHour-v0", "Secretary-v0", "Set-v0",
    "Slitherlink-v0", "Sokoban-v0", "Sudoku-v0", "ThreeCardMonte-v0", "TowerOfHanoi-v0",
]
_TA_TWO_PLAYER = [
    "Alquerque-v0", "Battleship-v0", "Breakthrough-v0", "Briscola-v0", "Chopsticks-v0",
    "ColonelBlotto-v0", "ConnectFour-v0", "Crusade-v0", "GameOfPureStrategy-v0", "GermanWhist-v0",
    "Golf-v0", "HighSociety-v0", "IndianPoker-v0", "IteratedMatchingPennies-v0",
    "IteratedPrisonersDilemma-v0", "IteratedRockPaperScissors-v0", "IteratedTwoThirdsAverage-v0",
    "IteratedUltimatumGame-v0", "KuhnPoker-v0", "LiarsDice-v0", "LinesOfAction-v0",
    "MarketEntryGame-v0", "MemoryGame-v0", "NewRecruit-v0", "Nim-v0", "Othello-v0", "PigDice-v0",
    "Poker-v0", "QuantumTicTacToe-v0", "SantoriniBaseFixed-v0", "SimpleBlindAuction-v0",
    "SimpleNegotiation-v0", "SimpleTak-v0", "Snake-v0", "SpiteAndMalice-v0", "Stratego-v0",
    "Surround-v0", "Tak-v0", "TicTacToe-v0", "TruthAndDeception-v0", "TwoDollar-v0",
    "UltimateTicTacToe-v0", "WildTicTacToe-v0",
]
_TA_GAMES: dict[str, int] = {**{g: 1 for g in _TA_SINGLE}, **{g: 2 for g in _TA_TWO_PLAYER}}
_WORDS = "downloads NLTK's 'words' corpus at run time"
_TA_SKIPPED: dict[str, str] = {
    **{g: _WORDS for g in (
        "Hangman-v0", "WordLadder-v0", "Wordle-v0", "WordSearch-v0", "DontSayIt-v0",
        "LetterAuction-v0", "SpellingBee-v0", "WordChains-v0", "Codenames-v0")},
    **{g: "needs an OpenRouter API key (a remote LLM plays the host or judge)" for g in (
        "GuessWho-v0", "TwentyQuestions-v0", "Debate-v0", "ScenarioPlanning-v0")},
    **{g: "its module does not compile on Python 3.11 (f-string syntax of Python 3.12)" for g in (
        "Checkers-v0", "Chess-v0", "IteratedStagHunt-v0", "Klondike-v0", "ReverseTicTacToe-v0",
        "UltimateTexasHoldem-v0")},
    **{g: "needs 3 or more players" for g in (
        "Taboo-v0", "ThreePlayerTicTacToe-v0", "ThreePlayerGOPS-v0", "ThreePlayerIPD-v0",
        "CharacterConclave-v0", "SettlersOfCatan-v0", "SecretMafia-v0")},
    **{g: "its data files are missing from the textarena 0.7.4 wheel" for g in (
        "UsedCarNegotiation-v0", "ScorableGames-v0")},
    "BabyAiText-v0": "registered without a -raw variant (it needs BabyAI / minigrid)",
    "PublicGoodsGame-v0": "a two-seat game did not finish within 90 s when probed",
}

TEXTARENA = Bridge(
    name="textarena",
    module="textarena",
    distribution="textarena",
    version="0.7.4",
    extra="textarena",
    source="llm_gym.bridges.textarena:TextArenaSource",
    license="MIT",
    entries={
        f"textarena/{game}": {"game": game, "players": players, "turns": "multi",
                              "max_episode_steps": 200}
        for game, players in _TA_GAMES.items()
    },
    skipped=_TA_SKIPPED,
)

# --- GEM ---------------------------------------------------------------------------------------
# gem-llm 0.1.0's game envs that run offline, as gem/<id without "game:">.
_GEM_GAMES = [
    "GuessTheNumber-v0-hard", "GuessTheNumber-v0-easy", "GuessTheNumber-v0-random",
    "Mastermind-v0-hard", "Mastermind-v0-random", "Mastermind-v0-easy",
    "Minesweeper-v0-easy", "Minesweeper-v0-hard", "Minesweeper-v0-random",
    "FifteenPuzzle-v0-easy", "FifteenPuzzle-v0-hard",
    "Sudoku-v0-easy", "Sudoku-v0-hard", "Sudoku-v0-random",
    "TowerofHanoi-v0-easy", "TowerofHanoi-v0-hard", "TowerofHanoi-v0-random",
    "Game2048-v0-easy", "Game2048-v0-hard", "Game2048-v0-extreme-hard", "Game2048-v0-random",
    "Sokoban-v0-easy", "Sokoban-v0-hard",
    "Crosswords-v0-easy", "Crosswords-v0-hard",
]
_NLTK = "downloads NLTK's 'words' corpus at run time"
_HF = "downloads its dataset from the Hugging Face Hub at run time"
_GEM_SKIPPED: dict[str, str] = {
    **{f"game:{g}": _NLTK for g in (
        "Wordle-v0-hard", "Wordle-v0-easy", "Wordle-v0-random", "Hangman-v0-random",
        "Hangman-v0-easy", "Hangman-v0-hard", "WordSearch-v0-easy", "WordSearch-v0-hard",
        "WordSearch-v0-random")},
    "game:FifteenPuzzle-v0-random": "reset raises TypeError (None ** int) in gem-llm 0.1.0",
    "game:Crosswords-v0-random": "reset raises ValueError ('No words found matching "
    "hardcore=None') in gem-llm 0.1.0",
    "game:Sokoban-v0-random": "a reset took 0.2-47 s when probed (room generation, 4 seeds), "
    "too slow to train on or to check; Sokoban-v0-easy and -hard are registered",
    "rg:*": "the reasoning-gym datasets: bridged directly as rg/<name>-v0",
    "math:*, eval:*, logic:*, qa:*": _HF,
    "code:*": _HF + ", and runs model-written code outside a sandbox",
}

GEM = Bridge(
    name="gem",
    module="gem",
    distribution="gem-llm",
    version="0.1.0",
    extra="gem",
    source="llm_gym.bridges.gem:GemSource",
    license="Apache-2.0",
    entries={
        f"gem/{g}": {"gem_id": f"game:{g}", "turns": "multi",
                     **({"note": "a reset can take seconds to minutes (room generation)"}
                        if g == "Sokoban-v0-hard" else {})}
        for g in _GEM_GAMES
    },
    skipped=_GEM_SKIPPED,
)

# --- SkyRL-gym ---------------------------------------------------------------------------------
# skyrl-gym 0.4.0's envs that need nothing but a dataset of rows (passed as dataset=...).
SKYRL = Bridge(
    name="skyrl-gym",
    module="skyrl_gym",
    distribution="skyrl-gym",
    version="0.4.0",
    extra="skyrl",
    source="llm_gym.bridges.skyrl:SkyRLSource",
    license="MIT",
    entries={
        "skyrl/gsm8k": {"env_name": "gsm8k", "turns": "single",
                        "note": "one reply, scored by its final '#### answer'"},
        "skyrl/gsm8k_multi_turn": {"env_name": "gsm8k_multi_turn", "turns": "multi",
                                   "note": "up to 5 tries, a reward per turn"},
        "skyrl/aime": {"env_name": "aime", "turns": "single",
                       "note": "one reply, scored by its boxed answer"},
    },
    skipped={
        "text2sql": "needs the SQL databases of its dataset (downloaded) and runs model-written SQL "
        "on them outside a sandbox",
        "search": "queries a retrieval server over the network",
        "searchcode": "queries a retrieval server over the network and runs model-written code",
        "lcb": "runs model-written code outside a sandbox (llm-gym runs untrusted code only in "
        "llm_gym.sandbox)",
    },
)

BRIDGES: dict[str, Bridge] = {b.name: b for b in (REASONING_GYM, TEXTARENA, GEM, SKYRL)}


def bridge_specs(name: str) -> list[dict[str, Any]]:
    """The specs of bridge `name` when its library is importable, else []."""
    bridge = BRIDGES.get(name)
    return bridge.specs() if bridge is not None and bridge.installed() else []


def reasoning_gym_specs() -> list[dict[str, Any]]:
    return bridge_specs("reasoning-gym")


def textarena_specs() -> list[dict[str, Any]]:
    return bridge_specs("textarena")


def gem_specs() -> list[dict[str, Any]]:
    return bridge_specs("gem")


def skyrl_specs() -> list[dict[str, Any]]:
    return bridge_specs("skyrl-gym")
