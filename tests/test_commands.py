"""The project's two commands: `make lab` serves the lessons; `.ci/run` calls `make test`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_lesson_one():
    """`make lab` starts JupyterLab and serves lesson 1 (here without a browser, on a free port)."""
    port = _free_port()
    args = f"--no-browser --port={port} --ServerApp.token=kit-test --ServerApp.ip=127.0.0.1"
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/contents/lessons/01_skeleton_resume.ipynb?token=kit-test&content=0"
        for _ in range(120):
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    assert r.status == 200
                    return
            except OSError:
                assert proc.poll() is None, "make lab exited early"
                time.sleep(0.5)
        raise AssertionError("JupyterLab did not answer within 60 s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_ci_runs_make_test():
    """CI's script ends in `make test`, the same command a developer runs."""
    lines = [
        ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    ]
    assert lines[-1] == "make test"


def test_readme_starts_with_the_two_commands():
    """The README's first commands are `make lab` and `make test`."""
    text = (ROOT / "README.md").read_text()
    first_block = text.split("```")[1]
    commands = [ln.split("#")[0].strip() for ln in first_block.splitlines() if ln.strip().startswith("make")]
    assert commands == ["make lab", "make test"]
