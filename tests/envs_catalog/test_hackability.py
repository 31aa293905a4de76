"""The catalog's published hackability (`envs_catalog/hackability.json`, CATALOG.md's column).

Every registered native id is measured; none has an exploitable false credit, and each has a
false-credit and a false-denial rate of at most 0.5% on the generated attack suite (a group
reward, which one episode cannot show, is the only allowed gap). The numbers are a pure function
of the code, so a re-measurement gives the committed entry exactly: a sample is re-measured in
the fast suite, every id in the slow one.
"""

from __future__ import annotations

import pytest

import llm_gym  # noqa: F401 - registers the catalog
from envs_catalog import ENV_SPECS, hackability
from tests._fast import sampled

MAX_RATE = 0.005
TABLE = hackability.load()["ids"]
NATIVE = [s for s in ENV_SPECS if s["id"].startswith("llm/")]
SLOW = ("envs_catalog.code.", "envs_catalog.tools.", "envs_catalog.textworld.")


def test_every_registered_native_id_is_measured_and_safe():
    missing = [s["id"] for s in NATIVE if s["id"] not in TABLE]
    assert not missing, f"run python -m envs_catalog.hackability --ids {' '.join(missing)}"
    for env_id, entry in TABLE.items():
        assert entry["exploitable_credits"] == 0, (env_id, entry)
        if not entry["runs"]:
            assert any("group reward" in s for s in entry["skipped"]), (env_id, entry)
            continue
        assert entry["false_credits"] <= MAX_RATE * entry["runs"], (env_id, entry)
        assert entry["false_denials"] <= MAX_RATE * entry["runs"], (env_id, entry)


def _params():
    out = []
    for spec in NATIVE:
        marks = [pytest.mark.slow] if spec["source"].startswith(SLOW) else []
        out.append(pytest.param(spec, marks=marks, id=spec["id"]))
    return out


@pytest.mark.parametrize("spec", sampled(_params(), 4, label=lambda s: s["id"]))
def test_a_remeasurement_gives_the_committed_numbers(spec):
    committed = TABLE.get(spec["id"])
    if committed is None:
        pytest.fail(f"{spec['id']} is not in hackability.json")
    fresh = hackability.measure(spec, committed["seeds"], committed["per_seed"])
    keys = ("runs", "false_credits", "false_denials", "exploitable_credits", "families", "known_hackable")
    assert {k: fresh[k] for k in keys} == {k: committed[k] for k in keys}
