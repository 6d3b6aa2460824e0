"""Shared fixtures: a fresh run folder per test, and the scripted Claude with its request log."""

from __future__ import annotations

import pytest

import resumable_core as rc
from resumable_core._scripted import ScriptedClaude


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Every test runs offline against the scripted Claude, whatever the caller's environment."""
    monkeypatch.delenv("RESUMABLE_LIVE", raising=False)
    monkeypatch.delenv("RESUMABLE_MODEL", raising=False)


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
