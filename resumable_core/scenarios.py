"""The kit's scenarios: a task, the tool its run exercises, and the turn a crash hits.

A scenario is declared once, in :data:`SCENARIOS`; the CLI, the simulator, the crash matrix and
the checks all read it from here. A scenario is keyed by the tools of the turn it crashes,
because that is what a reader picks ("crash on the turn that calls ``send_email``"; a parallel
turn's key joins its tools: ``send_email+read_file``). This module is data only:
running a scenario (its reference turn, its target call, its effects) is
:mod:`.run_folder`'s, so the scripted Claude can read the tasks without importing the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UnknownScenarioError

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
    """A task whose run calls ``tool``; a crash on that call's turn is what the kit studies."""

    tool: str
    """The tool whose call is crashed and whose effect is counted (emails sent, files read)."""
    task: str
    """The user's task, the first message of the run."""
    help: str
    """One line for menus and ``--help``."""
    turn_tools: tuple[str, ...] = ()
    """The tools the crashed turn asks for at once, in block order, when it asks for more than
    ``tool`` (a parallel turn, ``tool`` among them); empty: that turn calls ``tool`` alone."""

    @property
    def tools(self) -> tuple[str, ...]:
        """The crashed turn's tools, in block order."""
        return self.turn_tools or (self.tool,)

    @property
    def calls(self) -> int:
        """How many tools the crashed turn asks for (``crash.points_passed`` takes it)."""
        return len(self.tools)

    @property
    def key(self) -> str:
        """The scenario's key in :data:`SCENARIOS`: its turn's tools joined by ``+``."""
        return "+".join(self.tools)


SCENARIOS: dict[str, Scenario] = {
    s.key: s
    for s in (
        Scenario("read_file", NOTES_TASK, "notes run: “Summarize this week's meeting notes” (read_file is read-only)"),
        Scenario(
            "send_email",
            EMAIL_TASK,
            "email run: “Email the team this week's conclusion” (send_email has a side effect)",
        ),
        Scenario(
            "send_email",
            BRIEFING_TASK,
            "briefing run: one turn asks for send_email, then read_file, at once (a crash can fall between them)",
            turn_tools=("send_email", "read_file"),
        ),
    )
}
"""Every scenario, by its key (:attr:`Scenario.key`: the tool it exercises, or a parallel turn's tools)."""


def scenario(key: str) -> Scenario:
    """The scenario of ``key`` (a one-call scenario's key is its tool); an :class:`UnknownScenarioError` (a
    ValueError) names the choices."""
    try:
        return SCENARIOS[key]
    except KeyError:
        raise UnknownScenarioError(key, list(SCENARIOS)) from None


def one_call_scenarios() -> list[str]:
    """The keys of the scenarios whose crashed turn asks for one tool: the lessons' crash matrix."""
    return [k for k, s in SCENARIOS.items() if s.calls == 1]
