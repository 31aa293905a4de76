"""Install torch into a venv: the CPU build on a machine without an NVIDIA GPU, the CUDA build with one.

Without a GPU (or with `--cpu`), torch comes from PyTorch's own CPU wheel index (`--index`), so the
`[train]` extra's plain `torch` requirement never pulls a multi-GB CUDA build. When that index cannot
be reached (an offline mirror, a closed network), one line says so and torch comes from the
configured pip sources instead: on PyPI that is the CUDA build, on a machine with a local wheel
folder whatever that folder holds. With a GPU (`nvidia-smi -L` succeeds) torch comes from the
configured sources (PyPI's build is the CUDA one). Nothing is done when the venv already has the
requested version. Used by the Makefile; `--dry-run` prints the pip command instead of running it.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

DEFAULT_INDEX = "https://download.pytorch.org/whl/cpu"


def has_nvidia_gpu() -> bool:
    """Whether `nvidia-smi -L` lists a GPU."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def index_unreachable(index: str, timeout: float) -> str | None:
    """None when `index` answers for torch's project page, else the reason it could not be read."""
    try:
        with urllib.request.urlopen(f"{index.rstrip('/')}/torch/", timeout=timeout) as response:
            response.read(1)
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return str(getattr(exc, "reason", exc))


def installed_version(python: str) -> str | None:
    probe = "import importlib.metadata as m; print(m.version('torch'))"
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def pip_command(python: str, version: str, gpu: bool, index: str, timeout: float) -> list[str]:
    """The pip command to run, printing the one line that says where torch comes from."""
    spec = f"torch=={version}"
    base = [python, "-m", "pip", "install", "-qq"]
    if gpu:
        print(f"install_torch: NVIDIA GPU found: {spec} from the configured pip sources (CUDA build)")
        return base + [spec]
    reason = index_unreachable(index, timeout)
    if reason is None:
        print(f"install_torch: no NVIDIA GPU: {spec} (CPU build) from {index}")
        return base + ["--index-url", index, spec]
    print(f"install_torch: PyTorch's CPU index {index} is unreachable ({reason}); installing {spec} "
          "from the configured pip sources instead (on PyPI that is the CUDA build)")
    return base + [spec]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the venv's python")
    parser.add_argument("--version", required=True, help="torch version, e.g. 2.13.0")
    parser.add_argument("--index", default=DEFAULT_INDEX, help="PyTorch's CPU wheel index")
    parser.add_argument("--cpu", action="store_true", help="the CPU build even with a GPU")
    parser.add_argument("--gpu", choices=("auto", "yes", "no"), default="auto",
                        help="whether this machine has an NVIDIA GPU (auto: nvidia-smi -L)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the index")
    parser.add_argument("--dry-run", action="store_true", help="print the pip command, run nothing")
    args = parser.parse_args(argv)

    have = installed_version(args.python)
    if have is not None and have.split("+")[0] == args.version:
        print(f"install_torch: torch {have} already installed")
        return 0
    gpu = not args.cpu and (args.gpu == "yes" or (args.gpu == "auto" and has_nvidia_gpu()))
    command = pip_command(args.python, args.version, gpu, args.index, args.timeout)
    if args.dry_run:
        print(shlex.join(command))
        return 0
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
