"""Shared fixtures: a fresh run folder per test, and the scripted Claude with its request log."""

from __future__ import annotations

import pytest

import resumable_core as rc
from resumable_core._scripted import ScriptedClaude


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `-n 2 --dist loadgroup` a file's tests share a worker (its module fixtures are paid once), as with
    loadfile; a module that sets ``SPLIT_ACROSS_WORKERS`` lets each of its tests go to any worker (a long file
    whose tests share nothing would otherwise hold one worker for all of them)."""
    if not config.pluginmanager.hasplugin("xdist"):  # the core suite on 3.12/3.13 runs without it
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            split = getattr(getattr(item, "module", None), "SPLIT_ACROSS_WORKERS", False)
            item.add_marker(pytest.mark.xdist_group(item.nodeid if split else item.nodeid.split("::")[0]))


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
