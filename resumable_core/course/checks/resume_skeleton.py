"""The visible checks of the ``resume_skeleton`` assignment: an atomic save, a version-checked load.

Its test cells call these as ``checks.check_*(save_state, load_state)``; the hidden ones live
with the instructor (:mod:`resumable_core.course.hidden.resume_skeleton`).
"""

from __future__ import annotations

import builtins
import copy
import io
import json
import os
import stat
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...crash import CrashError, run_in_child
from ...errors import CheckpointError
from ...lab.crash_test import (
    _die_in_first_write,
)  # private: no public kit callable may patch open (test_no_answers tries them)
from ...lab.i18n import N_
from ...scenarios import NOTES_TASK
from ..i18n import _
from ..i18n import say as say  # test cells print checks.say("...")
from .support import (
    CheckFailed,
    call_learner,
    error_text,
    handed,
    is_remote,
    observes,
    require,
    same_data,
    scratch,
)

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


def plain_state() -> dict[str, Any]:
    """A state that is no checkpoint: save_state writes any JSON object with a version."""
    return {"version": 1, "cursor": 7, "done": ["meeting-08-18.md"], "draft": {"lines": 2, "text": "Summary so far."}}


def load_or_fail(load: Load, path: Path, what: str) -> Any:
    """``load(path)``; an exception it raises becomes a :class:`CheckFailed` saying when."""
    try:
        return call_learner(load, handed(path, folder=True))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(_("{what}: load_state raised {error}").format(what=what, error=error_text(e))) from None


def check_state_round_trip(save: Save, load: Load) -> None:
    """What save_state writes (a checkpoint's fields or any JSON object), load_state reads back equal; no temp file is left."""
    folder = scratch("state")
    path = folder / "state.json"
    state = sample_state()
    call_learner(save, copy.deepcopy(state), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, _("after a save")), state),
        _("load_state must return the state save_state wrote"),
    )
    call_learner(save, sample_state(turns=4), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, _("after a second save")), sample_state(turns=4)),
        _("a second save must replace the first"),
    )
    call_learner(save, plain_state(), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, _("after saving a state that is no checkpoint")), plain_state()),
        _("save_state must write any JSON object with a version, not only a checkpoint"),
    )
    leftovers = sorted(p.name for p in folder.iterdir() if p.name != "state.json")
    require(
        not leftovers, _("a finished save leaves only the state file; found {leftovers}").format(leftovers=leftovers)
    )


def check_state_missing(load: Load) -> None:
    """load_state returns None when there is no file (a fresh start), and creates none."""
    path = scratch("state") / "state.json"
    require(load_or_fail(load, path, _("with no file")) is None, _("with no file, load_state must return None"))
    require(not path.exists(), _("load_state must not create the file"))


def check_state_version_refused(load: Load, versions: Iterable[Any] = (2,)) -> None:
    """A file of another version is refused with a ValueError (or a CheckpointError) and left as it was."""
    for version in versions:
        path = scratch("state") / "state.json"
        path.write_text(json.dumps(sample_state(version=version)))
        before = path.read_bytes()
        try:
            got = call_learner(load, handed(path, folder=True))
        except (ValueError, CheckpointError):
            pass
        except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
            raise CheckFailed(
                _("version {version}: raise a ValueError (subclass), not {error}").format(
                    version=repr(version), error=error_text(e)
                )
            ) from None
        else:
            raise CheckFailed(
                _("a file of version {version} must be refused, load_state returned {name}").format(
                    version=repr(version), name=type(got).__name__
                )
            )
        require(path.read_bytes() == before, _("load_state must never change the file, even one it refuses"))
    path = scratch("state") / "state.json"  # and the right version, written by someone else, is read
    path.write_text(json.dumps(sample_state(turns=5)))
    require(
        same_data(
            load_or_fail(load, path, _("a file of this version that save_state did not write")), sample_state(turns=5)
        ),
        _("load_state must read a file of its own version whoever wrote it: refusing every file is no version check"),
    )


def kill_during_save(save: Save, path: str | Path, state: dict[str, Any], *, timeout: float = 30.0) -> str:
    """Run ``save(state, path)`` in a forked child that dies of SIGKILL once its first write is half done.

    Returns "killed mid-write", "finished" (the save never wrote through a file or os.write), or
    "failed in the child (...)" with the last line of why (save_state raised, or hung past ``timeout``).
    """
    return kill_in_first_write(lambda: call_learner(save, state, str(path)), save, timeout=timeout)


def kill_in_first_write(run: Callable[[], Any], fn: Any, *, timeout: float = 30.0) -> str:
    """``run()`` (a call of the learner's ``fn``) in a forked child that dies of SIGKILL once its first write is half done.

    Returns what :func:`kill_during_save` does; ``fn``'s globals are where a notebook keeps its ``open``.
    """

    def doomed() -> None:
        undo = _die_in_first_write(getattr(fn, "__globals__", {}))
        try:
            run()
        finally:  # the child reports a raise through os.write: it must be the real one again
            undo()

    try:
        ended = run_in_child(doomed, timeout=timeout)
    except CrashError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        return f"failed in the child ({lines[-1] if lines else type(e).__name__})"
    return "killed mid-write" if ended == "killed" else "finished"


Event = tuple[str, Any]


def record_save(save: Save, path: Path) -> list[Event]:
    """In the learner's kernel only (a spy there is a hint, never believed by the re-check): run ``save(sample_state(), path)`` with spies on open-for-writing, fsync/fdatasync and replace/rename."""
    return record_calls(lambda: call_learner(save, sample_state(), str(path)), save)


def record_calls(run: Callable[[], Any], fn: Any) -> list[Event]:
    """``run()`` (a call of the learner's ``fn``, in this kernel) with the spies of :func:`record_save`; the events they saw."""
    events: list[Event] = []
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
            st = os.fstat(fd if isinstance(fd, int) else fd.fileno())
            events.append(("fsync", (stat.S_ISDIR(st.st_mode), st.st_dev, st.st_ino)))
            real(fd)

        return sync

    def spy_move(real: Callable[..., None]) -> Callable[..., None]:
        def move(src: Any, dst: Any, *a: Any, **k: Any) -> None:
            events.append(("replace", (Path(src).resolve(), Path(dst).resolve())))
            real(src, dst, *a, **k)

        return move

    namespace = getattr(fn, "__globals__", {})  # IPython puts its own ``open`` in a notebook's globals
    ns_open = namespace.get("open")
    builtins.open = io.open = spy_open  # restored in the finally below
    if ns_open is not None:
        namespace["open"] = spy_open
    os.fsync, os.fdatasync = spy_sync(real_fsync), spy_sync(real_fdatasync)  # type: ignore[assignment]  # likewise
    os.replace, os.rename = spy_move(real_replace), spy_move(real_rename)
    try:
        run()
    finally:
        builtins.open = io.open = real_open
        if ns_open is not None:
            namespace["open"] = ns_open
        os.fsync, os.fdatasync, os.replace, os.rename = real_fsync, real_fdatasync, real_replace, real_rename
    return events


def observed_save(save: Save, path: Path, state: dict[str, Any]) -> Any:
    """``save(state, path)`` in the learner's process, its system calls traced from outside (the re-check only).

    Returns what the checker saw, whose ``atomic_problem()`` and ``durable_problem()`` are each None
    or the reason: nothing the learner's process says about its own writes is believed.
    """
    observe = getattr(type(save), "observe", None)  # on the type: nothing the learner made defines it there
    if observe is None:  # a bug of the caller: only a function of the learner's process is observed
        raise ValueError("observed_save needs a function of the learner's process")
    return call_learner(observe, save, state, handed(path, folder=True))


@observes
def check_kill_during_save(save: Save, load: Load) -> None:
    """SIGKILL mid-write of a second save: load_state still returns the first, good state; saving works after.

    In the learner's kernel the child really dies halfway through its first write. In the isolated
    re-check the save runs under a tracer outside the learner's process, and a kill at any of its
    writes must leave the old or the new state whole (no write in place, a rename onto the file).
    """
    path = scratch("kill") / "state.json"
    good, new = sample_state(turns=3), sample_state(turns=4, size=2_000_000)
    call_learner(save, copy.deepcopy(good), handed(path, folder=True))
    if is_remote(save):
        seen = observed_save(save, path, new)
        atomic = seen.atomic_problem()
        require(
            atomic is None, _("a kill in the middle of this save would lose the state: {atomic}").format(atomic=atomic)
        )
        require(
            same_data(load_or_fail(load, path, _("after the save")), new),
            _("load_state must return the state just saved"),
        )
        return
    how = kill_during_save(save, path, new)
    require(
        how == "killed mid-write", _("the save was expected to be killed while writing, but it {how}").format(how=how)
    )
    got = load_or_fail(load, path, _("after a kill in the middle of a save"))
    require(
        same_data(got, good), _("after a kill in the middle of a save, load_state must return the previous good state")
    )
    call_learner(save, copy.deepcopy(new), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, _("saving again after the kill")), new),
        _("a save after the crash must work and be read back"),
    )


# -- the journal: append_record, read_journal, replay ----------------------------------------------

Append = Callable[[str, dict[str, Any]], None]
Read = Callable[[str], Any]
Replay = Callable[[list[dict[str, Any]]], Any]

JOURNAL_HEADER: dict[str, Any] = {"format": "resumable-journal", "version": 1}
"""The journal's first line, as the exercise fixes it."""
JOURNAL = "journal.jsonl"
REREAD_LAYOUT = N_("reread the exercise's journal format")
REREAD_TORN = N_(
    "reread Part 2 of this exercise, 'The other form: an append-only journal', where a kill mid-append "
    "leaves a torn last line"
)
REREAD_VERSION = N_("reread lesson 1, section 5, 'Loading: the version check, and the other refusals'")
REREAD_CARRY = N_("reread lesson 1, section 8, '`turns` and `tokens_used` carry over'")


def turn_record(turn: int, *, size: int = 0) -> dict[str, Any]:
    """The record of turn ``turn``: its new messages and its tokens; ``size`` pads the reply to about that many bytes."""
    text = f"Read meeting-08-{17 + turn}.md." + (" notes" * (size // 6) if size else "")
    use = {"type": "tool_use", "id": f"toolu_turn{turn:02d}", "name": "read_file", "input": {"path": f"m{turn}.md"}}
    return {
        "turn": turn,
        "messages": [
            {"role": "assistant", "content": [{"type": "text", "text": text}, use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "é ok"}]},
        ],
        "tokens": 900 + 37 * turn,
    }


def journal_line(record: Any, *, checksum: str | None = None) -> bytes:
    """One record's line as the exercise fixes it: compact JSON, a tab, its CRC-32 in 8 hex digits, a newline."""
    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return data + b"\t" + (checksum or f"{zlib.crc32(data):08x}").encode() + b"\n"


def journal_bytes(records: Iterable[Any], header: Any = None) -> bytes:
    """A whole journal: the header line (``JOURNAL_HEADER`` unless given) and each record's line."""
    head = json.dumps(JOURNAL_HEADER if header is None else header, separators=(",", ":")).encode() + b"\n"
    return head + b"".join(journal_line(r) for r in records)


def whole_journal(data: bytes, name: str) -> list[Any]:
    """The records of a journal the learner's append_record wrote, every line whole; :class:`CheckFailed` saying what is off."""
    lines = data.split(b"\n")
    require(
        lines[-1] == b"",
        _("{name} must end with a newline: every line, the last too, ends in \\n ({reread_layout})").format(
            name=name, reread_layout=_(REREAD_LAYOUT)
        ),
    )
    try:
        header = json.loads(lines[0])
    except ValueError:
        header = None
    require(
        same_data(header, JOURNAL_HEADER),
        _("the first line of {name} must be the header {dumps}, not {lines} ({reread_layout})").format(
            name=name, dumps=json.dumps(JOURNAL_HEADER), lines=repr(lines[0][:80]), reread_layout=_(REREAD_LAYOUT)
        ),
    )
    records = []
    for number, line in enumerate(lines[1:-1], 2):
        text, tab, crc = line.rpartition(b"\t")
        require(
            tab,
            _("line {number} of {name} has no tab between the record's JSON and its checksum ({reread_layout})").format(
                number=number, name=name, reread_layout=_(REREAD_LAYOUT)
            ),
        )
        require(
            crc == f"{zlib.crc32(text):08x}".encode(),
            _(
                "line {number} of {name}: its checksum must be the CRC-32 of the JSON before the "
                'tab, as f"{{zlib.crc32(data):08x}}" ({reread_layout})'
            ).format(number=number, name=name, reread_layout=_(REREAD_LAYOUT)),
        )
        records.append(json.loads(text))
    return records


def read_or_fail(read: Read, path: Path, what: str) -> Any:
    """``read_journal(path)``; an exception it raises becomes a :class:`CheckFailed` saying when."""
    try:
        return call_learner(read, handed(path, folder=True))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(_("{what}: read_journal raised {error}").format(what=what, error=error_text(e))) from None


def append_or_fail(append: Append, path: Path, record: dict[str, Any], what: str) -> None:
    """``append_record(path, record)``; an exception it raises becomes a :class:`CheckFailed` saying when."""
    try:
        call_learner(append, handed(path, folder=True), copy.deepcopy(record))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(_("{what}: append_record raised {error}").format(what=what, error=error_text(e))) from None


def require_read(read: Read, path: Path, expected: list[Any], what: str, why: str) -> None:
    """``read_journal(path)`` returns ``expected`` (plain data) and leaves the file's bytes as they were."""
    before = path.read_bytes() if path.exists() else None
    got = read_or_fail(read, path, what)
    n = len(got) if isinstance(got, list) else type(got).__name__
    require(
        same_data(got, expected),
        _("{what}, read_journal must return {n_expected} record(s), got {n}: {why}").format(
            what=what, n_expected=len(expected), n=n, why=why
        ),
    )
    after = path.read_bytes() if path.exists() else None
    require(after == before, _("{what}: read_journal must never change the file (it only reads)").format(what=what))


def require_refused(read: Read, path: Path, what: str, why: str) -> None:
    """``read_journal(path)`` raises a ValueError (a subclass too) and leaves the file as it was."""
    before = path.read_bytes()
    try:
        got = call_learner(read, handed(path, folder=True))
    except ValueError:
        pass
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(
            _("{what}: raise a ValueError (subclass), not {error}").format(what=what, error=error_text(e))
        ) from None
    else:
        raise CheckFailed(
            _("{what}, read_journal must raise ValueError, it returned {name}: {why}").format(
                what=what, name=type(got).__name__, why=why
            )
        )
    require(
        path.read_bytes() == before,
        _("{what}: read_journal must never change the file, even one it refuses").format(what=what),
    )


def observed_append(append: Append, path: Path, record: dict[str, Any], what: str) -> Any:
    """``append(path, record)`` traced from outside the learner's process (the re-check only): the :class:`~..grading.recheck.syscalls.Append` seen."""
    observe = getattr(type(append), "observe", None)  # on the type: nothing the learner made defines it there
    if observe is None:  # a bug of the caller: only a function of the learner's process is observed
        raise ValueError("an observed append needs a function of the learner's process")
    before = path.read_bytes() if path.exists() else None
    try:
        seen = call_learner(observe, append, handed(path, folder=True), copy.deepcopy(record))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(_("{what}: append_record raised {error}").format(what=what, error=error_text(e))) from None
    return seen.append(before, path.read_bytes() if path.exists() else None)


def require_appends_only(append: Append, path: Path, record: dict[str, Any], what: str) -> Any:
    """Append ``record`` and require that nothing but new bytes at the end changed (traced in the re-check); the trace's reading, or None here."""
    before = path.read_bytes() if path.exists() else b""
    kept = before[: before.rfind(b"\n") + 1]  # every complete line: what an append leaves as it was
    rewrote = _(
        "{what}: append_record must add one line at the end of the journal, never write "
        "over its lines or replace the file (a snapshot is rewritten whole; a journal "
        "only grows; {reread_layout})"
    ).format(what=what, reread_layout=_(REREAD_LAYOUT))
    if is_remote(append):
        seen = observed_append(append, path, record, what)
        require(seen.problem is None, _("{what}: {problem}").format(what=what, problem=seen.problem))
        require(seen.start is None or seen.start >= len(kept), rewrote)
        return seen
    inode = path.stat().st_ino if path.exists() else None
    append_or_fail(append, path, record, what)
    require(path.exists(), _("{what}: append_record left no file").format(what=what))
    require(inode is None or path.stat().st_ino == inode, rewrote)
    require(path.read_bytes().startswith(kept), rewrote)
    return None


@observes
def check_journal_round_trip(append: Append, read: Read) -> None:
    """No file reads as []; three appends to a new journal write the header and three lines in the fixed format, and read back in order."""
    folder = scratch("journal")
    path = folder / JOURNAL
    require_read(read, path, [], _("with no file"), _("no journal yet is an empty one"))
    require(not path.exists(), _("read_journal must not create the file"))
    records = [turn_record(t) for t in (1, 2, 3)]
    for n, record in enumerate(records, 1):
        require_appends_only(append, path, record, _("append {n}").format(n=n))
        require(
            same_data(whole_journal(path.read_bytes(), JOURNAL), records[:n]),
            _(
                "after append {n}, the journal must hold the header and {n} record line(s), in order ({reread_layout})"
            ).format(n=n, reread_layout=_(REREAD_LAYOUT)),
        )
    leftovers = sorted(p.name for p in folder.iterdir() if p.name != JOURNAL)
    require(
        not leftovers,
        _("appending leaves only the journal in its folder; found {leftovers}").format(leftovers=leftovers),
    )
    require_read(read, path, records, _("after three appends"), _("every record, in the order appended"))


def check_journal_version(read: Read, versions: Iterable[Any] = (2,)) -> None:
    """A journal whose header has another version is refused with a ValueError; the checker's own version-1 journal is read."""
    records = [turn_record(1), turn_record(2)]
    for version in versions:
        path = scratch("journal") / JOURNAL
        path.write_bytes(journal_bytes(records, header={**JOURNAL_HEADER, "version": version}))
        require_refused(
            read,
            path,
            _("a journal of version {version}").format(version=repr(version)),
            _("check the header's version first ({reread_version})").format(reread_version=_(REREAD_VERSION)),
        )
    path = scratch("journal") / JOURNAL
    path.write_bytes(journal_bytes(records))
    require_read(
        read,
        path,
        records,
        _("a version-1 journal that append_record did not write"),
        _("read any journal of this version in the fixed format: refusing every file is no version check"),
    )


def torn(records: list[dict[str, Any]], last: dict[str, Any], keep: int) -> bytes:
    """A journal of ``records`` then the first ``keep`` bytes of ``last``'s line (a kill mid-append)."""
    return journal_bytes(records) + journal_line(last)[:keep]


def check_torn_tail_ignored(read: Read) -> None:
    """A journal ending in part of a line (no newline yet) reads as the records before it, and is left as it was."""
    records = [turn_record(1), turn_record(2)]
    line = journal_line(turn_record(3))
    for keep in (1, len(line) // 2, len(line) - 1):
        path = scratch("journal") / JOURNAL
        path.write_bytes(torn(records, turn_record(3), keep))
        require_read(
            read,
            path,
            records,
            _("with {keep} of the {n_line} bytes of a last line").format(keep=keep, n_line=len(line)),
            _("a line without its \\n is a kill mid-append, no damage: ignore it ({reread_kill})").format(
                reread_kill=_(REREAD_TORN)
            ),
        )


def _bad_json(line: bytes) -> bytes:
    """The line with its JSON broken and the checksum made to match the broken text: only parsing finds it."""
    text = b"#" + line.rpartition(b"\t")[0][1:]
    return text + b"\t" + f"{zlib.crc32(text):08x}".encode() + b"\n"


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "checksum": lambda line: line[:-9] + (b"00000000" if not line.endswith(b"00000000\n") else b"11111111") + b"\n",
    "JSON": _bad_json,
    "tab": lambda line: line.replace(b"\t", b" "),
}
"""Ways a complete line is damaged: a wrong checksum, JSON that no longer parses, no tab."""


def corrupt_journal(how: str, *, at: int = 1, of: int = 3) -> bytes:
    """A journal of ``of`` records whose record ``at`` (0-based) is damaged as ``how`` (:data:`CORRUPTIONS`)."""
    lines = [journal_line(turn_record(t)) for t in range(1, of + 1)]
    lines[at] = CORRUPTIONS[how](lines[at])
    return journal_bytes([]) + b"".join(lines)


def check_corrupt_record_refused(read: Read, hows: Iterable[str] = ("checksum",), *, at: int = 1) -> None:
    """A complete line that is damaged (a wrong checksum) with good lines after it is refused with a ValueError."""
    for how in hows:
        path = scratch("journal") / JOURNAL
        path.write_bytes(corrupt_journal(how, at=at))
        require_refused(
            read,
            path,
            _("a journal whose record {value} of 3 has a bad {how}").format(value=at + 1, how=how),
            _(
                "a complete line that does not check out is damage, not a crash: skipping it "
                "would replay a turn that is lost"
            ),
        )


def _telling(states: tuple[bytes | None, ...]) -> list[bytes | None]:
    """The states worth reading: the first and last, those at or next to a line's end or a tab, and every 16th."""
    marks = {
        i
        for i, s in enumerate(states)
        if i in (0, len(states) - 1) or i % 16 == 0 or (s is not None and s[-1:] in (b"\n", b"\t"))
    }
    keep = sorted({j for i in marks for j in (i - 1, i, i + 1) if 0 <= j < len(states)})
    return [states[i] for i in keep]


def require_every_kill_reads(read: Read, seen: Any, old: list[Any], new: list[Any], what: str) -> None:
    """Each state a kill during the traced append could leave reads as ``old``, or ``new`` once the file is what the append left."""
    last = seen.states[-1]
    for i, state in enumerate(_telling(seen.states)):
        path = scratch("states") / JOURNAL
        if state is not None:
            path.write_bytes(state)
        expected = new if state == last else old
        size = "no file" if state is None else f"{len(state)} bytes"
        require_read(
            read,
            path,
            expected,
            _("{what}, a kill at moment {i} of the append ({size} on disk)").format(what=what, i=i, size=size),
            _("only a whole line is a record; a torn one is ignored ({reread_kill})").format(
                reread_kill=_(REREAD_TORN)
            ),
        )


@observes
def check_kill_during_append(append: Append, read: Read) -> None:
    """SIGKILL in the middle of an append: the journal reads as the records before it; the next append cuts the torn line and all read back.

    In the learner's kernel a forked child really dies halfway through its first write. In the
    isolated re-check the append runs under a tracer outside the learner's process, and every file
    a kill at any moment of its writes could leave is handed to read_journal.
    """
    records = [turn_record(t) for t in (1, 2, 3)]
    new = turn_record(4, size=600)
    path = scratch("kill") / JOURNAL
    path.write_bytes(journal_bytes(records))
    if is_remote(append):
        seen = require_appends_only(append, path, new, _("the traced append"))
        require_every_kill_reads(read, seen, records, [*records, new], _("appending record 4"))
        path.write_bytes(torn(records, new, len(journal_line(new)) // 2))  # what the kill left, in the kernel
    else:
        how = kill_in_first_write(lambda: call_learner(append, str(path), copy.deepcopy(new)), append)
        require(
            how == "killed mid-write",
            _("the append was expected to be killed while writing, but it {how}").format(how=how),
        )
        require_read(
            read,
            path,
            records,
            _("after a kill in the middle of an append"),
            _("the torn last line must be ignored ({reread_kill})").format(reread_kill=_(REREAD_TORN)),
        )
    append_or_fail(append, path, new, _("appending again after the kill"))
    glued = _("cut a torn last line off before appending, so the new record is not glued to its bytes")
    try:
        after = whole_journal(path.read_bytes(), JOURNAL)
    except CheckFailed as e:
        raise CheckFailed(
            _("after a kill mid-append, the next append must {glued} ({reason})").format(glued=glued, reason=e.reason)
        ) from None
    require(
        same_data(after, [*records, new]),
        _("after a kill mid-append, the next append must {glued}").format(glued=glued),
    )
    require_read(read, path, [*records, new], _("after the append that followed the kill"), glued)


def replay_or_fail(replay: Replay, records: list[dict[str, Any]], what: str) -> Any:
    """``replay(records)``; an exception it raises becomes a :class:`CheckFailed` saying when."""
    try:
        return call_learner(replay, copy.deepcopy(records))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(_("{what}: replay raised {error}").format(what=what, error=error_text(e))) from None


def check_replay(replay: Replay) -> None:
    """Three turn records replay to their state: the last turn, the tokens summed, every message in order;
    records whose turns skip or repeat are refused."""
    records = [turn_record(t) for t in (1, 2, 3)]
    got = replay_or_fail(replay, records, _("three records"))
    every_message = [m for r in records for m in r["messages"]]
    expected = {"turns": 3, "tokens_used": sum(r["tokens"] for r in records), "messages": every_message}
    if isinstance(got, dict):
        for key in expected:
            require(
                key in got and same_data(got[key], expected[key]),
                _("replay's {key} must be {dumps} for turns 1-3 ({reread_carry})").format(
                    key=repr(key), dumps=json.dumps(expected[key])[:60], reread_carry=_(REREAD_CARRY)
                ),
            )
    require(same_data(got, expected), _('replay must return a dict of exactly "turns", "tokens_used" and "messages"'))
    for turns, what in (((1, 3), _("a gap (turn 2 is missing)")), ((1, 2, 2), _("a repeat (turn 2 twice)"))):
        try:
            out = call_learner(replay, [turn_record(t) for t in turns])
        except ValueError:
            continue
        except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
            raise CheckFailed(
                _("records with {what}: raise a ValueError, not {name} ({reread_carry})").format(
                    what=what, name=type(e).__name__, reread_carry=_(REREAD_CARRY)
                )
            ) from None
        raise CheckFailed(
            _(
                "records with {what} must be refused with a ValueError, replay returned {name}: turns count "
                "every model call, so a gap is a lost turn and a repeat a duplicated one ({reread_carry})"
            ).format(what=what, name=type(out).__name__, reread_carry=_(REREAD_CARRY))
        )
