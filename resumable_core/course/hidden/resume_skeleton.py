"""The hidden checks of the ``resume_skeleton`` assignment: other versions, a read-only load, durability; the journal's other rules.

The notebook's hidden test blocks call these as ``hidden.check_*(save_state, load_state)`` and
``hidden.check_*(append_record, read_journal)`` / ``hidden.check_*(replay)``; :data:`CONTRACT`
maps each rule of the snapshot's and the journal's contracts to the checks that test it.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from typing import Any

from ...lab.i18n import N_
from ..checks.resume_skeleton import (
    JOURNAL,
    JOURNAL_HEADER,
    Append,
    Load,
    Read,
    Replay,
    Save,
    append_or_fail,
    check_corrupt_record_refused,
    check_journal_version,
    check_state_version_refused,
    corrupt_journal,
    journal_bytes,
    load_or_fail,
    observed_append,
    observed_save,
    record_calls,
    record_save,
    replay_or_fail,
    require_every_kill_reads,
    require_read,
    sample_state,
    torn,
    turn_record,
    whole_journal,
)
from ..checks.support import CheckFailed, call_learner, handed, is_remote, observes, require, same_data, scratch
from .i18n import _, fails_with

OTHER_VERSIONS: tuple[Any, ...] = (0, 99, "1")
"""Versions the visible test does not try: older, newer, and the right number as a string."""


@fails_with(
    N_(
        "load_state must refuse a file of any other version, the number as a string too, with StateVersionError. Reread Part 1's contract (Exercise 1)."
    )
)
def check_other_versions_refused(load: Load) -> None:
    """Files of versions 0, 99 and "1" are each refused with a ValueError and left as they were."""
    check_state_version_refused(load, versions=OTHER_VERSIONS)


@fails_with(
    N_(
        "load_state only reads: it never changes the file, not even one it refuses. Reread Part 1's contract (Exercise 1)."
    )
)
def check_load_never_modifies(save: Save, load: Load) -> None:
    """Loading a good file leaves its bytes and modification time as they were."""
    path = scratch("state") / "state.json"
    call_learner(save, sample_state(), handed(path, folder=True))
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    load_or_fail(load, path, _("loading a good file"))
    require(path.read_bytes() == before and path.stat().st_mtime_ns == mtime, _("load_state must only read the file"))


@fails_with(
    N_(
        "save_state must fsync the new bytes, rename them within the folder, then fsync the folder. Reread Part 1's contract (Exercise 1)."
    )
)
@observes
def check_durable_steps(save: Save) -> None:
    """save_state writes a temp file in the same folder, fsyncs it, os.replace()s it, then fsyncs the folder."""
    folder = scratch("durable")
    path = folder / "state.json"
    if is_remote(save):  # traced from outside the learner's process
        problem = observed_save(save, path, sample_state()).durable_problem()
        require(problem is None, problem)
        return
    events = record_save(save, path)
    target = path.resolve()
    moves = [i for i, (kind, info) in enumerate(events) if kind == "replace" and info[1] == target]
    require(
        moves, _("save_state must finish with os.replace(temp, path): the switch to the new file is one atomic step")
    )
    move = moves[-1]
    require(
        events[move][1][0].parent == target.parent,
        _("the temp file must be in the same folder as the state file (rename is atomic only within one file system)"),
    )
    require(("open", target) not in events, _("save_state must never open the state file itself for writing"))
    require(
        any(kind == "fsync" and not info[0] for kind, info in events[:move]),
        _("flush and os.fsync the temp file before the rename, so its bytes are on disk first"),
    )
    folder_id = (True, os.stat(folder).st_dev, os.stat(folder).st_ino)
    require(
        ("fsync", folder_id) in events[move:],
        _("os.fsync the folder after the rename, so the rename itself is durable"),
    )


# -- the journal -----------------------------------------------------------------------------------

OTHER_HEADERS: tuple[Any, ...] = (
    {**JOURNAL_HEADER, "version": 0},
    {**JOURNAL_HEADER, "version": "1"},
    {"format": "resumable-checkpoint", "version": 1},
    {"version": 1},
    turn_record(1),
)
"""First lines the visible test does not try: an older version, the version as a string, another format, none, a record."""


@fails_with(
    N_(
        "read_journal must refuse, with a ValueError, a first line that is not this format's and version's header. Reread Part 2's contract (Exercise 1)."
    )
)
def check_other_journal_versions_refused(read: Read) -> None:
    """Headers of version 0, of "1", of another format, without a format, and a record where the header belongs are each refused."""
    for header in OTHER_HEADERS:
        path = scratch("journal") / JOURNAL
        path.write_bytes(journal_bytes([turn_record(1)], header=header))
        try:
            got = call_learner(read, handed(path, folder=True))
        except ValueError:
            continue
        except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
            raise CheckFailed(
                _("header {dumps}: raise a ValueError, not {name}").format(
                    dumps=json.dumps(header)[:60], name=type(e).__name__
                )
            ) from None
        raise CheckFailed(
            _("a journal whose first line is {dumps} must be refused, read_journal returned {name}").format(
                dumps=json.dumps(header)[:60], name=type(got).__name__
            )
        )
    check_journal_version(read, versions=(99,))


@fails_with(
    N_(
        "read_journal never changes the file, not even one it refuses or whose last line is torn. Reread Part 2's contract (Exercise 1)."
    )
)
def check_read_journal_never_modifies(read: Read) -> None:
    """Reading a good journal, a torn one and a damaged one leaves each file's bytes and modification time as they were."""
    files = {
        _("a good journal"): journal_bytes([turn_record(1), turn_record(2)]),
        _("a journal with a torn last line"): torn([turn_record(1)], turn_record(2), 20),
        _("a damaged journal"): corrupt_journal("checksum"),
    }
    for what, data in files.items():
        path = scratch("journal") / JOURNAL
        path.write_bytes(data)
        mtime = path.stat().st_mtime_ns
        try:
            call_learner(read, handed(path, folder=True))
        except ValueError:
            pass
        except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
            raise CheckFailed(
                _("{what}: read_journal raised {error_type}: {error}").format(
                    what=what, error_type=type(e).__name__, error=e
                )
            ) from None
        require(
            path.read_bytes() == data and path.stat().st_mtime_ns == mtime,
            _(
                "reading {what} must leave the file as it was: read_journal only reads (cutting "
                "a torn line is append_record's job)"
            ).format(what=what),
        )


@fails_with(N_("read_journal must return [] for a file with no complete line. Reread Part 2's contract (Exercise 1)."))
def check_torn_header(read: Read) -> None:
    """An empty journal, and one holding only part of its header line (a kill while it was created), read as []."""
    header = journal_bytes([])
    for keep in (0, 1, len(header) // 2, len(header) - 1):
        path = scratch("journal") / JOURNAL
        path.write_bytes(header[:keep])
        require_read(
            read,
            path,
            [],
            _("with {keep} bytes of the header line only").format(keep=keep),
            _("no complete line yet: no record"),
        )
    path = scratch("journal") / JOURNAL
    path.write_bytes(header)
    require_read(read, path, [], _("with the header line only"), _("a journal with no record yet"))


@fails_with(
    N_(
        "A complete line with a bad checksum, bad JSON or no tab is damage: read_journal must raise ValueError. Reread Part 2's contract (Exercise 1)."
    )
)
def check_other_corruptions_refused(read: Read) -> None:
    """A middle line whose JSON does not parse or that has no tab, a first record with a bad checksum, and a damaged complete last line are refused."""
    check_corrupt_record_refused(read, hows=("JSON", "tab"))
    check_corrupt_record_refused(read, hows=("checksum",), at=0)
    check_corrupt_record_refused(read, hows=("checksum", "JSON"), at=2)


@fails_with(
    N_(
        "append_record returns only once the record is durable, and a kill mid-append loses at most that record. Reread Part 2's contract (Exercise 1)."
    )
)
@observes
def check_append_durable(append: Append, read: Read) -> None:
    """append_record fsyncs the journal after writing, and the folder when it created the file; a kill while it creates the file leaves [] or the record.

    In the re-check this is the trace from outside the learner's process; in the learner's kernel,
    spies on os.fsync (a hint: nothing measured there is believed by the re-check).
    """
    folder = scratch("durable")
    path = folder / JOURNAL
    first, second = turn_record(1), turn_record(2)
    if is_remote(append):
        for record, before in ((first, []), (second, [first])):
            seen = observed_append(append, path, record, f"appending record {record['turn']}")
            require(seen.problem is None, seen.problem)
            require(
                seen.synced_after_last_write,
                _(
                    "append_record must os.fsync the journal after writing the line, before it "
                    "returns: the next step runs on the belief that the record is on disk"
                ),
            )
            if record is first:
                require(
                    seen.created and seen.folder_synced_after_create,
                    _(
                        "when append_record creates the journal, it must also os.fsync the folder, or a "
                        "power cut can lose the new file's name"
                    ),
                )
            require_every_kill_reads(
                read, seen, before, [*before, record], _("appending record {turn}").format(turn=record["turn"])
            )
        return
    folder_id = (True, os.stat(folder).st_dev, os.stat(folder).st_ino)
    for record in (first, second):
        what = _("appending record {turn}").format(turn=record["turn"])
        events = record_calls(functools.partial(append_or_fail, append, path, record, what), append)
        file_id = (False, os.stat(path).st_dev, os.stat(path).st_ino)
        require(
            ("fsync", file_id) in events,
            _(
                "append_record must os.fsync the journal after writing the line, before it "
                "returns: the next step runs on the belief that the record is on disk"
            ),
        )
        if record is first:
            require(
                ("fsync", folder_id) in events,
                _(
                    "when append_record creates the journal, it must also os.fsync the folder, or a "
                    "power cut can lose the new file's name"
                ),
            )


@fails_with(
    N_(
        "append_record must cut off a torn last line, and start the file again when not even the header is whole. Reread Part 2's contract (Exercise 1)."
    )
)
def check_append_after_torn_header(append: Append, read: Read) -> None:
    """A journal left holding part of its header (a kill while it was created) is started again by the next append."""
    header = journal_bytes([])
    for keep in (0, len(header) // 2):
        path = scratch("journal") / JOURNAL
        path.write_bytes(header[:keep])
        append_or_fail(
            append, path, turn_record(1), _("appending to a journal of {keep} bytes of header").format(keep=keep)
        )
        require(
            same_data(whole_journal(path.read_bytes(), JOURNAL), [turn_record(1)]),
            _(
                "when not even the header line is whole, append_record must start the file "
                "again: the header, then the record"
            ),
        )
        require_read(
            read, path, [turn_record(1)], _("after starting a torn journal again"), _("the header, then the record")
        )


@fails_with(
    N_(
        "replay changes no record, and refuses turns that do not count 1, 2, 3, ... with a ValueError. Reread Part 2's contract (Exercise 1)."
    )
)
def check_replay_rules(replay: Replay) -> None:
    """No records replay to turn 0; replay leaves the records as they were; turns that skip or repeat are refused with a ValueError."""
    got = replay_or_fail(replay, [], _("no records"))
    require(
        same_data(got, {"turns": 0, "tokens_used": 0, "messages": []}),
        _('with no records, replay must return {"turns": 0, "tokens_used": 0, "messages": []}'),
    )
    records = [turn_record(t) for t in (1, 2)]
    kept = copy.deepcopy(records)
    if not is_remote(replay):  # in the re-check the records cross as a copy: nothing to watch
        call_learner(replay, records)
        require(same_data(records, kept), _("replay must not change the records it is given (they are the journal's)"))
        state = replay_or_fail(replay, kept, _("two records"))
        if isinstance(state, dict) and isinstance(state.get("messages"), list):
            state["messages"].append({"role": "user", "content": "later"})
            require(same_data(kept, records), _("the state replay returns must not share its lists with the records"))
    for turns, what in (
        ((1, 3), _("a gap (turn 2 is missing)")),
        ((1, 2, 2), _("a repeat (turn 2 twice)")),
        ((2, 3), _("a start at turn 2")),
    ):
        try:
            out = call_learner(replay, [turn_record(t) for t in turns])
        except ValueError:
            continue
        except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
            raise CheckFailed(
                _("records with {what}: raise a ValueError, not {name}").format(what=what, name=type(e).__name__)
            ) from None
        raise CheckFailed(
            _("records with {what} must be refused with a ValueError, replay returned {name}").format(
                what=what, name=type(out).__name__
            )
        )


CONTRACT: dict[str, tuple[str, ...]] = {
    # Part 1: the snapshot
    '`save_state(state, path)` writes any JSON object with a `"version"`, not only a checkpoint, and '
    "`load_state(path)` reads it back equal; a second save replaces the first.": ("check_state_round_trip",),
    "A finished save leaves nothing in the folder but the state file.": ("check_state_round_trip",),
    "A kill at any moment of a save leaves the file holding the old state or the new one, whole, never part of "
    "one; a save after the kill works.": ("check_kill_during_save",),
    "`save_state` returns only once the new state would survive a power cut: its bytes are fsynced before they "
    "take the file's name, by a rename within the same folder, and the folder is fsynced after that rename.": (
        "check_durable_steps",
    ),
    "`load_state` returns `None` when there is no file (a fresh start), and creates none.": ("check_state_missing",),
    "`load_state` returns the state in a file of version `STATE_VERSION`, whoever wrote it; a file of any other "
    "version (another number, or the number as a string) is refused with `StateVersionError`, a `ValueError`.": (
        "check_state_version_refused",
        "check_other_versions_refused",
    ),
    "`load_state` only reads: it never changes the file, not even one it refuses.": (
        "check_load_never_modifies",
        "check_state_version_refused",
    ),
    # Part 2: the journal
    'The journal\'s first line is the header, `{"format":"resumable-journal","version":1}` in compact JSON; each record follows on a line of its own: its compact JSON, a tab, the CRC-32 of that JSON\'s UTF-8 bytes as 8 lowercase hex digits (`f"{zlib.crc32(data):08x}"`), and `\\n`.': (
        "check_journal_round_trip",
    ),
    "`append_record` adds one line at the end of the file and never rewrites or replaces what is already there; it writes the header first when it creates the file.": (
        "check_journal_round_trip",
    ),
    "`append_record` returns only once the record is durable: the file fsynced after the write, and the folder fsynced when the append created the file.": (
        "check_append_durable",
    ),
    "A kill at any moment of an append leaves a journal that reads as the records before it, or as those and the new one.": (
        "check_kill_during_append",
        "check_append_durable",
    ),
    "If the file ends in a torn line (no `\\n`: a kill mid-append), `append_record` first cuts it off; if not even the header line is whole, it starts the file again.": (
        "check_kill_during_append",
        "check_append_after_torn_header",
    ),
    "`read_journal` returns the records in order; with no file it returns `[]`, and so it does for a file with no complete line.": (
        "check_journal_round_trip",
        "check_torn_header",
    ),
    "`read_journal` refuses a first line that is not the header of this format and version with a `ValueError`.": (
        "check_journal_version",
        "check_other_journal_versions_refused",
    ),
    "`read_journal` ignores a torn last line: a kill mid-append is no damage.": ("check_torn_tail_ignored",),
    "A complete line with a bad checksum, bad JSON or no tab is damage, not a crash: `read_journal` raises `ValueError`, wherever the line is.": (
        "check_corrupt_record_refused",
        "check_other_corruptions_refused",
    ),
    "`read_journal` never changes the file, not even one it refuses or whose last line is torn.": (
        "check_read_journal_never_modifies",
    ),
    'A record is `{"turn": n, "messages": [...], "tokens": k}`: turn n\'s new messages and the tokens it used.': (
        "check_replay",
    ),
    '`replay(records)` returns `{"turns": ..., "tokens_used": ..., "messages": ...}`: the last record\'s turn (0 for none), the sum of the tokens, and every record\'s messages in order; it changes no record.': (
        "check_replay",
        "check_replay_rules",
    ),
    "`replay` refuses records whose turns do not count 1, 2, 3, ... with a `ValueError`: a gap is a lost turn, a repeat a duplicated one.": (
        "check_replay_rules",
    ),
}
"""Each rule of Part 1's and the journal task's contracts (the notebook's bullets, exactly) and the checks that test it."""
