"""Conformance checks for the graded exercises: run any learner's function against them.

Every ``check_*`` takes the learner's function, runs it on real checkpoints, a real world
(files + SQLite outbox) and the scripted Claude behind the real SDK, and raises
``AssertionError`` with one sentence the learner can act on. Nothing here prints, warns or
writes to stderr (nbgrader scores a test cell that writes to stderr 0). Crashes happen in a
forked child (:func:`resumable_core.crash.run_in_child`), never in the caller's process.
Every check makes its own fresh folder with :func:`tempfile.mkdtemp`; none depends on the
working directory.

The notebooks' graded cells call these; so can an instructor, on any ``reconcile``::

    from resumable_core import graders
    graders.conformance(my_reconcile)   # {check name: None if it passed, else the reason}
"""

from __future__ import annotations

import builtins
import copy
import io
import json
import os
import select
import signal
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, PendingToolUse, consistency_problem, load_checkpoint, save_checkpoint, text_of
from ..crash import CRASH_POINTS, CrashPlan, run_in_child
from ..errors import CheckpointError
from ..ledger import Ledger
from ..scenarios import EMAIL_TASK, NOTES_TASK
from ..tools import DEFAULT_TOOLS, Effect, Tool, Toolbox, tool
from ..world import NOTES, World

Reconcile = Callable[[Checkpoint, Toolbox], Checkpoint]


# -- building blocks ---------------------------------------------------------------------------


def scratch(prefix: str = "grader") -> Path:
    """A fresh empty folder (``tempfile.mkdtemp``)."""
    return Path(tempfile.mkdtemp(prefix=f"resumable-{prefix}-"))


class CountingToolbox(Toolbox):
    """A real Toolbox that also records every ``execute`` call (name, input), a call spy."""

    def __init__(self, world: World, tools: Iterable[Tool] = DEFAULT_TOOLS, ledger: Ledger | None = None) -> None:
        super().__init__(world, tools, ledger=ledger)
        self.executed: list[tuple[str, dict[str, Any]]] = []

    @classmethod
    def wrap(cls, box: Toolbox) -> CountingToolbox:
        """The same world, tools and ledger as ``box``, with the spy."""
        return cls(box.world, box._tools.values(), ledger=box.ledger)

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        self.executed.append((name, copy.deepcopy(input)))
        return super().execute(name, input, idempotency_key=idempotency_key)

    def count(self, name: str | None = None) -> int:
        """How many times ``execute`` was called (for ``name``, or for any tool)."""
        return sum(1 for n, _ in self.executed if name is None or n == name)


def fresh_toolbox(extra: Iterable[Tool] = (), *, ledger: bool = False) -> CountingToolbox:
    """A counting toolbox on a fresh world (the meeting notes, an empty outbox)."""
    root = scratch("world")
    world = World.create(root / "world")
    return CountingToolbox(world, (*DEFAULT_TOOLS, *extra), ledger=Ledger(root / "ledger.sqlite") if ledger else None)


def dangling(
    name: str, tool_input: dict[str, Any], *, task: str = NOTES_TASK, tool_use_id: str | None = None
) -> Checkpoint:
    """A checkpoint whose last message asks for ``name(tool_input)`` and has no result yet."""
    tid = tool_use_id or f"toolu_01grader{name.replace('_', '')[:14]:0<14}"
    use = {"type": "tool_use", "id": tid, "name": name, "input": tool_input}
    cp = Checkpoint(
        task=task,
        run_id="run_grader",
        turns=1,
        tokens_used=100,
        messages=[
            {"role": "user", "content": task},
            {"role": "assistant", "content": [{"type": "text", "text": "One moment."}, use]},
        ],
        pending_tool_use=PendingToolUse(id=tid, name=name, input=tool_input),
    )
    assert consistency_problem(cp) is None
    return cp


def mid_run_checkpoint() -> Checkpoint:
    """A checkpoint saved at save point B: the last message is a tool_result, nothing pending."""
    from ..lab.exercise_checkpoints import load_exercise_checkpoint

    cp = load_exercise_checkpoint("C")
    cp.messages = cp.messages[:3]
    cp.pending_tool_use = None
    assert consistency_problem(cp) is None and not cp.is_finished()
    return cp


def run_reconcile(fn: Reconcile, cp: Checkpoint, tools: Toolbox) -> tuple[Checkpoint, Checkpoint]:
    """Call the learner's ``fn(cp, tools)``; return (a copy of cp before, the checkpoint it returned)."""
    before = cp.model_copy(deep=True)
    try:
        out = fn(cp, tools)
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise AssertionError(f"reconcile raised {type(e).__name__}: {e}") from None
    if not isinstance(out, Checkpoint):
        raise AssertionError(f"reconcile must return the reconciled Checkpoint, it returned {type(out).__name__}")
    return before, out


def answered(before: Checkpoint, out: Checkpoint) -> dict[str, Any]:
    """Assert the dangling call got exactly one tool_result in one new user message; return it."""
    p = before.pending_tool_use
    assert p is not None
    n = len(before.messages)
    assert len(out.messages) == n + 1, (
        f"expected exactly one message appended (the user's tool_result for {p.id}); "
        f"had {n} messages, now {len(out.messages)}"
    )
    assert out.messages[:n] == before.messages, "the messages before the dangling call must stay exactly as they were"
    last = out.messages[-1]
    assert last.get("role") == "user", "the appended message must have role 'user'"
    content = last.get("content")
    assert isinstance(content, list) and len(content) == 1, (
        "the appended message must hold exactly one block: the tool_result"
    )
    block = content[0]
    assert isinstance(block, dict) and block.get("type") == "tool_result", "the appended block must be a tool_result"
    assert block.get("tool_use_id") == p.id, (
        f"the tool_result must answer the pending id {p.id}, not {block.get('tool_use_id')}"
    )
    assert out.pending_tool_use is None, "pending_tool_use must be cleared (None) once its tool_result is recorded"
    problem = consistency_problem(out)
    assert problem is None, f"the reconciled checkpoint contradicts itself: {problem}"
    return block


def assert_rerun(block: dict[str, Any], expected_output: str) -> None:
    """The tool_result carries the re-run tool's real output, not an error."""
    assert not block.get("is_error"), "a read-only tool re-ran fine: its tool_result must not be is_error"
    assert text_of(block.get("content")) == expected_output, "the tool_result must hold the tool's output exactly"


def assert_status_unknown(block: dict[str, Any]) -> None:
    """The tool_result is an is_error saying the execution status is unknown."""
    assert block.get("is_error") is True, "a call that may already have happened gets a tool_result with is_error: true"
    assert "unknown" in text_of(block.get("content")).lower(), (
        "the is_error text must say the execution status is unknown"
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


EXTRA_TOOLS = (count_notes, post_to_chat, archive_note)


# -- level 2 of the reconcile notebook ---------------------------------------------------------


def check_finished(fn: Reconcile) -> None:
    """Checkpoint A (a finished run): returned as it is, no tool executed."""
    from ..lab.exercise_checkpoints import load_exercise_checkpoint

    box = fresh_toolbox()
    before, out = run_reconcile(fn, load_exercise_checkpoint("A"), box)
    assert box.count() == 0, f"nothing is pending in A, yet reconcile executed {box.executed}"
    assert out.messages == before.messages, "nothing is pending in A: the messages must be returned unchanged"
    assert out.pending_tool_use is None, "nothing is pending in A: pending_tool_use stays None"
    assert out.is_finished(), "A is a finished run and must stay one"


def check_nothing_pending(fn: Reconcile) -> None:
    """A checkpoint saved at save point B (nothing pending, not finished): returned as it is."""
    box = fresh_toolbox()
    before, out = run_reconcile(fn, mid_run_checkpoint(), box)
    assert box.count() == 0, f"nothing is pending, yet reconcile executed {box.executed}"
    assert out.model_dump() == before.model_dump(), "with nothing pending the checkpoint must be returned unchanged"


def check_checkpoint_b(fn: Reconcile) -> None:
    """Checkpoint B: read_file is re-run exactly once and its output answers the pending id."""
    from ..lab.exercise_checkpoints import load_exercise_checkpoint

    cp = load_exercise_checkpoint("B")
    p = cp.pending_tool_use
    box = fresh_toolbox()
    before, out = run_reconcile(fn, cp, box)
    assert box.count() == 1 and box.executed[0] == (p.name, p.input), (
        f"read_file is read-only: execute it exactly once with the pending input; execute calls were {box.executed}"
    )
    block = answered(before, out)
    assert_rerun(block, NOTES[p.input["path"].split("/")[-1]])


def check_checkpoint_c(fn: Reconcile) -> None:
    """Checkpoint C, crashed for real: send_email is not run again; is_error says status unknown."""
    from ..lab.exercise_checkpoints import exercise_sandbox

    cp, real_box = exercise_sandbox("C", scratch("cp-c"))
    box = CountingToolbox.wrap(real_box)
    assert len(box.world.sent_emails()) == 1  # the crash came after the email went out
    before, out = run_reconcile(fn, cp, box)
    assert box.count() == 0, (
        f"send_email has a side effect: it must not be executed again; execute calls were {box.executed}"
    )
    assert len(box.world.sent_emails()) == 1, "the outbox must still hold exactly one email"
    assert_status_unknown(answered(before, out))


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
        assert box.executed == [(name, tool_input)], (
            f"{name} is read-only: execute it exactly once; execute calls were {box.executed}"
        )
        assert_rerun(answered(before, out), expected)


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
        assert box.count() == 0, (
            f"{name} has a side effect: it must not be executed on resume; execute calls were {box.executed}"
        )
        assert not box.world.sent_emails(), "no email may be sent on resume"
        assert not (box.world.root / "chat.log").exists(), "nothing may be posted on resume"
        assert (box.world.notes_dir / "meeting-08-18.md").exists(), "no note may be archived on resume"
        assert_status_unknown(answered(before, out))


def check_unknown_tool(fn: Reconcile) -> None:
    """A tool the toolbox does not know is never assumed safe: not run, status unknown, no exception."""
    box = fresh_toolbox()
    before, out = run_reconcile(fn, dangling("delete_database", {"name": "prod"}), box)
    assert box.count() == 0, f"an unknown tool must not be executed; execute calls were {box.executed}"
    assert_status_unknown(answered(before, out))


def _send(messages: list[dict[str, Any]], box: Toolbox) -> str | None:
    """Send a conversation to the scripted Claude; the API's 400 message, or None if accepted."""
    import anthropic

    from ..claude import MAX_TOKENS, make_client, model_id

    try:
        make_client(live=False).messages.create(
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
    from ..lab.exercise_checkpoints import exercise_sandbox, load_exercise_checkpoint

    cp_c, box_c = exercise_sandbox("C", scratch("cp-c"))
    box_x = fresh_toolbox(EXTRA_TOOLS)
    cases = [
        ("B", load_exercise_checkpoint("B"), fresh_toolbox()),
        ("C", cp_c, box_c),
        ("post_to_chat", dangling("post_to_chat", {"channel": "general", "text": "Done."}), box_x),
    ]
    for label, cp, box in cases:
        _, out = run_reconcile(fn, cp, box)
        error = _send(out.messages, box)
        assert error is None, f"the Messages API refused the reconciled {label} with a 400: {error}"


def check_round_trip(fn: Reconcile) -> None:
    """The reconciled B and C survive save_checkpoint then load_checkpoint, unchanged and consistent."""
    from ..lab.exercise_checkpoints import exercise_sandbox, load_exercise_checkpoint

    cp_c, box_c = exercise_sandbox("C", scratch("cp-c"))
    for label, cp, box in (("B", load_exercise_checkpoint("B"), fresh_toolbox()), ("C", cp_c, box_c)):
        _, out = run_reconcile(fn, cp, box)
        path = scratch("round-trip") / "checkpoint.json"
        save_checkpoint(out, path)
        try:
            loaded = load_checkpoint(path)
        except CheckpointError as e:
            raise AssertionError(f"the reconciled {label} was saved but cannot be loaded back: {e.reason}") from None
        assert loaded is not None and loaded.model_dump() == out.model_dump(), (
            f"the reconciled {label} changed across save and load"
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
"""The conformance suite of a ``reconcile(cp, tools)``, by name."""


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


# -- the postmortem: replay the incident for real ----------------------------------------------


@dataclass
class Replay:
    """One crash-and-resume of a scenario with the learner's reconcile."""

    killed: bool
    pending_at_crash: dict[str, Any] | None
    emails_at_crash: int
    emails: int
    error: str | None
    """The API's 400 text, or the exception the resume raised; None when the resume went through."""
    checkpoint: Checkpoint | None
    reads: int
    """How many times read_file really ran with the crashed call's input."""

    def result_for(self, tool_use_id: str) -> dict[str, Any] | None:
        """The tool_result block answering ``tool_use_id`` in the resumed conversation."""
        for m in self.checkpoint.messages if self.checkpoint else []:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id:
                    return b
        return None


def replay(
    fn: Reconcile, crash_point: str = "after_tool", tool_name: str = "send_email", *, ledger: bool = False
) -> Replay:
    """SIGKILL a run in a forked child at ``crash_point`` on the turn calling ``tool_name``, resume with ``fn``."""
    import anthropic

    from ..scenarios import SCENARIOS, Sandbox

    box = Sandbox.create(scratch("replay"), ledger=ledger)
    task = SCENARIOS[tool_name].task
    plan = CrashPlan(crash_point, tool=tool_name, turn=SCENARIOS[tool_name].reference_turn())
    ended = run_in_child(lambda: box.run(task, crash=plan))
    raw = json.loads(box.checkpoint_path.read_text()) if box.checkpoint_path.exists() else None
    emails_at_crash = len(box.world.sent_emails())
    error, cp = None, None
    try:
        cp = box.run(task, reconcile=fn).checkpoint
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        error = "API 400: " + ((body.get("error") or {}).get("message") or str(e))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        error = f"{type(e).__name__}: {e}"
    reads = sum(1 for _, i in box.world.calls("read_file") if i == SCENARIOS["read_file"].target_input())
    return Replay(
        ended == "killed",
        (raw or {}).get("pending_tool_use"),
        emails_at_crash,
        len(box.world.sent_emails()),
        error,
        cp,
        reads,
    )


def reference_turns(tool_name: str) -> int:
    """Model calls of the scenario run without any crash."""
    from ..scenarios import finished_turns

    return finished_turns(tool_name)


def check_incident(fn: Reconcile) -> None:
    """The postmortem's crash (SIGKILL after send_email, before save point B): one email, run finishes."""
    r = replay(fn, "after_tool", "send_email")
    assert r.killed and r.emails_at_crash == 1, "the replay should crash after the email went out"
    assert r.error is None, f"the resume failed: {r.error}"
    assert r.emails == 1, f"the team received {r.emails} emails; exactly one is correct"
    assert r.checkpoint is not None and r.checkpoint.is_finished(), "the resumed run must finish"
    assert consistency_problem(r.checkpoint) is None


def check_read_file_rerun(fn: Reconcile) -> None:
    """A crash before read_file ran: resume re-runs it and its tool_result holds the file's text."""
    r = replay(fn, "after_save_a", "read_file")
    assert r.killed and r.pending_at_crash and r.pending_at_crash["name"] == "read_file"
    assert r.error is None, f"the resume failed: {r.error}"
    block = r.result_for(r.pending_at_crash["id"])
    assert block is not None, "the dangling read_file call was never answered: read-only calls are re-run, not dropped"
    path = r.pending_at_crash["input"]["path"]
    assert not block.get("is_error") and text_of(block.get("content")) == NOTES[path.split("/")[-1]], (
        "the read_file tool_result must hold the file's text (re-run it: it is read-only)"
    )
    assert r.reads == 1, f"read_file ran {r.reads} times for the crashed call; once is right"
    assert r.checkpoint is not None and r.checkpoint.is_finished(), "the resumed run must finish"
    expected = reference_turns("read_file")
    assert r.checkpoint.turns == expected, (
        f"the run took {r.checkpoint.turns} model calls, an uncrashed run takes {expected}: "
        "answering the dangling call costs no extra turn, dropping it does"
    )


def check_every_crash_point(fn: Reconcile, *, ledger: bool = False) -> None:
    """At every crash point, for both scenarios: no 400, the run finishes, at most one email, one in the end."""
    for tool_name in ("read_file", "send_email"):
        for point in CRASH_POINTS:
            r = replay(fn, point, tool_name, ledger=ledger)
            where = f"crash {point} on the {tool_name} turn"
            assert r.error is None, f"{where}: the resume failed: {r.error}"
            assert r.checkpoint is not None and r.checkpoint.is_finished(), f"{where}: the resumed run must finish"
            want = 1 if tool_name == "send_email" else 0
            assert r.emails == want, f"{where}: {r.emails} emails in the outbox, expected {want}"


def check_ledger_incident(fn: Reconcile) -> None:
    """With a ledger: the postmortem's crash ends with one email and no extra turn (no is_error detour)."""
    expected = reference_turns("send_email")
    for point in ("after_save_a", "after_tool"):
        r = replay(fn, point, "send_email", ledger=True)
        where = f"crash {point} on the send_email turn"
        assert r.error is None, f"{where}: the resume failed: {r.error}"
        assert r.emails == 1, f"{where}: {r.emails} emails; the idempotency key makes it exactly one"
        block = r.result_for(r.pending_at_crash["id"])
        assert block is not None and not block.get("is_error"), (
            f"{where}: with a ledger the call can be finished under its idempotency key: no is_error fallback"
        )
        assert r.checkpoint is not None and r.checkpoint.is_finished()
        assert r.checkpoint.turns == expected, (
            f"{where}: the run took {r.checkpoint.turns} model calls, an uncrashed run takes {expected}"
        )
    r = replay(fn, "after_save_a", "read_file", ledger=True)
    assert r.error is None and r.reads == 1, "read-only calls are still re-run when a ledger is present"


# -- the resume skeleton: atomic save, version-checked load ------------------------------------


Save = Callable[[dict[str, Any], str], None]
Load = Callable[[str], Any]


def sample_state(version: int = 1, *, size: int = 0, turns: int = 3) -> dict[str, Any]:
    """A state dict shaped like a checkpoint; ``size`` pads a message to about that many bytes."""
    text = "meeting notes " * (size // 14) if size else "Summary so far."
    return {
        "version": version,
        "task": NOTES_TASK,
        "turns": turns,
        "tokens_used": 1000 * turns,
        "messages": [{"role": "user", "content": NOTES_TASK}, {"role": "assistant", "content": text}],
        "pending_tool_use": None,
    }


def _load(load: Load, path: Path, what: str) -> Any:
    try:
        return load(str(path))
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{what}: load_state raised {type(e).__name__}: {e}") from None


def check_state_round_trip(save: Save, load: Load) -> None:
    """What save_state writes, load_state reads back equal; no temp file is left behind."""
    folder = scratch("state")
    path = folder / "state.json"
    state = sample_state()
    save(copy.deepcopy(state), str(path))
    assert _load(load, path, "after a save") == state, "load_state must return the state save_state wrote"
    save(sample_state(turns=4), str(path))
    assert _load(load, path, "after a second save") == sample_state(turns=4), "a second save must replace the first"
    leftovers = sorted(p.name for p in folder.iterdir() if p.name != "state.json")
    assert not leftovers, f"a finished save leaves only the state file; found {leftovers}"


def check_state_missing(load: Load) -> None:
    """load_state returns None when there is no file (a fresh start), and creates none."""
    path = scratch("state") / "state.json"
    assert _load(load, path, "with no file") is None, "with no file, load_state must return None"
    assert not path.exists(), "load_state must not create the file"


def check_state_version_refused(load: Load, versions: Iterable[Any] = (2,)) -> None:
    """A file of another version is refused with a ValueError (or a CheckpointError) and left as it was."""
    for version in versions:
        path = scratch("state") / "state.json"
        path.write_text(json.dumps(sample_state(version=version)))
        before = path.read_bytes()
        try:
            got = load(str(path))
        except (ValueError, CheckpointError):
            pass
        except Exception as e:  # noqa: BLE001
            raise AssertionError(
                f"version {version!r}: raise a ValueError (subclass), not {type(e).__name__}: {e}"
            ) from None
        else:
            raise AssertionError(
                f"a file of version {version!r} must be refused, load_state returned {type(got).__name__}"
            )
        assert path.read_bytes() == before, "load_state must never change the file, even one it refuses"


def check_load_never_modifies(save: Save, load: Load) -> None:
    """Loading a good file leaves its bytes and modification time as they were."""
    path = scratch("state") / "state.json"
    save(sample_state(), str(path))
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    _load(load, path, "loading a good file")
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime, "load_state must only read the file"


class _PausingFile:
    """A file opened for writing whose first write puts half its data on disk, then waits to be killed."""

    def __init__(self, f: Any, pause: Callable[[], None]) -> None:
        self._f = f
        self._pause = pause

    def write(self, data: Any) -> int:
        self._f.write(data[: max(1, len(data) // 2)])
        self._f.flush()
        self._pause()
        return len(data)  # pragma: no cover - the process is killed in _pause

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _PausingFile:
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._f.__exit__(*exc)

    def __iter__(self) -> Any:
        return iter(self._f)


def _arm_pause_on_first_write(notify: int, namespace: dict[str, Any]) -> None:
    """In the child: the first write of save_state (any file opened for writing, or os.write) pauses.

    ``namespace`` is the save function's globals: IPython puts its own ``open`` there.
    """
    real_open, real_write = io.open, os.write

    def pause() -> None:
        real_write(notify, b"P")
        while True:
            signal.pause()

    def pausing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real_open(file, mode, *args, **kwargs)
        return _PausingFile(f, pause) if any(ch in mode for ch in "wax+") else f

    def pausing_write(fd: int, data: bytes) -> int:
        if fd == notify:
            return real_write(fd, data)
        real_write(fd, data[: max(1, len(data) // 2)])
        pause()
        return len(data)  # pragma: no cover

    builtins.open = io.open = pausing_open  # type: ignore[assignment]
    if "open" in namespace:
        namespace["open"] = pausing_open
    os.write = pausing_write  # type: ignore[assignment]


def kill_during_save(save: Save, path: str | Path, state: dict[str, Any], *, timeout: float = 30.0) -> str:
    """Fork a child that runs ``save(state, path)``; SIGKILL it from here once its first write is half done.

    Returns "killed mid-write", "finished" (the save never wrote through a file or os.write),
    or "raised" (save_state raised in the child).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into the caller
        code = 0
        try:
            os.close(r)
            _arm_pause_on_first_write(w, getattr(save, "__globals__", {}))
            save(state, str(path))
            os.write(w, b"D")
        except BaseException:  # noqa: BLE001
            try:
                os.write(w, b"E")
            finally:
                code = 1
        os._exit(code)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], timeout)
        said = os.read(r, 1) if ready else b""
    finally:
        os.close(r)
    if said != b"D":
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.waitpid(pid, 0)
    return {b"P": "killed mid-write", b"D": "finished", b"E": "raised"}.get(said, "killed (hung)")


def check_kill_during_save(save: Save, load: Load) -> None:
    """SIGKILL mid-write of a second save: load_state still returns the first, good state; saving works after."""
    folder = scratch("kill")
    path = folder / "state.json"
    good, new = sample_state(turns=3), sample_state(turns=4, size=2_000_000)
    save(copy.deepcopy(good), str(path))
    how = kill_during_save(save, path, new)
    assert how == "killed mid-write", f"the save was expected to be killed while writing, but it {how}"
    got = _load(load, path, "after a kill in the middle of a save")
    assert got == good, "after a kill in the middle of a save, load_state must return the previous good state"
    save(copy.deepcopy(new), str(path))
    assert _load(load, path, "saving again after the kill") == new, "a save after the crash must work and be read back"


def check_durable_steps(save: Save) -> None:
    """save_state writes a temp file in the same folder, fsyncs it, os.replace()s it, then fsyncs the folder."""
    folder = scratch("durable")
    path = folder / "state.json"
    events: list[tuple[str, Any]] = []
    real_open, real_fsync, real_fdatasync, real_replace, real_rename = (
        io.open,
        os.fsync,
        os.fdatasync,
        os.replace,
        os.rename,
    )

    def spy_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(ch in mode for ch in "wax+") and not isinstance(file, int):
            events.append(("open", Path(file).resolve()))
        return real_open(file, mode, *args, **kwargs)

    def spy_sync(real: Callable[[int], None]) -> Callable[[Any], None]:
        def sync(fd: Any) -> None:
            fd_num = fd if isinstance(fd, int) else fd.fileno()
            st = os.fstat(fd_num)
            events.append(("fsync", (stat.S_ISDIR(st.st_mode), st.st_dev, st.st_ino)))
            real(fd)

        return sync

    def spy_move(real: Callable[..., None]) -> Callable[..., None]:
        def move(src: Any, dst: Any, *a: Any, **k: Any) -> None:
            events.append(("replace", (Path(src).resolve(), Path(dst).resolve())))
            real(src, dst, *a, **k)

        return move

    namespace = getattr(save, "__globals__", {})  # IPython puts its own ``open`` in a notebook's globals
    ns_open = namespace.get("open")
    builtins.open = io.open = spy_open  # type: ignore[assignment]
    if ns_open is not None:
        namespace["open"] = spy_open
    os.fsync, os.fdatasync = spy_sync(real_fsync), spy_sync(real_fdatasync)  # type: ignore[assignment]
    os.replace, os.rename = spy_move(real_replace), spy_move(real_rename)  # type: ignore[assignment]
    try:
        save(sample_state(), str(path))
    finally:
        builtins.open = io.open = real_open  # type: ignore[assignment]
        if ns_open is not None:
            namespace["open"] = ns_open
        os.fsync, os.fdatasync, os.replace, os.rename = real_fsync, real_fdatasync, real_replace, real_rename
    target = path.resolve()
    moves = [i for i, (kind, _) in enumerate(events) if kind == "replace" and events[i][1][1] == target]
    assert moves, "save_state must finish with os.replace(temp, path): the switch to the new file is one atomic step"
    move = moves[-1]
    tmp = events[move][1][0]
    assert tmp.parent == target.parent, (
        "the temp file must be in the same folder as the state file (rename is atomic only within one file system)"
    )
    assert ("open", target) not in events, "save_state must never open the state file itself for writing"
    folder_id = (True, os.stat(folder).st_dev, os.stat(folder).st_ino)
    assert any(kind == "fsync" and not info[0] for kind, info in events[:move]), (
        "flush and os.fsync the temp file before the rename, so its bytes are on disk first"
    )
    assert ("fsync", folder_id) in events[move:], (
        "os.fsync the folder after the rename, so the rename itself is durable"
    )


SKELETON_CHECKS = (
    "check_state_round_trip",
    "check_state_missing",
    "check_state_version_refused",
    "check_load_never_modifies",
    "check_kill_during_save",
    "check_durable_steps",
)
