"""lab/run_client.py: each named run gets tool ids of its own, the same ones every time."""

from __future__ import annotations

import pytest

import resumable_core as rc
from resumable_core import lab
from resumable_core.scenarios import NOTES_TASK
from resumable_core.strategies import reconcile_none


def first_tool_id(tmp_path, folder: str, name: str) -> str:
    """The id of the first tool call of an uncrashed notes run whose client is named ``name``."""
    result = rc.RunFolder.create(tmp_path / folder).run(
        NOTES_TASK, reconcile=reconcile_none, client=lab.client_for_run(name)
    )
    return next(b["id"] for b in result.checkpoint.messages[1]["content"] if b["type"] == "tool_use")


@pytest.mark.slow
def test_runs_with_different_names_get_different_ids(tmp_path):
    """Two names, two id sequences; the same name again, the same ids."""
    a = first_tool_id(tmp_path, "a", "lesson-a")
    assert a.startswith("toolu_01")
    assert first_tool_id(tmp_path, "b", "lesson-b") != a
    assert first_tool_id(tmp_path, "c", "lesson-a") == a
