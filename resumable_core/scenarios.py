"""The kit's two scenarios: a task and the tool its run exercises.

A scenario is declared once, in :data:`SCENARIOS`; the CLI, the simulator, the crash matrix and
the checks all read it from here. A scenario is keyed by the tool it exercises, because that is
what a reader picks ("crash on the turn that calls ``send_email``"). This module is data only:
running a scenario (its reference turn, its target call, its effects) is
:mod:`.run_folder`'s, so the scripted Claude can read the tasks without importing the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

NOTES_TASK = "Summarize this week's meeting notes into one page."
"""The notes run's task: list the notes and read each (``read_file`` is read-only)."""
EMAIL_TASK = "Email the team this week's conclusion."
"""The email run's task: read the conclusion and send it (``send_email`` has a side effect)."""
EMAIL_SUBJECT = "This week's conclusion"
"""The subject of the one email the email run should send."""
BRIEFING_TASK = "Email the team this week's conclusion, and tell me what the Aug 25 retro decided."
"""The briefing run's task: read the conclusion, then one turn asking for two tools at once
(``send_email`` the conclusion and ``read_file`` the retro: a side effect and a read, in that
order), then the answer. Its second turn is the kit's parallel turn."""
RETRO_NOTE = "meeting-08-25.md"
"""The note the briefing run reads in its parallel turn."""


@dataclass(frozen=True)
class Scenario:
    """A task whose run calls ``tool``; a crash on that call is what the kit studies."""

    tool: str
    """The tool whose call is crashed (and the scenario's key in :data:`SCENARIOS`)."""
    task: str
    """The user's task, the first message of the run."""
    help: str
    """One line for menus and ``--help``."""


SCENARIOS: dict[str, Scenario] = {
    s.tool: s
    for s in (
        Scenario("read_file", NOTES_TASK, "notes run: “Summarize this week's meeting notes” (read_file is read-only)"),
        Scenario(
            "send_email",
            EMAIL_TASK,
            "email run: “Email the team this week's conclusion” (send_email has a side effect)",
        ),
    )
}
"""Every scenario, by the tool it exercises."""


def scenario(tool: str) -> Scenario:
    """The scenario that exercises ``tool``; a ValueError names the choices."""
    try:
        return SCENARIOS[tool]
    except KeyError:
        raise ValueError(f"no scenario exercises {tool!r}; choose one of {', '.join(SCENARIOS)}") from None
