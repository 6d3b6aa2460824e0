"""Every rule an exercise states is checked: each sentence of a contract maps to checks that test cells call.

An exercise's task states its rules as a paragraph ``**The contract.**`` followed by a bullet
list, one rule per bullet. The assignment's hidden module maps each bullet's text to the
``check_*`` functions that test it (``CONTRACT``). A rule with no check is a promise nothing
grades; a check no test cell calls grades nothing.
"""

from __future__ import annotations

import json

import pytest

from resumable_core.course import release as course
from resumable_core.course.assignments import ASSIGNMENTS, assignment
from resumable_core.course.grading.recheck.plan import check_calls
from resumable_core.course.notebook_cells import graded_sources, setup_cells

HEADING = "**The contract.**"


def contract_rules(markdown: str) -> list[str]:
    """The bullets that follow each ``**The contract.**`` paragraph of a markdown cell, as written."""
    rules: list[str] = []
    for block in markdown.split(HEADING)[1:]:
        lines = block.strip("\n").splitlines()
        for line in lines[1:] if lines and not lines[0].startswith("- ") else lines:
            if line.startswith("- "):
                rules.append(line[2:].strip())
            elif line.startswith("  ") and rules:  # a bullet wrapped over several lines
                rules[-1] += " " + line.strip()
            elif line.strip():
                break
    return rules


def notebook(name: str) -> dict:
    return json.loads(course.notebook_path(name).read_text(encoding="utf-8"))


def stated_rules(name: str) -> list[str]:
    """Every contract bullet of the assignment's source notebook."""
    cells = [c for c in notebook(name)["cells"] if c["cell_type"] == "markdown"]
    return [rule for c in cells for rule in contract_rules("".join(c["source"]))]


def called_checks(name: str) -> set[str]:
    """The names of every check a test cell of the assignment calls (hidden blocks included)."""
    nb = notebook(name)
    setup = [src for _, src in setup_cells(nb)]
    return {call.check.__name__ for src in graded_sources(nb).values() for call in check_calls(name, src, setup)}


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_exercise_states_a_contract(name):
    """Each assignment's notebook states its rules as a contract, and its hidden module maps them."""
    assert stated_rules(name), f"{name}: no '{HEADING}' list in the notebook"
    assert isinstance(getattr(assignment(name).hidden(), "CONTRACT", None), dict), f"{name}: no CONTRACT"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_rule_maps_to_checks_a_test_cell_calls(name):
    """The notebook's rules and CONTRACT's keys are the same sentences; each maps to checks the test cells call."""
    contract = getattr(assignment(name).hidden(), "CONTRACT", {})
    rules = stated_rules(name)
    assert sorted(contract) == sorted(rules), "the notebook's contract and CONTRACT differ"
    called = called_checks(name)
    unchecked = {rule: checks for rule, checks in contract.items() if not checks or not set(checks) <= called}
    assert unchecked == {}, f"rules whose checks no test cell calls (called: {sorted(called)})"


def test_the_reading_follows_bullets_and_stops_after_them():
    """Wrapped bullets join; the list ends at the first paragraph after it; a rule is read as written."""
    text = f"Intro.\n\n{HEADING}\n\n- One rule,\n  wrapped.\n- `Two` rules.\n\nAfter the list.\n- not a rule\n"
    assert contract_rules(text) == ["One rule, wrapped.", "`Two` rules."]
    assert contract_rules(f"{HEADING} Then:\n- A.\n") == ["A."]
    assert contract_rules("no contract here\n- x") == []
