"""Shared fixtures: a fresh run folder per test, and the scripted Claude with its request log."""

from __future__ import annotations

import pytest

import resumable_core as rc
from resumable_core._scripted import ScriptedClaude

SPLIT_ACROSS_WORKERS = ("tests/test_no_answers.py",)
"""Files whose tests share no module fixture and may each go to any worker (a long file would otherwise hold one)."""


def xdist_scope(nodeid: str) -> str:
    """The unit `-n 2 --dist loadfile` hands a worker: a test's file (its module fixtures are paid once), or the
    test itself in a file of ``SPLIT_ACROSS_WORKERS``."""
    file = nodeid.split("::", 1)[0]
    return nodeid if file in SPLIT_ACROSS_WORKERS else file


@pytest.hookimpl(optionalhook=True)  # the core suite on 3.12/3.13 runs without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``, scoped by ``xdist_scope``: the controller groups node ids itself. (Groups a worker
    writes into node ids, as ``--dist loadgroup`` does, are lost under pytest 9.2: pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByScope(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return ByScope(config, log)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Every test runs offline against the scripted Claude, in English, whatever the caller's environment.

    English by the locale's lowest setting (LANGUAGE), so a notebook in a `ko/` folder still speaks
    Korean, and a test that wants Korean sets RESUMABLE_LANG.
    """
    monkeypatch.delenv("RESUMABLE_LIVE", raising=False)
    monkeypatch.delenv("RESUMABLE_MODEL", raising=False)
    monkeypatch.delenv("RESUMABLE_LANG", raising=False)
    monkeypatch.setenv("LANGUAGE", "en")


@pytest.fixture
def run_folder(tmp_path):
    """A fresh world, toolbox and checkpoint path."""
    return rc.RunFolder.create(tmp_path)


@pytest.fixture
def scripted():
    """A scripted Claude whose ``requests`` list records every request it got."""
    return ScriptedClaude()


@pytest.fixture
def client(scripted):
    """A real anthropic client with the scripted Claude behind its transport."""
    return rc.make_client(scripted=scripted)
