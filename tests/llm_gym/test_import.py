"""`import llm_gym` stays light: no torch, no transformers, fast; and every public name exists."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "tokenizers", "trl", "accelerate")


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_import_llm_gym_and_seed_api_is_light():
    """What makes the import cheap, not how long it took: no heavy module and a bounded number of
    modules. The timing itself lives in `benchmarks/import_time.py` -- a wall-clock assert here once
    failed a fresh-clone `make test` under load."""
    code = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        "import llm_gym\n"
        "import llm_gym.rl, llm_gym.renderers, llm_gym.tokenizers, llm_gym.completers\n"
        "new = set(sys.modules) - before\n"
        f"print(json.dumps({{'modules': len(new), "
        f"'heavy': sorted(m for m in new if m.split('.')[0] in {HEAVY!r})}}))"
    )
    result = json.loads(_fresh(code))
    assert result["heavy"] == [], result
    # ~290 modules today (gymnasium + numpy + stdlib); torch alone would add well over 1,000.
    assert result["modules"] < 600, result


def test_public_names():
    code = (
        "import llm_gym, llm_gym.rl as rl, llm_gym.renderers as r\n"
        "names = ['ModelInput', 'TokenCompleter', 'TokensWithLogprobs', 'MessageCompleter', "
        "'StopCondition', 'Message', 'Renderer', 'ParseTermination', 'get_renderer', 'load_tokenizer', "
        "'ByteTokenizer']\n"
        "missing = [n for n in names if not hasattr(llm_gym, n)]\n"
        "missing += ['rl.' + n for n in rl.__all__ if not hasattr(rl, n)]\n"
        "missing += ['renderers.' + n for n in ['get_text_content', 'ensure_text', 'Message'] if not hasattr(r, n)]\n"
        "mi = llm_gym.ModelInput\n"
        "assert mi.from_ints([1]).to_ints() == [1] and mi.empty().length == 0\n"
        "print(missing)"
    )
    assert _fresh(code) == "[]"
