"""TextWorld game files for `llm/TextWorld-v0`: which game a (knobs, split, index) is, and a bounded
on-disk cache of the compiled games.

A game is identified by its knobs (world size, number of objects, quest length) and a candidate
number `c` = 0, 1, 2, ...: the key `textworld:{world_size}:{nb_objects}:{quest_length}:{c}` goes to
split "test" when `llm_gym.authoring.split_of(key)` says so (about one in ten), else "train", and
the i-th game of a split's pool is that split's i-th candidate. The key's CRC-32 seeds TextWorld's
generator (`textworld.generator.make_game`), which builds the map, the objects and the quest; the
bundled Inform 7 compiler (`compile_game`) turns it into a Z-machine `.z8` story plus the `.json`
that TextWorld's state tracker reads. Generation is a pure function of the key (checked across
processes and hash seeds): when TextWorld finds no quest for a key, retries `:r1`, `:r2`, ... of the
same candidate (so it stays in its split) are tried, in order.

Generating and compiling one game takes seconds (~0.2 s of generation plus ~3.5 s of compiling on
a loaded 2-core machine; the first game of a process also parses TextWorld's grammar, ~8 s), so
each game is built once and kept under `cache_dir()` (`$LLM_GYM_TEXTWORLD_CACHE`, else
`~/.cache/llm_gym/textworld`), in a versioned subfolder, one folder per game. A game is written to
a temporary folder and renamed into place, so processes that race for the same game (the
determinism check's subprocesses) never see half a game. The cache holds at most
`MAX_CACHED_GAMES` games: when a new one would pass that, the oldest are removed. `textworld` is
imported only here and only when a game is built or started (the optional extra `textworld`).
Neighbours: `envs_catalog.textworld.env` (the env that plays these games).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_gym.authoring import hash_key, split_of

CACHE_ENV_VAR = "LLM_GYM_TEXTWORLD_CACHE"
CACHE_VERSION = "v1"  # bump when the key -> game mapping changes
MAX_CACHED_GAMES = 256  # ~0.4 MB a game: about 100 MB at most
MAX_RETRIES = 8  # keys tried per candidate before giving up
_GAME_FILE = "game.z8"
_lock = threading.Lock()  # one game built at a time per process (TextWorld's grammar is shared)


class TextWorldUnavailable(ImportError):
    """The optional `textworld` package is not installed."""


def require_textworld() -> Any:  # the textworld module (optional, untyped here)
    try:
        import textworld
    except ImportError as exc:
        raise TextWorldUnavailable(
            "llm/TextWorld-v0 needs the optional package textworld: pip install "
            "'llm-gym[textworld]' (or pip install textworld==1.7.0; it builds jericho with gcc)"
        ) from exc
    return textworld


def cache_dir() -> Path:
    """Where compiled games live: `$LLM_GYM_TEXTWORLD_CACHE`, else ~/.cache/llm_gym/textworld."""
    root = os.environ.get(CACHE_ENV_VAR) or os.path.join(
        os.path.expanduser("~"), ".cache", "llm_gym", "textworld")
    return Path(root) / f"{CACHE_VERSION}-textworld-{_textworld_version()}"


@functools.lru_cache(maxsize=1)
def _textworld_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("textworld")
    except PackageNotFoundError:
        return "none"


@dataclass(frozen=True)
class GameSpec:
    """One game: its knobs and candidate number (`key` names it; `split` is where it belongs)."""

    world_size: int
    nb_objects: int
    quest_length: int
    candidate: int

    @property
    def key(self) -> str:
        return f"textworld:{self.world_size}:{self.nb_objects}:{self.quest_length}:{self.candidate}"

    @property
    def split(self) -> str:
        return split_of(self.key)

    def folder_name(self, retry: int) -> str:
        return (f"w{self.world_size}-o{self.nb_objects}-q{self.quest_length}-c{self.candidate}"
                f"-r{retry}")

    def tw_seed(self, retry: int) -> int:
        return hash_key(self.key if retry == 0 else f"{self.key}:r{retry}")


def pool_specs(world_size: int, nb_objects: int, quest_length: int, split: str,
               n_games: int) -> list[GameSpec]:
    """The `n_games` games of `split` for these knobs: the split's first candidates (cheap: no
    game is built here)."""
    specs: list[GameSpec] = []
    candidate = 0
    while len(specs) < n_games:
        spec = GameSpec(world_size, nb_objects, quest_length, candidate)
        if spec.split == split:
            specs.append(spec)
        candidate += 1
    return specs


def game_file(spec: GameSpec) -> Path:
    """The path of `spec`'s compiled `.z8` story (its `.json` beside it), built on first use."""
    root = cache_dir()
    for retry in range(MAX_RETRIES):
        folder = root / spec.folder_name(retry)
        if (folder / _GAME_FILE).is_file():
            return folder / _GAME_FILE
        if (folder.with_suffix(".noquest")).is_file():
            continue  # TextWorld found no quest for this key before: try the next one
        with _lock:
            if (folder / _GAME_FILE).is_file():  # another thread built it meanwhile
                return folder / _GAME_FILE
            if _build(spec, retry, folder):
                return folder / _GAME_FILE
    raise ValueError(
        f"TextWorld found no quest of length {spec.quest_length} in {MAX_RETRIES} tries for "
        f"world_size={spec.world_size}, nb_objects={spec.nb_objects}: use a shorter quest_length "
        "or a bigger world")


def _build(spec: GameSpec, retry: int, folder: Path) -> bool:
    """Build `spec` (try `retry`) into `folder`; False when TextWorld finds no quest."""
    textworld = require_textworld()
    # textworld is in .venv-textworld (make test-textworld), not in .venv: unresolved there
    from textworld.generator import compile_game, make_game  # pyright: ignore[reportMissingImports]
    from textworld.generator.data import KnowledgeBase  # pyright: ignore[reportMissingImports]
    from textworld.generator.chaining import QuestGenerationError  # pyright: ignore[reportMissingImports]

    folder.parent.mkdir(parents=True, exist_ok=True)
    options = textworld.GameOptions()
    options.kb = KnowledgeBase.default()  # else every game re-parses the logic files (~5 s)
    options.seeds = spec.tw_seed(retry)
    options.nb_rooms = spec.world_size
    options.nb_objects = spec.nb_objects
    options.quest_length = spec.quest_length
    try:
        game = make_game(options)
    except QuestGenerationError:
        folder.with_suffix(".noquest").touch()
        return False
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=folder.parent))
    try:
        options.path = str(staging / _GAME_FILE)
        options.force_recompile = True
        compile_game(game, options)
        (staging / "game.ni").unlink(missing_ok=True)  # the Inform 7 source: not needed to play
        _prune(folder.parent, keep=MAX_CACHED_GAMES - 1)
        try:
            os.rename(staging, folder)  # atomic: a reader sees no game or a whole one
        except OSError:
            if not (folder / _GAME_FILE).is_file():  # not a lost race: a real error
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True


def _prune(root: Path, keep: int, stale_s: float = 3600.0) -> None:
    """Remove the oldest games (by modification time) so that at most `keep` remain, and the
    staging folders of builds that died more than `stale_s` seconds ago."""
    now = time.time()
    for staging in root.glob(".building-*"):
        try:
            if now - staging.stat().st_mtime > stale_s:
                shutil.rmtree(staging, ignore_errors=True)
        except FileNotFoundError:  # finished or removed meanwhile
            pass
    games = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if len(games) <= keep:
        return
    games.sort(key=lambda p: p.stat().st_mtime)
    for old in games[: len(games) - keep]:
        shutil.rmtree(old, ignore_errors=True)


__all__ = ["CACHE_ENV_VAR", "MAX_CACHED_GAMES", "GameSpec", "TextWorldUnavailable", "cache_dir",
           "game_file", "pool_specs", "require_textworld", "main"]


def main(argv: list[str] | None = None) -> int:
    """`python -m envs_catalog.textworld.games [--world-size N ...]`: build both splits' pools
    into the cache ahead of time (a CI step, so tests and `llm-gym check` find them built)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--nb-objects", type=int, default=4)
    parser.add_argument("--quest-length", type=int, default=2)
    parser.add_argument("--n-games", type=int, default=8, help="games per split")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    for split in ("train", "test"):
        for spec in pool_specs(args.world_size, args.nb_objects, args.quest_length, split,
                               args.n_games):
            print(f"{split}  {spec.key}  {game_file(spec)}", flush=True)
    print(f"{2 * args.n_games} games in {cache_dir()} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
