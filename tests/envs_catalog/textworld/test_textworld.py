"""llm/TextWorld-v0 against the real TextWorld 1.7.0 (real generator, real Inform 7 compiler, real
Jericho interpreter): the command reader, the game-text cleaner, gold (TextWorld's own winning
policy) and adversarial scripted cases, determinism, disjoint splits, knob validation and effect,
the prefix property and the turn / context bounds, the on-disk game cache, the card, and
`llm-gym check` on the id.

Skipped when `textworld` is not importable, unless LLM_GYM_REQUIRE_TEXTWORLD=1 (CI's textworld
job), where a missing package fails. Games are built once into a session-wide cache folder
($LLM_GYM_TEXTWORLD_CACHE when set, so a persistent cache can be reused; else a temporary one):
the tests share the default knobs' pools (8 + 8 games) and build two more."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys

import gymnasium as gym
import numpy as np
import pytest

REQUIRED = os.environ.get("LLM_GYM_REQUIRE_TEXTWORLD") == "1"
if importlib.util.find_spec("textworld") is None and not REQUIRED:
    pytest.skip("textworld is not installed (the optional extra 'textworld'); set "
                "LLM_GYM_REQUIRE_TEXTWORLD=1 to fail instead", allow_module_level=True)

import llm_gym  # noqa: E402,F401  # registers the catalog
from envs_catalog.textworld import games  # noqa: E402
from envs_catalog.textworld.env import (  # noqa: E402
    DEFAULTS, MAX_COMMAND_CHARS, MAX_FEEDBACK_CHARS, TextWorldSource, clean_game_text,
    read_command,
)
from envs_catalog.textworld.specs import SPECS  # noqa: E402
from llm_gym import get_renderer, load_tokenizer  # noqa: E402
from llm_gym.authoring import split_of  # noqa: E402
from llm_gym.rl import trajectory_to_data  # noqa: E402
from llm_gym.scripted import aplay_scripted_episode, reply_tokens, run_scripted_case  # noqa: E402

ENV_ID = "llm/TextWorld-v0"
TOK = load_tokenizer()
RENDERERS = {"chatml": get_renderer("chatml", TOK), "role_colon": get_renderer("role_colon", TOK)}


def test_textworld_is_importable():
    """The one test that says why everything else fails when the package is required."""
    import textworld

    assert textworld.__version__ == "1.7.0" and importlib.util.find_spec("jericho") is not None


@pytest.fixture(scope="session", autouse=True)
def game_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        if not os.environ.get(games.CACHE_ENV_VAR):
            # os.environ, so that `llm-gym check`'s determinism subprocesses share it
            mp.setenv(games.CACHE_ENV_VAR, str(tmp_path_factory.mktemp("textworld_games")))
        yield games.cache_dir()


@pytest.fixture(scope="session")
def sources(game_cache):
    """Default-knob sources per (renderer, split), with every game of their pools built."""
    out = {(r, s): TextWorldSource(renderer=RENDERERS[r], split=s)
           for r in RENDERERS for s in ("train", "test")}
    for split in ("train", "test"):
        out["chatml", split].prepare()
    return out


def play_case(source, case, seed):
    """A scripted case's whole trajectory (and its return)."""
    env = source.make_env(np.random.default_rng(seed))
    trajectory, replies = asyncio.run(aplay_scripted_episode(source, case, env))
    return trajectory, sum(t.reward for t in trajectory.transitions), env


# --- the command reader ---------------------------------------------------------------------------

@pytest.mark.parametrize("reply, command", [
    ("go north", "go north"), ("Take the latchkey.", "take the latchkey"),
    ("Command: open locker", "open locker"), ("> inventory", "inventory"),
    ("`unlock chest with key`", "unlock chest with key"), ("**look**", "look"),
    ("  put  apple on   table  ", "put apple on table"), ("examine T-shirt!", "examine t-shirt"),
    ("take Canadian style keycard from stand", "take canadian style keycard from stand"),
    ("ｇｏ ｅａｓｔ", "go east"), ("n", "n"), ("x key", "x key"),
    ("gο north", "go north"),  # a Greek omicron is read as the o it shows (llm_gym.grading.normalize)
    ("My next command: take key", "take key"), ("I will explore.\nCommand: look", "look"),
])
def test_the_reader_accepts_one_command(reply, command):
    assert read_command(reply) == (command, "ok")


@pytest.mark.parametrize("reply, status", [
    ("", "empty"), ("   ", "empty"), ("``", "empty"), ("` `", "empty"), ("Command:", "not_a_command"),
    ("go north. take key", "not_a_command"), ("go north; take key", "not_a_command"),
    ("go north, take key", "not_a_command"), ("take key then go north", "several_commands"),
    ("go north\ntake key", "several_lines"),
    ("I will go north (to find the key).", "not_a_command"),
    ("restart", "meta_command"), ("UNDO", "meta_command"), ("quit", "meta_command"),
    ("save", "meta_command"), ("restore", "meta_command"), ("again", "meta_command"),
    ("g", "meta_command"), ("oops key", "meta_command"), ("yes", "meta_command"),
    ("tw-print score", "meta_command"), ("tw-extra-infos score", "meta_command"),
    ("*** The End ***", "not_a_command"), ("<score>1</score>", "not_a_command"),
    ("[taking - succeeded]", "not_a_command"), ("g\u202eo north", "unreadable"),  # a bidi override
    ("go north \ufffd", "unreadable"), ("Command: look\nCommand: go north", "conflicting"),
    ("take " + "key " * 20, "too_long"), ("x" * (MAX_COMMAND_CHARS + 1), "too_long"),
    ("go north " * 100, "too_long"),
])
def test_the_reader_rejects_everything_else(reply, status):
    assert read_command(reply) == (None, status)


def test_the_cleaner_drops_the_banner_the_status_line_and_the_restart_menu():
    raw = ("\n\n   ________  ___\n  |  $$$$ \\$$ |\n\nWelcome to TextWorld! Take the key.\n\n"
           "-= Sauna =-\nYou are in a sauna.\n\n\n\n>" + " " * 120 + "-= Sauna =-0/1")
    assert clean_game_text(raw) == ("Welcome to TextWorld! Take the key.\n\n-= Sauna =-\n"
                                    "You are in a sauna.")
    won = ("You lock the locker.\n\n\n    *** The End ***\n\nWould you like to RESTART, RESTORE a "
           "saved game, QUIT or UNDO the last command?\n>" + " " * 40 + "-= Canteen =-1/3")
    assert clean_game_text(won) == "You lock the locker.\n\n    *** The End ***"
    long = clean_game_text("word " * 1000)
    assert len(long) <= MAX_FEEDBACK_CHARS and long.endswith("[...]")
    assert clean_game_text("\n>   -= Sauna =-0/2") == "(no answer)"


# --- scripted cases -------------------------------------------------------------------------------

@pytest.mark.parametrize("renderer_name", list(RENDERERS))
@pytest.mark.parametrize("split", ["train", "test"])
def test_the_winning_policy_wins_every_game_with_the_prefix_property(sources, renderer_name, split):
    source = sources[renderer_name, split]
    gold = [c for c in source.scripted_cases() if c.kind == "gold"]
    assert len(gold) == 2
    played = set()
    for seed in range(4):
        for case in gold:
            trajectory, ret, env = play_case(source, case, seed)
            played.add(env.game_key)
            assert ret == pytest.approx(1.0), (case.name, seed)
            last = trajectory.transitions[-1]
            assert last.metrics["solved"] == 1.0 and last.logs["stop_reason"] == "solved"
            assert last.metrics["invalid_turns"] == 0
            # at most quest_length actions (a game may start with a step already done), no detours
            assert 1 <= len(trajectory.transitions) <= DEFAULTS["quest_length"]
            for before, after in zip(trajectory.transitions, trajectory.transitions[1:]):
                prefix = before.ob.to_ints() + before.ac.tokens
                assert after.ob.to_ints()[: len(prefix)] == prefix
                assert before.metrics["continuation/extended"] == 1.0
            assert len(trajectory_to_data(trajectory, 1.0)) == 1  # one datum per game
            assert env._game is None  # the interpreter is stopped at the end
    assert len(played) >= 2  # the seeds reach several games


@pytest.mark.parametrize("split", ["train", "test"])
def test_no_adversarial_case_gets_credit(sources, split):
    source = sources["chatml", split]
    adversarial = [c for c in source.scripted_cases() if c.kind == "adversarial"]
    assert len(adversarial) >= 10
    for case in adversarial:
        assert case.high <= 0.0
        for seed in (0, 5):
            outcome = run_scripted_case(source, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies[:2])
            assert outcome.episode_return <= 0.0


def test_adversarial_cases_under_role_colon(sources):
    source = sources["role_colon", "train"]
    for case in source.scripted_cases():
        outcome = run_scripted_case(source, case, 3)
        assert outcome.ok, (case.name, outcome.episode_return)


def test_chained_commands_never_reach_the_game(sources):
    """The walkthrough on one line would win in one turn if the game's parser saw it."""
    source = sources["chatml", "train"]
    env = source.make_env(np.random.default_rng(1))
    asyncio.run(env.initial_observation())
    walkthrough = list(env.policy_commands)
    assert 1 <= len(walkthrough) <= DEFAULTS["quest_length"]
    chain = [*walkthrough, "look"]
    for line in (". ".join(chain), " then ".join(chain), ", ".join(chain)):
        result = asyncio.run(env.step(reply_tokens(source.renderer, line)))
        assert result.reward == pytest.approx(-DEFAULTS["invalid_penalty"])
        assert result.metrics["invalid"] == 1.0 and "command" not in result.logs
        assert env.policy_commands == walkthrough  # the game did not move
    env.close()


# --- bounds ---------------------------------------------------------------------------------------

def _steps(source, seed, replies):
    env = source.make_env(np.random.default_rng(seed))

    async def go():
        ob, _ = await env.initial_observation()
        results = []
        for action in replies:
            result = await env.step(action)
            results.append(result)
            if result.episode_done:
                break
            assert result.next_observation.to_ints()[: ob.length + len(action)] == \
                ob.to_ints() + action
            ob = result.next_observation
        return results

    return env, asyncio.run(go())


def test_look_spam_ends_at_the_turn_cap_with_zero(game_cache):
    source = TextWorldSource(renderer=RENDERERS["chatml"], n_games=2, max_turns=3)
    env, results = _steps(source, 0, [reply_tokens(source.renderer, "look")] * 10)
    assert len(results) == 3 and results[-1].episode_done
    assert [r.reward for r in results] == [0.0, 0.0, 0.0]
    assert results[-1].logs["stop_reason"] == "out_of_turns"
    assert results[-1].metrics["turns"] == 3 and results[-1].metrics["solved"] == 0.0
    text = TOK.decode(results[0].next_observation.to_ints())
    assert "(2 turns left.)" in text and "-= " in text  # the room, re-described


def test_the_context_cap_ends_the_game_and_is_never_passed(game_cache):
    source = TextWorldSource(renderer=RENDERERS["chatml"], n_games=2, max_turns=100,
                             max_context_tokens=1500)
    env, results = _steps(source, 0, [reply_tokens(source.renderer, "look")] * 100)
    assert results[-1].logs["stop_reason"] == "context_exceeded"
    assert results[-1].metrics["context_exceeded"] == 1.0
    assert all(r.next_observation.length <= 1500 for r in results)
    assert sum(r.reward for r in results) == 0.0


def test_out_of_vocabulary_ids_end_the_game_with_the_penalty(game_cache):
    source = TextWorldSource(renderer=RENDERERS["chatml"], n_games=2)
    env, results = _steps(source, 0, [[10**6, 5, 7]])
    assert len(results) == 1 and results[0].episode_done
    assert results[0].reward == pytest.approx(-0.1)
    assert results[0].logs["stop_reason"] == "malformed_tokens" and env._game is None


def test_a_truncated_reply_is_an_invalid_turn(game_cache):
    source = TextWorldSource(renderer=RENDERERS["chatml"], n_games=2)
    env, results = _steps(source, 0, [TOK.encode("go north")])  # no end of turn
    assert results[0].reward == pytest.approx(-0.1) and results[0].metrics["invalid"] == 1.0
    assert results[0].logs["command_status"] == "truncated" and not results[0].episode_done
    env.close()


def test_losing_ends_the_game_with_no_credit_and_winning_scores_one(tmp_path):
    """A hand-made TextWorld game (textworld.GameMaker) whose quest fails when its item is eaten:
    the generated pool has no such quest, so the "lost" ending is tested on this one."""
    import textworld
    from textworld.generator.game import Event, Quest

    from envs_catalog.textworld.env import TextWorldEnv

    maker = textworld.GameMaker()
    kitchen = maker.new_room("Kitchen")
    maker.set_player(kitchen)
    carrot = maker.new(type="f", name="carrot")
    chest = maker.new(type="c", name="chest")
    chest.add_property("open")
    kitchen.add(carrot, chest)
    maker.quests = [Quest(win_events=[Event(conditions={maker.new_fact("in", carrot, chest)})],
                          fail_events=[Event(conditions={maker.new_fact("eaten", carrot)})])]
    path = maker.compile(str(tmp_path / "carrot" / "game.z8"))
    renderer = RENDERERS["chatml"]
    for commands, stop_reason, rewards in [
        (["take carrot", "eat carrot"], "lost", [0.0, 0.0]),
        (["take carrot", "put carrot in chest"], "solved", [0.0, 1.0]),
    ]:
        env = TextWorldEnv(renderer, path, max_turns=5, invalid_penalty=0.1,
                           max_context_tokens=8192, game_seed=0)
        asyncio.run(env.initial_observation())
        results = [asyncio.run(env.step(reply_tokens(renderer, c))) for c in commands]
        assert [r.reward for r in results] == rewards
        assert results[-1].episode_done and results[-1].logs["stop_reason"] == stop_reason
        assert results[-1].metrics["lost"] == float(stop_reason == "lost")
        assert env._game is None


def test_rewards_stay_in_the_range_under_random_tokens(sources):
    source = sources["chatml", "train"]
    lo, hi = source.reward_range
    assert (lo, hi) == pytest.approx(source.card.reward_range) == (-1.2, 1.0)
    rng = np.random.default_rng(0)
    for episode in range(6):
        replies = [list(rng.integers(0, 261, size=int(rng.integers(0, 30)))) for _ in range(14)]
        env, results = _steps(source, episode, replies)
        total = sum(r.reward for r in results)
        assert lo - 1e-9 <= total <= hi + 1e-9 and results[-1].episode_done
        env.close()


# --- determinism, splits, knobs -------------------------------------------------------------------

def _first_text(source, seed):
    env = source.make_env(np.random.default_rng(seed))
    ob, _ = asyncio.run(env.initial_observation())
    env.close()
    return env.game_key, TOK.decode(ob.to_ints())


def test_the_same_seed_gives_the_same_game_and_episode(sources):
    source = sources["chatml", "train"]
    assert _first_text(source, 7) == _first_text(source, 7)
    fresh = TextWorldSource(renderer=RENDERERS["chatml"])
    assert _first_text(fresh, 7) == _first_text(source, 7)
    look = [reply_tokens(source.renderer, t) for t in ("look", "inventory", "go west", "xyzzy")]
    a = [(r.reward, r.next_observation.to_ints()) for r in _steps(source, 3, look)[1]]
    b = [(r.reward, r.next_observation.to_ints()) for r in _steps(fresh, 3, look)[1]]
    assert a == b
    keys = {_first_text(source, s)[0] for s in range(30)}
    assert len(keys) >= 6  # 8 games in the pool


def test_the_splits_are_disjoint_and_stable(sources):
    train = sources["chatml", "train"].pool
    test = sources["chatml", "test"].pool
    assert len(train) == len(test) == DEFAULTS["n_games"]
    assert {s.key for s in train}.isdisjoint({s.key for s in test})
    assert all(split_of(s.key) == "train" for s in train)
    assert all(split_of(s.key) == "test" for s in test)
    assert [s.key for s in train[:3]] == ["textworld:2:4:2:0", "textworld:2:4:2:1",
                                          "textworld:2:4:2:2"]
    # the games themselves differ: no opening text is shared between the splits
    train_texts = {_first_text(sources["chatml", "train"], s)[1] for s in range(40)}
    test_texts = {_first_text(sources["chatml", "test"], s)[1] for s in range(40)}
    assert train_texts.isdisjoint(test_texts) and len(test_texts) >= 5
    # a smaller pool is a prefix of the larger one (so n_games reuses built games)
    small = TextWorldSource(renderer=RENDERERS["chatml"], split="test", n_games=3).pool
    assert small == test[:3]


@pytest.mark.parametrize("knob, value, error", [
    ("world_size", 0, ValueError), ("world_size", 11, ValueError), ("world_size", 2.5, TypeError),
    ("nb_objects", 0, ValueError), ("quest_length", 9, ValueError),
    ("quest_length", True, TypeError), ("n_games", 0, ValueError), ("n_games", 129, ValueError),
    ("max_turns", 0, ValueError), ("invalid_penalty", 1.5, ValueError),
    ("invalid_penalty", "0.1", TypeError), ("max_context_tokens", 100, ValueError),
])
def test_bad_knobs_raise_one_line_naming_the_knob(knob, value, error):
    with pytest.raises(error, match=knob) as info:
        TextWorldSource(renderer=RENDERERS["chatml"], **{knob: value})
    assert "\n" not in str(info.value)


def test_an_unknown_knob_names_the_close_match():
    with pytest.raises(TypeError, match="world_size"):
        TextWorldSource(renderer=RENDERERS["chatml"], world_sise=3)


def test_the_knobs_change_the_game(game_cache):
    """A bigger world and a longer quest: TextWorld's walkthrough has quest_length commands, and
    the winning policy still wins."""
    source = TextWorldSource(renderer=RENDERERS["chatml"], world_size=4, nb_objects=8,
                             quest_length=4, n_games=1, max_turns=8)
    env = source.make_env(np.random.default_rng(0))
    asyncio.run(env.initial_observation())
    walkthrough = list(env.policy_commands)
    env.close()
    assert 3 <= len(walkthrough) <= 4
    gold = next(c for c in source.scripted_cases() if c.kind == "gold")
    trajectory, ret, _ = play_case(source, gold, 0)
    assert ret == pytest.approx(1.0) and len(trajectory.transitions) == len(walkthrough)
    assert "w4-o8-q4-c0" in trajectory.transitions[-1].logs["game"]


# --- the cache and the optional dependency --------------------------------------------------------

def test_a_cached_game_is_not_rebuilt(sources):
    spec = sources["chatml", "train"].pool[0]
    path = games.game_file(spec)
    before = path.stat().st_mtime_ns
    assert games.game_file(spec) == path and path.stat().st_mtime_ns == before
    assert path.with_suffix(".json").is_file() and not path.with_suffix(".ni").exists()
    assert path.parent.parent == games.cache_dir()


def test_the_cache_is_bounded(tmp_path):
    for i in range(6):
        (tmp_path / f"g{i}").mkdir()
        os.utime(tmp_path / f"g{i}", (1000 + i, 1000 + i))
    stale = tmp_path / ".building-x"
    stale.mkdir()
    os.utime(stale, (1000, 1000))
    fresh = tmp_path / ".building-y"
    fresh.mkdir()
    games._prune(tmp_path, keep=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".building-y", "g2", "g3", "g4", "g5"]
    assert games.MAX_CACHED_GAMES >= 2 * 128  # room for both splits of the largest pool


def test_the_warm_up_command_builds_both_splits(sources, capsys):
    assert games.main(["--n-games", "2"]) == 0
    out = capsys.readouterr().out
    expected = [str(games.game_file(s)) for split in ("train", "test")
                for s in sources["chatml", split].pool[:2]]
    assert all(path in out for path in expected) and "4 games in" in out


def test_a_missing_textworld_is_one_line_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "textworld", None)  # import textworld -> ImportError
    with pytest.raises(games.TextWorldUnavailable, match=r"llm-gym\[textworld\]"):
        TextWorldSource(renderer=RENDERERS["chatml"])


# --- registration, card, check --------------------------------------------------------------------

@pytest.fixture(scope="module")
def registered():
    """The id, registered from our specs module if the catalog does not list it yet."""
    if ENV_ID not in gym.registry:
        from llm_gym.registration import register_env

        spec = dict(SPECS[0])
        register_env(spec["id"], spec["source"], **spec["kwargs"])
    return ENV_ID


def test_the_spec_requires_textworld_and_matches_the_defaults():
    (spec,) = SPECS
    assert spec["id"] == ENV_ID and spec["requires"] == "textworld"
    assert all(DEFAULTS[k] == v for k, v in spec["kwargs"].items())


def test_the_card(sources):
    card = TextWorldSource.card
    assert card.id == ENV_ID and card.multi_turn and card.family == "textworld"
    assert set(card.difficulty_knobs) == set(DEFAULTS)
    for knob, default in DEFAULTS.items():
        assert f"(default {default})" in card.difficulty_knobs[knob], knob
    assert "MIT" in card.license and "GPL" in card.license
    assert [m["role"] for m in card.example_episode][:2] == ["user", "assistant"]
    assert all(read_command(m["content"])[1] == "ok"
               for m in card.example_episode if m["role"] == "assistant")


def test_gym_make_plays_a_game(registered, sources):
    env = gym.make(registered)
    obs, info = env.reset(seed=0)
    assert "TextWorld" in info["text"] and "one command" in info["text"]
    obs, reward, terminated, truncated, info = env.step(
        reply_tokens(env.unwrapped.renderer, "inventory"))
    assert reward == 0.0 and not terminated
    assert "carrying" in TOK.decode(list(obs)).rsplit("inventory", 1)[1].lower()
    env.close()


@pytest.mark.slow
def test_llm_gym_check_passes(registered, sources, capsys):
    from llm_gym.cli.check import check_main

    code = check_main([registered])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "scripted" in out and "fail" not in out
