"""A model client for one named run, so each lesson run shows tool ids of its own, the same every time."""

from __future__ import annotations

from typing import Any

from .._scripted import ScriptedClaude
from ..claude import make_client


def client_for_run(name: str) -> Any:
    """``rc.make_client()`` whose scripted Claude draws its ids (``toolu_01…``) from ``name``; live Claude when enabled.

    Two runs with different names get different ids; the same name gives the same ids again.
    """
    return make_client(scripted=ScriptedClaude(seed=name))
