"""Wall-clock time of `import llm_gym` in fresh interpreters (the goal: well under 0.5 s).

Kept here rather than in a test: wall time on a shared machine swings with load (a timed assert
once failed a fresh-clone `make test` at 0.79 s). `tests/llm_gym/test_import.py` checks what makes the
import cheap instead (no heavy modules, a bounded module count, CPU time with a wide margin).

    python benchmarks/import_time.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CODE = (
    "import time, json, sys\n"
    "t0 = time.perf_counter(); c0 = time.process_time()\n"
    "import llm_gym\n"
    "print(json.dumps({'wall': time.perf_counter() - t0, 'cpu': time.process_time() - c0,"
    " 'modules': len(sys.modules)}))"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeats):
        out = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    walls = [r["wall"] for r in runs]
    print(f"import llm_gym: wall min {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
          f"cpu median {statistics.median(r['cpu'] for r in runs):.3f} s; "
          f"{runs[-1]['modules']} modules in sys.modules")


if __name__ == "__main__":
    main()
