"""The `determinism` row: two fresh subprocesses with different hash seeds play, per seed, whole
episodes from `reset(seed=s)` on the Gymnasium face (a fixed reply sequence and each gold
scripted case, at most two) and digest every action, observation, reward and end flag; the
digests (with the source's `task_key` of each episode, when it declares one: a hidden task the
plays never reveal) must agree across the processes and differ across seeds. A game that opens the same
way for every seed shows its task in how it answers a real player, so the first observation
alone is never the test. A slow env (a generated game whose reset takes seconds) is compared on
the seeds both processes finished within half the time limit (at least two). A source may declare
that its task is fixed by design (`fixed_task_reason`) or that a bridged library's generator depends
on the hash seed (`hash_seed_reason`, confirmed by a rerun with the same hash seed): the row is then
a skip with that reason, never a pass. `_digest_child` is the subprocesses' entry point.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import warnings
from typing import Any, Callable, Sequence

from llm_gym.checks.common import _FIXED_REPLIES, CheckRow, _Target


def _episode_digest(env, seed: int, policy: Callable[[Any, str], list[int]],
                    max_turns: int) -> tuple[str, str]:
    """(digest of the first observation, digest of the whole episode: every observation, reward
    and end flag) of `policy(seed-API env, observation text) -> action tokens` from reset(seed)."""
    digest = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    first = hashlib.sha256(json.dumps([int(t) for t in obs]).encode()).hexdigest()[:16]
    digest.update(b"reset" + first.encode())
    # A declared task key shows a hidden task (a secret number) that these plays never reveal.
    key = env.unwrapped.source.task_key(env.unwrapped.current_env)
    if key is not None:
        digest.update(b"task" + json.dumps(key, sort_keys=True, separators=(",", ":")).encode())
    decode = env.unwrapped.tokenizer.decode
    for _ in range(max_turns):
        action = policy(env.unwrapped.current_env, decode([int(t) for t in obs]))
        obs, reward, terminated, truncated, _ = env.step(action)
        # The action too: a scripted player that reads a hidden task shows it in its moves.
        digest.update(json.dumps([int(t) for t in action], separators=(",", ":")).encode())
        digest.update(json.dumps([int(t) for t in obs], separators=(",", ":")).encode())
        digest.update(repr((round(float(reward), 9), bool(terminated), bool(truncated))).encode())
        if terminated or truncated:
            break
    return first, digest.hexdigest()[:16]


def _digests(source: str, kwargs: dict[str, Any], seeds: Sequence[int],
             budget_s: float | None = None) -> dict[str, Any]:
    """Per seed, the digests of whole episodes (run in each subprocess): a fixed reply sequence,
    then each gold scripted case (at most two) played on the Gymnasium face — a game that opens
    the same way for every seed differs in how it answers a real player. Past `budget_s` seconds
    no new seed starts once two are done (a slow env); the output has the seeds finished."""
    from llm_gym.scripted import ScriptedCase, reply_tokens
    from llm_gym.text_env import TextEnv

    env = TextEnv(source, **kwargs)
    renderer = env.renderer
    fixed = [reply_tokens(renderer, text) for text in _FIXED_REPLIES]
    plays: list[tuple[str, Any, Callable[[Any, str], list[int]], int]] = []
    turn = iter(range(10**9))
    plays.append(("fixed replies", env, lambda _e, _t: fixed[next(turn) % len(fixed)],
                  len(fixed)))
    try:
        cases = [c for c in env.source.scripted_cases()
                 if isinstance(c, ScriptedCase) and c.kind == "gold"][:2]
    except Exception:  # the scripted row reports it
        cases = []
    for case in cases:
        case_env = TextEnv(source, **{**kwargs, **case.knobs}) if case.knobs else env
        r = case_env.renderer

        def policy(seed_env, text, case=case, case_env=case_env, r=r):
            return reply_tokens(r, case.reply(seed_env, text), case_env.stop_condition)

        plays.append((f"gold case {case.name!r}", case_env, policy, case.max_turns))
    out: dict[str, Any] = {"plays": [name for name, *_ in plays], "first": {}, "episodes": {}}
    # One throwaway round first: a fresh process's first episode pays lazy imports (sympy for a
    # symbolic grader), which a grader's time bound could count against the reply.
    start = time.monotonic()
    for i, seed in enumerate([*seeds[:1], *seeds]):
        if budget_s is not None and i > 2 and time.monotonic() - start > budget_s:
            break  # two seeds compared at least (i counts the throwaway round)
        turn = iter(range(10**9))  # the fixed replies restart each episode
        parts = []
        for name, play_env, play, max_turns in plays:
            try:
                first, whole = _episode_digest(play_env, seed, play, max_turns)
            except Exception as exc:  # reported by the scripted / fuzz rows; a digest here
                first, whole = "", f"raised {type(exc).__name__}"
            if name == "fixed replies":
                out["first"][str(seed)] = first
            parts.append(whole)
        out["episodes"][str(seed)] = parts
    return out


def _digest_child() -> None:  # entry of the determinism subprocesses
    payload = json.loads(sys.argv[1])
    warnings.simplefilter("ignore")
    out = _digests(payload["source"], payload["kwargs"], payload["seeds"], payload.get("budget_s"))
    sys.stdout.write("\n" + json.dumps(out) + "\n")


def _run_children(payload: str, hash_seeds: Sequence[int], timeout_s: float
                  ) -> list[dict[str, Any]] | CheckRow:
    """Run one digest subprocess per hash seed, concurrently: their outputs, or a failed row."""
    code = "from llm_gym.checks.determinism import _digest_child; _digest_child()"
    env = dict(os.environ)
    # The child imports the source the way this process does (a test module, a checkout).
    env["PYTHONPATH"] = os.pathsep.join([p or os.getcwd() for p in sys.path])
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    procs = [subprocess.Popen([sys.executable, "-c", code, payload], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**env, "PYTHONHASHSEED": str(hash_seed)})
             for hash_seed in hash_seeds]
    results = []
    try:
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return CheckRow("determinism", "fail", f"a subprocess ran past {timeout_s:.0f} s")
            if proc.returncode != 0:
                lines = err.strip().splitlines() or ["(no output)"]
                errors = [ln for ln in lines if re.match(r"[\w.]+(Error|Exception|Interrupt)\b", ln)]
                last = (errors or lines)[-1]
                return CheckRow("determinism", "fail",
                                f"the subprocess failed (exit {proc.returncode}): {last}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:  # no child outlives the check
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def _disagreement(first: dict[str, Any], second: dict[str, Any]) -> tuple[list[tuple[str, str]], int]:
    """(the (seed, play) pairs whose episodes differ, episodes compared) on the seeds both runs
    finished; a differing first observation counts as a "reset" disagreement."""
    plays = first["plays"]
    common = [s for s in first["episodes"] if s in second["episodes"]]
    differing = [(s, plays[i]) for s in common for i, (a, b) in
                 enumerate(zip(first["episodes"][s], second["episodes"][s])) if a != b]
    if not differing:
        differing = [(s, "reset") for s in common if first["first"][s] != second["first"][s]]
    return differing, sum(len(first["episodes"][s]) for s in common)


def _check_determinism(target: _Target, seeds: Sequence[int], timeout_s: float = 120.0,
                       source: Any = None) -> CheckRow:
    """The row; `source` (the built env's `EnvSource`, when the caller has one) answers
    `fixed_task_reason()` and `hash_seed_reason()`."""
    try:
        payload = json.dumps({"source": target.source, "kwargs": target.kwargs,
                              "seeds": list(seeds), "budget_s": timeout_s / 2})
    except TypeError as exc:  # a tokenizer object passed to check_env_id: no way to a child
        return CheckRow("determinism", "skip", f"warning: cannot rebuild the env in a subprocess: "
                        f"its kwargs are not JSON ({exc}); pass names (tokenizer='...')")
    # Two processes with different hash seeds: set iteration order must not leak into a task.
    results = _run_children(payload, (1, 2), timeout_s)
    if isinstance(results, CheckRow):
        return results
    first, second = results
    plays = first["plays"]
    common = [s for s in first["episodes"] if s in second["episodes"]]
    episodes = {s: first["episodes"][s] for s in common}
    data: dict[str, Any] = {"seeds": [int(s) for s in common], "plays": plays,
                            "digests": [first["episodes"], second["episodes"]]}
    cut = f" (a slow env: {len(common)} of {len(seeds)} seeds within {timeout_s / 2:.0f} s)" if (
        len(common) < len(seeds)) else ""
    differing, total = _disagreement(first, second)
    hash_reason = source.hash_seed_reason() if source is not None else None
    caveat = ""
    if differing and hash_reason:
        rerun = _run_children(payload, (1,), timeout_s)
        if isinstance(rerun, CheckRow):
            return rerun
        same_seed, _ = _disagreement(first, rerun[0])
        data["same_hash_seed_disagree"] = len(same_seed)
        if not same_seed:
            caveat = (f"{len(differing)} of {total} episodes depend on PYTHONHASHSEED (the same "
                      f"with an equal hash seed): {hash_reason}")
            differing = []
    if differing:
        seed, play = differing[0]
        return CheckRow(
            "determinism", "fail",
            f"two processes disagree on {len(differing)} of {total} episodes, e.g. seed {seed} "
            f"({play}){cut}: draw all randomness from make_env's rng", data)
    distinct = len({json.dumps(v) for v in episodes.values()})
    distinct_first = len({first["first"][s] for s in common})
    data.update(distinct_episodes=distinct, distinct_first_observations=distinct_first)
    if distinct < 2:
        fixed_reason = source.fixed_task_reason() if source is not None else None
        if fixed_reason:
            return CheckRow("determinism", "skip",
                            f"all {len(episodes)} seeds agree across processes and give the same "
                            f"episodes{cut}, as declared: {fixed_reason}", data)
        return CheckRow(
            "determinism", "fail",
            f"all {len(episodes)} seeds gave the same episodes ({', '.join(plays)}){cut}: the "
            "task does not depend on the seed", data)
    how = (f"the first observation is the same for every seed, so whole episodes were compared "
           f"({', '.join(plays)})" if distinct_first == 1 else
           f"{distinct_first} distinct first observations; whole episodes compared "
           f"({', '.join(plays)})")
    if caveat:
        return CheckRow("determinism", "skip", f"{caveat}; {distinct} distinct episodes over "
                        f"{len(episodes)} seeds{cut}", data)
    return CheckRow("determinism", "pass",
                    f"{len(episodes)} seeds agree across 2 processes{cut}; {distinct} distinct "
                    f"episodes; {how}", data)
