"""scripts/install_torch.py, the Makefile's torch step: the CPU build from PyTorch's CPU index when
there is no GPU, one printed line and the configured pip sources when that index cannot be reached,
the configured sources (CUDA build) with a GPU, nothing when the version is there. Dry runs against
a loopback index; the real fallback install is what `make install` does on this machine."""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_torch.py"


@pytest.fixture
def no_torch_python(tmp_path):
    """A stand-in interpreter in which torch is not installed (its version probe fails)."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    return fake


@pytest.fixture
def loopback_index(tmp_path):
    """A PEP 503-shaped index on 127.0.0.1 that has a torch/ page."""
    (tmp_path / "index" / "torch").mkdir(parents=True)
    (tmp_path / "index" / "torch" / "index.html").write_text("<html></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--version", "2.13.0", "--dry-run", *args],
                          capture_output=True, text=True, timeout=120)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound, never listening: a connection is refused at once
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_gpu_and_a_reachable_index_takes_the_cpu_build_from_it(no_torch_python, loopback_index):
    out = run("--python", str(no_torch_python), "--gpu", "no", "--index", loopback_index)
    assert out.returncode == 0, out.stderr
    info, command = out.stdout.strip().splitlines()
    assert "no NVIDIA GPU" in info and loopback_index in info
    assert command.endswith(f"--index-url {loopback_index} torch==2.13.0")


def test_an_unreachable_index_falls_back_to_the_configured_sources_with_one_line(no_torch_python):
    index = f"http://127.0.0.1:{_closed_port()}/whl/cpu"
    out = run("--python", str(no_torch_python), "--gpu", "no", "--index", index, "--timeout", "5")
    assert out.returncode == 0, out.stderr
    info, command = out.stdout.strip().splitlines()
    assert info.startswith(f"install_torch: PyTorch's CPU index {index} is unreachable (")
    assert "configured pip sources" in info and "--index-url" not in command
    assert command.endswith("pip install -qq torch==2.13.0")


def test_a_gpu_takes_the_configured_sources_unless_cpu_is_asked(no_torch_python, loopback_index):
    out = run("--python", str(no_torch_python), "--gpu", "yes", "--index", loopback_index)
    info, command = out.stdout.strip().splitlines()
    assert "NVIDIA GPU found" in info and "--index-url" not in command
    out = run("--python", str(no_torch_python), "--gpu", "yes", "--cpu", "--index", loopback_index)
    assert f"--index-url {loopback_index}" in out.stdout.strip().splitlines()[1]


def test_the_installed_version_is_left_alone():
    pytest.importorskip("torch")
    import torch

    version = torch.__version__.split("+")[0]
    out = subprocess.run([sys.executable, str(SCRIPT), "--python", sys.executable, "--version",
                          version, "--index", "http://127.0.0.1:9/"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"install_torch: torch {torch.__version__} already installed"
