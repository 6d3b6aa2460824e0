"""lab/source.py: a lesson prints a function's real source, whole and numbered, without its docstring."""

from __future__ import annotations

import inspect

import resumable_core as rc
from resumable_core import lab


def test_run_agent_is_listed_whole_without_its_docstring():
    """Every code line of run_agent is in the listing, numbered from 1; the docstring is not."""
    listing = lab.source_listing(rc.run_agent)
    lines = listing.splitlines()
    assert lines[0].split(maxsplit=1) == ["1", "def run_agent("]
    assert (rc.run_agent.__doc__ or "").splitlines()[0] not in listing
    source = inspect.getsource(rc.run_agent)
    for needle in ("with Lease.take(", "while cp.turns < max_turns:", 'save("during_save_b", use["name"])'):
        assert needle in source and needle in listing, needle


def test_a_function_without_a_docstring_keeps_every_line(capsys):
    """Nothing is cut from a function that has no docstring; show_source prints it as a fenced block of code."""

    def plain(x):
        return x + 1

    lab.show_source(plain)
    assert capsys.readouterr().out.splitlines() == ["```", "1  def plain(x):", "2      return x + 1", "```"]
