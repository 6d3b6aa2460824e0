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
from ...errors import CheckpointError, ToolError
from ...lab import core_words
from ...lab.i18n import N_
from ...ledger import idempotency_key
from ...scenarios import EMAIL_SUBJECT, EMAIL_TASK, NOTES_TASK, RETRO_NOTE
from ...strategies import STATUS_UNKNOWN, Reconcile
from ...tools import Effect, Toolbox, tool
from ...world import NOTES, TEAM_ADDRESS, World
from ..checks.reconcile import (
    check_checkpoint_a,
    check_checkpoint_b,
    check_checkpoint_c,
    check_turn_between_tools,
    chosen_action,
)
from ..checks.support import (
    PARALLEL_LESSON,
    PARALLEL_TURN,
    CheckFailed,
    CountingToolbox,
    answered,
    answered_turn,
    crash_parallel_turn,
    dangling,
    dangling_turn,
    fresh_toolbox,
    require,
    require_rerun,
    require_status_unknown,
    resumed_with,
    run_reconcile,
    scratch,
)
from ..i18n import _ as course_
from .i18n import _, fails_with

ANSWER_KEY: MappingProxyType[str, str] = MappingProxyType(
    {"A": "finished_no_call", "B": "rerun_tool", "C": "is_error_fallback"}
)
"""Level 1: the right resume action for each exercise checkpoint (read-only).

- A: the notes run, killed right after save point A of its final answer: nothing pending, the
  last message is a plain assistant reply. The run is *finished*; resume must report that and
  make no model call. (The source course reads this case as "crashed after save point B"; but
  after B the last message is a user tool_result, never an assistant reply.)
- B: the notes run, killed after save point A of ``read_file(meeting-08-25.md)``: a pending
  read-only call; resume re-runs it.
- C: the email run, killed after ``send_email`` ran and before save point B (the postmortem's
  crash): a pending side-effecting call that already happened; resume must not send again.
"""


@fails_with(N_("This is not the right resume action for this checkpoint. Reread Level 1 (Exercise 2)."))
def check_action(answers: Any, checkpoint: str) -> None:
    """Level 1: the answer for ``checkpoint`` is a documented action and the right one."""
    value = chosen_action(answers, checkpoint)
    require(
        value == ANSWER_KEY[checkpoint],
        _("RESUME_ACTION[{checkpoint}] = {value} is not the right action").format(
            checkpoint=repr(checkpoint), value=repr(value)
        ),
    )


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


@tool(
    Effect.SIDE_EFFECT,
    "Read a note aloud to the team's call, then archive it. It cannot be undone.",
    path={"type": "string"},
)
def read_and_archive(world: World, path: str, **_: Any) -> str:
    return archive_note.run(world, path=path)


@tool(Effect.READ_ONLY, "Tally the decisions recorded in the meeting notes.")
def tally_decisions(world: World, **_: Any) -> str:
    return f"{sum(p.read_text(encoding='utf-8').count('Decision') for p in world.notes_dir.iterdir())} decisions"


EXTRA_TOOLS = (count_notes, post_to_chat, archive_note)
NAME_TRAPS = (read_and_archive, tally_decisions)
"""Tools whose names say the opposite of their declared effect: only ``tools.effect`` tells."""


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


@fails_with(
    N_(
        "A checkpoint with nothing pending is returned as it is, and no tool runs. Reread the contracts of Levels 2 and 3 (Exercise 2)."
    )
)
def check_nothing_pending(fn: Reconcile) -> None:
    """A checkpoint saved at save point B (nothing pending, not finished): returned as it is."""
    box = fresh_toolbox()
    before, out = run_reconcile(fn, mid_run_checkpoint(), box)
    require(box.count() == 0, _("nothing is pending, yet reconcile executed {executed}").format(executed=box.executed))
    require(
        out.model_dump() == before.model_dump(), _("with nothing pending the checkpoint must be returned unchanged")
    )


@fails_with(
    N_(
        "A pending read-only call is run again, exactly once, with its recorded input. Reread the contract of Level 2 (Exercise 2)."
    )
)
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
            _("{name} is read-only: execute it exactly once; execute calls were {executed}").format(
                name=name, executed=box.executed
            ),
        )
        require_rerun(answered(before, out), expected)


@fails_with(
    N_(
        "A pending call with a side effect never runs on resume: it is answered with is_error and an unknown status. Reread the contract of Level 2 (Exercise 2)."
    )
)
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
            _("{name} has a side effect: it must not be executed on resume; execute calls were {executed}").format(
                name=name, executed=box.executed
            ),
        )
        require(not box.world.sent_emails(), _("no email may be sent on resume"))
        require(not (box.world.root / "chat.log").exists(), _("nothing may be posted on resume"))
        require((box.world.notes_dir / "meeting-08-18.md").exists(), _("no note may be archived on resume"))
        require_status_unknown(answered(before, out))


@fails_with(
    N_(
        "A tool the toolbox does not know is never assumed safe: not run, answered as a side-effecting call. Reread the contract of Level 2 (Exercise 2)."
    )
)
def check_unknown_tool(fn: Reconcile) -> None:
    """A tool the toolbox does not know is never assumed safe: not run, status unknown, no exception."""
    box = fresh_toolbox()
    before, out = run_reconcile(fn, dangling("delete_database", {"name": "prod"}), box)
    require(
        box.count() == 0,
        _("an unknown tool must not be executed; execute calls were {executed}").format(executed=box.executed),
    )
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
            messages=messages,
        )
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return (body.get("error") or {}).get("message") or str(e)
    return None


@fails_with(
    N_(
        "The dangling call is answered, not deleted, so that the Messages API accepts the conversation. Reread the contract of Level 2 (Exercise 2)."
    )
)
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
        before, out = run_reconcile(fn, cp, box)
        answered(before, out)  # deleting the call, or leaving it, is no answer the API should judge
        error = _refusal(out.messages, box)
        require(
            error is None,
            _("the Messages API refused the reconciled {label} with a 400: {error}").format(label=label, error=error),
        )


@fails_with(
    N_("The reconciled checkpoint must save and load back unchanged. Reread the contract of Level 2 (Exercise 2).")
)
def check_round_trip(fn: Reconcile) -> None:
    """The reconciled B and C survive save_checkpoint then load_checkpoint, unchanged and consistent."""
    from ...lab.exercise_checkpoints import exercise_run_folder, load_exercise_checkpoint

    cp_c, box_c = exercise_run_folder("C", scratch("cp-c"))
    for label, cp, box in (("B", load_exercise_checkpoint("B"), fresh_toolbox()), ("C", cp_c, box_c)):
        before, out = run_reconcile(fn, cp, box)
        answered(before, out)  # a checkpoint returned as it was survives any round trip: no answer
        path = scratch("round-trip") / "checkpoint.json"
        save_checkpoint(out, path)
        try:
            loaded = load_checkpoint(path)
        except CheckpointError as e:
            raise CheckFailed(
                _("the reconciled {label} was saved but cannot be loaded back: {reason}").format(
                    label=label, reason=core_words.reason(e)
                )
            ) from None
        require(
            loaded is not None and loaded.model_dump() == out.model_dump(),
            _("the reconciled {label} changed across save and load").format(label=label),
        )


RECONCILE_CHECKS: dict[str, Callable[[Reconcile], None]] = {
    "finished": check_checkpoint_a,
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


# -- Level 3: a turn of several calls ----------------------------------------------------------

EMAIL = {"to": TEAM_ADDRESS, "subject": EMAIL_SUBJECT, "body": "The retro moved to Friday."}
CHAT = {"channel": "general", "text": "Retro moved to Friday."}
CHAT_DOWN = "post_to_chat failed: the chat service is down"
"""The failure a receipt of post_to_chat records in :func:`check_turn_receipts`."""


def _key(cp: Checkpoint, k: int) -> str:
    """The idempotency key of the turn's ``k``-th call."""
    return idempotency_key(cp.run_id, _ids(cp)[k])


def _ids(cp: Checkpoint) -> list[str]:
    return [b["tool_use_id"] for b in cp.recorded_results] + [p.id for p in cp.pending_tool_uses]


def _settle(fn: Reconcile, cp: Checkpoint, box: CountingToolbox) -> tuple[Checkpoint, list[dict[str, Any]]]:
    """Run ``fn`` on the turn; require it answered in one message; its results in block order."""
    before, out = run_reconcile(fn, cp, box)
    blocks = answered_turn(before, out)
    return out, [blocks[i] for i in _ids(before)]


def _rerun_error(name: str, tool_input: dict[str, Any]) -> str:
    """The error text the re-run of ``name(tool_input)`` raises on a fresh world."""
    try:
        fresh_toolbox(EXTRA_TOOLS).execute(name, tool_input)
    except ToolError as e:
        return str(e)
    raise ValueError(f"{name}({tool_input}) does not fail: a bug in the check")


@fails_with(
    N_(
        "Recorded results are kept first, read-only calls re-run once, all results in one user message. Reread the contract of Level 3 (Exercise 2)."
    )
)
def check_turn_keeps_recorded(reconcile_turn: Reconcile) -> None:
    """Two results recorded, two read-only calls pending: the two kept first, the two re-run once each, one message."""
    calls = [("list_dir", {"path": "."}), ("grep", {"pattern": "Decision", "path": "."})]
    calls += [("read_file", {"path": "meeting-08-21.md"}), ("list_sent_emails", {})]
    box = fresh_toolbox()
    results = _settle(reconcile_turn, dangling_turn(calls, recorded=2), box)[1]
    require(
        sorted(map(str, box.executed)) == sorted(map(str, calls[2:])),
        _(
            "the two recorded calls already ran: re-run only the two pending read-only ones, "
            "once each; execute calls were {executed}"
        ).format(executed=box.executed),
    )
    require_rerun(results[2], NOTES["meeting-08-21.md"])
    require_rerun(results[3], "The outbox is empty.")


@fails_with(
    N_(
        "A read-only call is re-run once; one whose re-run raises rc.ToolError gets is_error with the error's text. Reread the contract of Level 3 (Exercise 2)."
    )
)
def check_turn_read_only(reconcile_turn: Reconcile) -> None:
    """Three read-only calls, one of which fails again on its re-run: two outputs, one is_error with the error's text."""
    calls = [("read_file", {"path": "meeting-08-18.md"}), ("read_file", {"path": "gone.md"}), ("count_notes", {})]
    box = fresh_toolbox(EXTRA_TOOLS)
    results = _settle(reconcile_turn, dangling_turn(calls), box)[1]
    require(
        sorted(map(str, box.executed)) == sorted(map(str, calls)),
        _("each read-only call is re-run exactly once; execute calls were {executed}").format(executed=box.executed),
    )
    require_rerun(results[0], NOTES["meeting-08-18.md"])
    require_rerun(results[2], fresh_toolbox(EXTRA_TOOLS).execute("count_notes", {}))
    error = _rerun_error("read_file", {"path": "gone.md"})
    require(
        results[1].get("is_error") is True and results[1].get("content") == error,
        _(
            "a re-run that raises rc.ToolError is an ordinary failure: is_error true with "
            "the error's text {error}, not {results} (reread lesson 2, section 2, 'A failed "
            "tool is not a dangling call')"
        ).format(error=repr(error), results=repr(results[1])),
    )


@fails_with(
    N_(
        "A side-effecting call never runs on resume; a finished receipt in tools.ledger gives its result. Reread the contract of Level 3 (Exercise 2)."
    )
)
def check_turn_receipts(reconcile_turn: Reconcile) -> None:
    """A sent email's and a failed chat post's receipts answer their calls, neither runs again; the read is re-run."""
    calls = [("send_email", EMAIL), ("post_to_chat", CHAT), ("read_file", {"path": RETRO_NOTE})]
    cp = dangling_turn(calls, task=EMAIL_TASK)
    box = fresh_toolbox(EXTRA_TOOLS, ledger=True)
    sent = box.execute("send_email", EMAIL, idempotency_key=_key(cp, 0))  # the email went out before the crash
    ledger = box.ledger
    if ledger is None:  # a bug in the check itself
        raise ValueError("the receipts check needs a ledger")
    ledger.begin(_key(cp, 1), "post_to_chat", CHAT)
    ledger.record(_key(cp, 1), CHAT_DOWN, status="failed")
    box.executed.clear()
    results = _settle(reconcile_turn, cp, box)[1]
    require(
        box.count("send_email") == 0 and box.count("post_to_chat") == 0,
        _("a side-effecting call is never run on resume, not even under its key; execute calls were {executed}").format(
            executed=box.executed
        ),
    )
    require(len(box.world.sent_emails()) == 1, _("the outbox must still hold exactly one email"))
    require(
        not results[0].get("is_error") and results[0].get("content") == sent,
        _(
            "send_email's receipt says it succeeded: its result is the receipt's result "
            "{sent}, not {results} (reread Level 3's contract)"
        ).format(sent=repr(sent), results=repr(results[0])),
    )
    require(
        results[1].get("is_error") is True and results[1].get("content") == CHAT_DOWN,
        _(
            "post_to_chat's receipt says it failed: is_error true with the receipt's result {chat_down}, not {results}"
        ).format(chat_down=repr(CHAT_DOWN), results=repr(results[1])),
    )
    require_rerun(results[2], NOTES[RETRO_NOTE])


def _require_unknown(block: dict[str, Any], name: str) -> None:
    require(
        block.get("is_error") is True and block.get("content") == STATUS_UNKNOWN,
        _(
            "{name} may or may not have happened: its tool_result is is_error true with "
            "rc.STATUS_UNKNOWN as its text, not {block} (reread lesson 2, section 4, 'Move "
            "3: status unknown')"
        ).format(name=name, block=repr(block)),
    )


@fails_with(
    N_(
        "A side-effecting or unknown call with no finished receipt, or no ledger, gets is_error and rc.STATUS_UNKNOWN. Reread the contract of Level 3 (Exercise 2)."
    )
)
def check_turn_status_unknown(reconcile_turn: Reconcile) -> None:
    """Side effects without a finished receipt, an unknown tool, and a toolbox with no ledger: none runs, each is status unknown.

    An unknown tool is answered like a side effect: with a finished receipt, the receipt's result."""
    calls = [("post_to_chat", CHAT), ("archive_note", {"path": "meeting-08-18.md"})]
    calls += [("delete_database", {"name": "prod"}), ("send_email", EMAIL), ("list_dir", {"path": "."})]
    cp = dangling_turn(calls, task=EMAIL_TASK)
    box = fresh_toolbox(EXTRA_TOOLS, ledger=True)
    if box.ledger is None:  # a bug in the check itself
        raise ValueError("the status-unknown check needs a ledger")
    box.ledger.begin(_key(cp, 1), "archive_note", calls[1][1])  # the intent only: the crash came before the end
    results = _settle(reconcile_turn, cp, box)[1]
    require(
        box.executed == [("list_dir", {"path": "."})],
        _(
            "only the read-only list_dir may run: a side effect without a finished receipt, "
            "or a tool the toolbox does not know, is never run; execute calls were {executed}"
        ).format(executed=box.executed),
    )
    require(not box.world.sent_emails() and not (box.world.root / "chat.log").exists(), _("nothing may be sent"))
    for k, name in enumerate(("post_to_chat", "archive_note", _("delete_database (a tool the toolbox does not know)"))):
        _require_unknown(results[k], name)
    _require_unknown(results[3], "send_email")
    bare = fresh_toolbox()  # no ledger at all: there is no receipt to look up
    results = _settle(
        reconcile_turn, dangling_turn([("send_email", EMAIL), ("read_file", {"path": RETRO_NOTE})]), bare
    )[1]
    require(
        bare.executed == [("read_file", {"path": RETRO_NOTE})],
        _("execute calls were {executed}").format(executed=bare.executed),
    )
    _require_unknown(results[0], _("send_email, with no ledger to look in,"))
    _check_unknown_tool_receipt(reconcile_turn)


def _check_unknown_tool_receipt(reconcile_turn: Reconcile) -> None:
    """post_to_chat ran and finished, then a deploy took it out of the toolbox: its receipt answers it, it never runs."""
    cp = dangling_turn([("post_to_chat", CHAT), ("list_dir", {"path": "."})])
    box = fresh_toolbox(ledger=True)  # the default tools: post_to_chat is no longer among them
    if box.ledger is None:  # a bug in the check itself
        raise ValueError("the unknown-tool receipt check needs a ledger")
    posted = f"Posted to #{CHAT['channel']}."
    box.ledger.begin(_key(cp, 0), "post_to_chat", CHAT)
    box.ledger.record(_key(cp, 0), posted)
    results = _settle(reconcile_turn, cp, box)[1]
    require(
        box.executed == [("list_dir", {"path": "."})],
        _(
            "a tool the toolbox does not know is never run, only the read-only list_dir; execute calls were {executed}"
        ).format(executed=box.executed),
    )
    require(
        not results[0].get("is_error") and results[0].get("content") == posted,
        _(
            "post_to_chat is not in this toolbox (a deploy removed it after it ran), so it "
            "is answered like a side effect: its finished receipt says it succeeded, so its "
            "result is the receipt's result {posted}, not {results} (reread Level 3's contract)"
        ).format(posted=repr(posted), results=repr(results[0])),
    )


@fails_with(
    N_(
        "The toolbox's declared effect decides whether a call is re-run, never the tool's name. Reread the contract of Level 3 (Exercise 2)."
    )
)
def check_turn_effect_not_name(reconcile_turn: Reconcile) -> None:
    """A side-effecting tool named read_… is not run and a read-only tally_decisions is: the toolbox's effect decides, not the name."""
    calls = [("read_and_archive", {"path": "meeting-08-18.md"}), ("tally_decisions", {})]
    box = fresh_toolbox(NAME_TRAPS)
    results = _settle(reconcile_turn, dangling_turn(calls), box)[1]
    require(
        box.executed == [("tally_decisions", {})],
        _(
            "what a tool does is declared in the toolbox (tools.is_read_only, tools.effect), "
            "never read off its name: execute calls were {executed} (reread lesson 2, "
            "section 5, 'The rule: by what the tool does')"
        ).format(executed=box.executed),
    )
    require((box.world.notes_dir / "meeting-08-18.md").exists(), _("no note may be archived on resume"))
    _require_unknown(results[0], _("read_and_archive (a side effect, whatever its name)"))
    require_rerun(results[1], fresh_toolbox(NAME_TRAPS).execute("tally_decisions", {}))


@fails_with(
    N_(
        "The Messages API must accept the reconciled turn: one user message, a tool_result per tool_use, in order. Reread the contract of Level 3 (Exercise 2)."
    )
)
def check_turn_api_verdict(reconcile_turn: Reconcile) -> None:
    """The reconciled mixed turn and a real crash between tools are accepted by the Messages API (no 400)."""
    calls = [("list_dir", {"path": "."}), ("send_email", EMAIL), ("delete_database", {"name": "prod"})]
    calls.append(("read_file", {"path": RETRO_NOTE}))
    box = fresh_toolbox(EXTRA_TOOLS, ledger=True)
    out = _settle(reconcile_turn, dangling_turn(calls, recorded=1, task=EMAIL_TASK), box)[0]
    error = _refusal(out.messages, box)
    require(error is None, _("the Messages API refused the reconciled turn with a 400: {error}").format(error=error))
    crashed = crash_parallel_turn("between_tools", "send_email")
    cp = load_checkpoint(crashed.checkpoint_path)
    if cp is None:  # a bug in the check itself
        raise ValueError("the crash left no checkpoint")
    out = _settle(reconcile_turn, cp, CountingToolbox.wrap(crashed.toolbox))[0]
    error = _refusal(out.messages, crashed.toolbox)
    require(
        error is None,
        _("the Messages API refused the reconciled briefing turn with a 400: {error}").format(error=error),
    )


REAL_KILLS: tuple[tuple[str, str, str], ...] = (
    ("after_save_a", "send_email", N_("nothing ran yet: send_email gets status unknown, read_file is re-run")),
    ("after_tool", "send_email", N_("the email went out and its receipt is in the ledger: the receipt answers it")),
    ("between_tools", "send_email", N_("send_email's result was recorded: it is kept, read_file is re-run")),
    ("after_tool", "read_file", N_("send_email's result was recorded, read_file ran: kept, and re-run")),
)
"""The real kills in the briefing's parallel turn (send_email, then read_file) and what each leaves."""


@fails_with(
    N_(
        "A run killed during its parallel turn and resumed with reconcile_turn must finish with one email sent. Reread the contract of Level 3 (Exercise 2)."
    )
)
def check_turn_real_kills(reconcile_turn: Reconcile) -> None:
    """The briefing run killed for real at four points of its parallel turn, resumed with ``reconcile_turn``: it finishes, one email."""
    for point, tool_name, told in REAL_KILLS:
        story = _(told)
        box = crash_parallel_turn(point, tool_name)
        at_crash = load_checkpoint(box.checkpoint_path)
        if at_crash is None or at_crash.turns != PARALLEL_TURN:  # a bug in the check itself
            raise ValueError(f"the crash at {point} left no checkpoint of the parallel turn")
        ledger = box.toolbox.ledger
        receipt = ledger.lookup(_key(at_crash, 0)) if ledger is not None else None
        where = _("killed {point} at {tool_name} in the parallel turn ({story})").format(
            point=point, tool_name=tool_name, story=story
        )
        out, error = resumed_with(box, reconcile_turn)
        require(
            out is not None and error is None, _("{where}: the resume failed: {error}").format(where=where, error=error)
        )
        if out is None:
            return
        require(out.is_finished(), _("{where}: the resumed run must finish").format(where=where))
        emails = len(box.world.sent_emails())
        require(
            emails == 1,
            _("{where}: {emails} emails in the outbox, expected exactly 1").format(where=where, emails=emails),
        )
        require(
            out.messages[: len(at_crash.messages)] == at_crash.messages,
            _("{where}: the conversation up to the parallel turn must stay as it was ({parallel_lesson})").format(
                where=where, parallel_lesson=course_(PARALLEL_LESSON)
            ),
        )
        answer = out.messages[len(at_crash.messages)]["content"]
        by_id = {b.get("tool_use_id"): b for b in answer if isinstance(b, dict)} if isinstance(answer, list) else {}
        ids = _ids(at_crash)
        require(
            all(i in by_id for i in ids),
            _("{where}: both calls of the turn must be answered ({parallel_lesson})").format(
                where=where, parallel_lesson=course_(PARALLEL_LESSON)
            ),
        )
        send, read = (by_id[i] for i in ids)
        if at_crash.recorded_results:
            require(
                send == at_crash.recorded_results[0],
                _("{where}: the recorded result must be kept as it is").format(where=where),
            )
        elif receipt is not None and receipt.done:
            require(
                send.get("content") == receipt.result,
                _("{where}: send_email's result is its receipt's result").format(where=where),
            )
        else:
            _require_unknown(send, f"{where}: send_email")
        require(
            not read.get("is_error") and read.get("content") == NOTES[RETRO_NOTE],
            _("{where}: read_file is read-only: its re-run's output answers it ({parallel_lesson})").format(
                where=where, parallel_lesson=course_(PARALLEL_LESSON)
            ),
        )


TURN_CHECKS: dict[str, Callable[[Reconcile], None]] = {
    "finished": check_checkpoint_a,
    "nothing_pending": check_nothing_pending,
    "turn_between_tools": check_turn_between_tools,
    "turn_keeps_recorded": check_turn_keeps_recorded,
    "turn_read_only": check_turn_read_only,
    "turn_receipts": check_turn_receipts,
    "turn_status_unknown": check_turn_status_unknown,
    "turn_effect_not_name": check_turn_effect_not_name,
    "turn_api_verdict": check_turn_api_verdict,
    "turn_real_kills": check_turn_real_kills,
}
"""Level 3's whole conformance suite of a ``reconcile_turn(cp, tools)``, visible and hidden, by name."""

CONTRACT: dict[str, tuple[str, ...]] = {
    # Level 2: reconcile, one pending call
    "`reconcile` returns a checkpoint with no pending call as it was, and runs no tool.": (
        "check_checkpoint_a",
        "check_nothing_pending",
    ),
    "A pending call of a read-only tool is run again, exactly once, with its recorded input; its output is the "
    "call's result.": ("check_checkpoint_b", "check_other_read_only_tools"),
    "A pending call of a side-effecting tool is never run on resume: its result has `is_error: true` and says the "
    "execution status is unknown (`rc.STATUS_UNKNOWN` is such a text).": (
        "check_checkpoint_c",
        "check_other_side_effect_tools",
    ),
    "A tool the toolbox does not know is never assumed safe: it is not run, and it is answered as a "
    "side-effecting call is.": ("check_unknown_tool_not_run", "check_unknown_tool"),
    "The dangling call is answered, not deleted: the messages stay as they were, one user message holding its "
    "one `tool_result` is appended, and `pending_tool_use` ends `None`.": (
        "check_checkpoint_b",
        "check_checkpoint_c",
        "check_api_accepts",
    ),
    "The Messages API accepts the reconciled conversation, and the reconciled checkpoint saves and loads back "
    "unchanged.": ("check_api_accepts", "check_round_trip"),
    # Level 3: reconcile_turn, a turn of several calls
    "A checkpoint with nothing pending is returned as it is, and no tool runs.": (
        "check_checkpoint_a",
        "check_nothing_pending",
    ),
    "Results already recorded (`cp.recorded_results`) are kept as they are, first: those calls ran.": (
        "check_turn_keeps_recorded",
        "check_turn_between_tools",
        "check_turn_real_kills",
    ),
    "A read-only call is re-run once; its output is its result.": (
        "check_turn_read_only",
        "check_turn_effect_not_name",
        "check_turn_keeps_recorded",
        "check_turn_between_tools",
    ),
    "A read-only call whose re-run raises `rc.ToolError` gets `is_error: true` with the error's text.": (
        "check_turn_read_only",
    ),
    "A side-effecting call is never run on resume. If `tools.ledger` holds a finished receipt for it "
    "(`receipt.done`), its result is the receipt's `result`, with `is_error: true` when the receipt's "
    '`status` is `"failed"`.': (
        "check_turn_receipts",
        "check_turn_real_kills",
    ),
    "A side-effecting call without a finished receipt, or with no ledger at all, gets `is_error: true` "
    "with `rc.STATUS_UNKNOWN` as its text.": (
        "check_turn_status_unknown",
        "check_turn_effect_not_name",
        "check_turn_real_kills",
    ),
    "A tool the toolbox does not know is treated as side-effecting: never run, answered like one.": (
        "check_turn_status_unknown",
    ),
    "All the turn's results go in one user message appended after the turn, one `tool_result` per "
    "`tool_use`, in the blocks' order; `pending_tool_uses` and `recorded_results` end empty.": (
        "check_turn_keeps_recorded",
        "check_turn_between_tools",
        "check_turn_api_verdict",
    ),
    "The Messages API accepts the reconciled conversation, and a run resumed with it after a real crash "
    "in the turn finishes with one email sent.": (
        "check_turn_api_verdict",
        "check_turn_real_kills",
    ),
}
"""Levels 2 and 3's contracts: each rule of the notebook's ``**The contract.**`` lists, and the checks that test it."""


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
