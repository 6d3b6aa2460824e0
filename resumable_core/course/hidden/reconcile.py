"""The hidden checks of the ``reconcile`` assignment, and its level-1 answer key.

The notebook's hidden test blocks call these as ``hidden.check_*(...)``. :func:`conformance`
runs every reconcile check, visible and hidden, on any ``reconcile(cp, tools)``::

    from resumable_core.course.hidden import reconcile
    reconcile.conformance(my_reconcile)   # {check name: None if it passed, else the reason}
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from ...checkpoint import Checkpoint, consistency_problem, load_checkpoint, save_checkpoint
from ...errors import CheckpointError
from ...scenarios import EMAIL_TASK, NOTES_TASK
from ...strategies import Reconcile
from ...tools import Effect, Toolbox, tool
from ...world import World
from ..checks.reconcile import check_checkpoint_b, check_checkpoint_c, check_finished, chosen_action
from ..checks.support import (
    CheckFailed,
    answered,
    dangling,
    fresh_toolbox,
    require,
    require_rerun,
    require_status_unknown,
    run_reconcile,
    scratch,
)

ANSWER_KEY: MappingProxyType[str, str] = MappingProxyType(
    {"A": "finished_no_call", "B": "rerun_tool", "C": "is_error_fallback"}
)
"""Level 1: the right resume action for each exercise checkpoint (read-only)."""


def check_action(answers: Any, checkpoint: str) -> None:
    """Level 1: the answer for ``checkpoint`` is a documented action and the right one."""
    value = chosen_action(answers, checkpoint)
    require(value == ANSWER_KEY[checkpoint], f"RESUME_ACTION[{checkpoint!r}] = {value!r} is not the right action")


# -- extra tools for the variations ------------------------------------------------------------


@tool(Effect.READ_ONLY, "Count the meeting notes.")
def count_notes(world: World, **_: Any) -> str:
    return f"{sum(1 for _ in world.notes_dir.iterdir())} notes"


@tool(
    Effect.SIDE_EFFECT,
    "Post a message to the team chat. It cannot be taken back.",
    channel={"type": "string"},
    text={"type": "string"},
)
def post_to_chat(world: World, channel: str, text: str, **_: Any) -> str:
    with open(world.root / "chat.log", "a", encoding="utf-8") as f:
        f.write(f"#{channel}: {text}\n")
    return f"Posted to #{channel}."


@tool(Effect.SIDE_EFFECT, "Move a note into the archive.", path={"type": "string"})
def archive_note(world: World, path: str, **_: Any) -> str:
    src = world.resolve_note(path)
    (world.root / "archive").mkdir(exist_ok=True)
    src.rename(world.root / "archive" / src.name)
    return f"Archived {path}."


EXTRA_TOOLS = (count_notes, post_to_chat, archive_note)


# -- the hidden checks -------------------------------------------------------------------------


def mid_run_checkpoint() -> Checkpoint:
    """A checkpoint saved at save point B: the last message is a tool_result, nothing pending."""
    from ...lab.exercise_checkpoints import load_exercise_checkpoint

    cp = load_exercise_checkpoint("C")
    cp.messages = cp.messages[:3]
    cp.pending_tool_use = None
    if consistency_problem(cp) is not None or cp.is_finished():  # a bug in the check, not the learner's code
        raise ValueError("the first three messages of checkpoint C are not a consistent unfinished run")
    return cp


def check_nothing_pending(fn: Reconcile) -> None:
    """A checkpoint saved at save point B (nothing pending, not finished): returned as it is."""
    box = fresh_toolbox()
    before, out = run_reconcile(fn, mid_run_checkpoint(), box)
    require(box.count() == 0, f"nothing is pending, yet reconcile executed {box.executed}")
    require(out.model_dump() == before.model_dump(), "with nothing pending the checkpoint must be returned unchanged")


def check_other_read_only_tools(fn: Reconcile) -> None:
    """grep, list_dir, list_sent_emails and a new read-only tool are each re-run exactly once."""
    cases = [
        ("grep", {"pattern": "Decision", "path": "."}),
        ("list_dir", {"path": "."}),
        ("list_sent_emails", {}),
        ("count_notes", {}),
    ]
    for name, tool_input in cases:
        expected = fresh_toolbox(EXTRA_TOOLS).execute(name, tool_input)  # the same call on a twin world
        box = fresh_toolbox(EXTRA_TOOLS)
        before, out = run_reconcile(fn, dangling(name, tool_input), box)
        require(
            box.executed == [(name, tool_input)],
            f"{name} is read-only: execute it exactly once; execute calls were {box.executed}",
        )
        require_rerun(answered(before, out), expected)


def check_other_side_effect_tools(fn: Reconcile) -> None:
    """send_email (never sent), post_to_chat and archive_note are not run; each gets status unknown."""
    cases = [
        ("send_email", {"to": "team@example.com", "subject": "Hello", "body": "Hi all."}, EMAIL_TASK),
        ("post_to_chat", {"channel": "general", "text": "Done."}, NOTES_TASK),
        ("archive_note", {"path": "meeting-08-18.md"}, NOTES_TASK),
    ]
    for name, tool_input, task in cases:
        box = fresh_toolbox(EXTRA_TOOLS)
        before, out = run_reconcile(fn, dangling(name, tool_input, task=task), box)
        require(
            box.count() == 0,
            f"{name} has a side effect: it must not be executed on resume; execute calls were {box.executed}",
        )
        require(not box.world.sent_emails(), "no email may be sent on resume")
        require(not (box.world.root / "chat.log").exists(), "nothing may be posted on resume")
        require((box.world.notes_dir / "meeting-08-18.md").exists(), "no note may be archived on resume")
        require_status_unknown(answered(before, out))


def check_unknown_tool(fn: Reconcile) -> None:
    """A tool the toolbox does not know is never assumed safe: not run, status unknown, no exception."""
    box = fresh_toolbox()
    before, out = run_reconcile(fn, dangling("delete_database", {"name": "prod"}), box)
    require(box.count() == 0, f"an unknown tool must not be executed; execute calls were {box.executed}")
    require_status_unknown(answered(before, out))


def _refusal(messages: list[dict[str, Any]], box: Toolbox) -> str | None:
    """Send a conversation to the scripted Claude; the API's 400 message, or None if accepted."""
    import anthropic

    from ...claude import MAX_TOKENS, make_client, model_id

    client: Any = make_client(live=False)  # the messages are checked by the API here, not by the type checker
    try:
        client.messages.create(
            model=model_id(),
            max_tokens=MAX_TOKENS,
            tools=box.schemas(),
            tool_choice={"type": "auto", "disable_parallel_tool_use": True},
            messages=messages,
        )
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return (body.get("error") or {}).get("message") or str(e)
    return None


def check_api_accepts(fn: Reconcile) -> None:
    """The reconciled conversations of B, C and a side-effecting tool are accepted by the API (no 400)."""
    from ...lab.exercise_checkpoints import exercise_run_folder, load_exercise_checkpoint

    cp_c, box_c = exercise_run_folder("C", scratch("cp-c"))
    box_x = fresh_toolbox(EXTRA_TOOLS)
    cases = [
        ("B", load_exercise_checkpoint("B"), fresh_toolbox()),
        ("C", cp_c, box_c),
        ("post_to_chat", dangling("post_to_chat", {"channel": "general", "text": "Done."}), box_x),
    ]
    for label, cp, box in cases:
        _, out = run_reconcile(fn, cp, box)
        error = _refusal(out.messages, box)
        require(error is None, f"the Messages API refused the reconciled {label} with a 400: {error}")


def check_round_trip(fn: Reconcile) -> None:
    """The reconciled B and C survive save_checkpoint then load_checkpoint, unchanged and consistent."""
    from ...lab.exercise_checkpoints import exercise_run_folder, load_exercise_checkpoint

    cp_c, box_c = exercise_run_folder("C", scratch("cp-c"))
    for label, cp, box in (("B", load_exercise_checkpoint("B"), fresh_toolbox()), ("C", cp_c, box_c)):
        _, out = run_reconcile(fn, cp, box)
        path = scratch("round-trip") / "checkpoint.json"
        save_checkpoint(out, path)
        try:
            loaded = load_checkpoint(path)
        except CheckpointError as e:
            raise CheckFailed(f"the reconciled {label} was saved but cannot be loaded back: {e.reason}") from None
        require(
            loaded is not None and loaded.model_dump() == out.model_dump(),
            f"the reconciled {label} changed across save and load",
        )


RECONCILE_CHECKS: dict[str, Callable[[Reconcile], None]] = {
    "finished": check_finished,
    "nothing_pending": check_nothing_pending,
    "checkpoint_b": check_checkpoint_b,
    "checkpoint_c": check_checkpoint_c,
    "other_read_only_tools": check_other_read_only_tools,
    "other_side_effect_tools": check_other_side_effect_tools,
    "unknown_tool": check_unknown_tool,
    "api_accepts": check_api_accepts,
    "round_trip": check_round_trip,
}
"""The whole conformance suite of a ``reconcile(cp, tools)``, visible and hidden checks, by name."""


def conformance(fn: Reconcile, checks: dict[str, Callable[[Reconcile], None]] | None = None) -> dict[str, str | None]:
    """Run every check on ``fn``: {name: None when it passed, else the reason it failed}."""
    report: dict[str, str | None] = {}
    for name, check in (checks or RECONCILE_CHECKS).items():
        try:
            check(fn)
            report[name] = None
        except AssertionError as e:
            report[name] = str(e) or "assertion failed"
    return report
