"""The ``resume_skeleton`` journal task grades a correct answer full and plausible wrong ones lower, under real kills.

In the learner's kernel a forked child really dies of SIGKILL halfway through an append; in the
isolated re-check the learner's append runs under strace outside its process, and every file a
kill at any moment of its writes could leave is handed to its ``read_journal``. Grading goes
through the check functions the notebook's test cells call (read from the source notebook, hidden
blocks included), with the notebook's points.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import exercise_cells  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest
import test_recheck_attacks as attacks  # the solution's re-check, run once per session (tests/ is on sys.path)
from exercise_cells import Exercise, failure, require_fails
from test_checks import GOOD_APPEND  # the sample class's correct append (tests/ is on sys.path under pytest)
from test_checks import JOURNAL_CELLS as JOURNAL_TESTS  # the journal's test cells

from resumable_core.course import release as course
from resumable_core.course.checks import resume_skeleton as checks
from resumable_core.course.checks.support import CheckFailed
from resumable_core.course.grading.isolation import BwrapBackend, library_copy
from resumable_core.course.grading.recheck import driver as isolated
from resumable_core.course.grading.recheck import syscalls
from resumable_core.course.hidden import resume_skeleton as hidden

SOURCE = course.notebook_path("resume_skeleton")
EXERCISE = Exercise.of("resume_skeleton")
NOTEBOOK = EXERCISE.notebook
JOURNAL_CELLS = ("append_record", "read_journal", "replay")
SOLUTIONS = EXERCISE.solutions()


def edited(cell: str, *changes: tuple[str, str]) -> dict[str, str]:
    """The solution cell ``cell`` with each (old, new) applied once, as the learner's answer for that cell."""
    return {cell: exercise_cells.edited(SOLUTIONS[cell], *changes, what=f"the {cell} solution")}


SNAPSHOT_APPEND = """def append_record(path, record):
    from resumable_core.checkpoint import write_atomic  # lesson 1's snapshot, used to "append"
    path = Path(path)
    old = path.read_bytes() if path.exists() else json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n"
    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    write_atomic(path, old + data + b"\\t" + f"{zlib.crc32(data):08x}".encode() + b"\\n")
"""

REWRITE_APPEND = """def append_record(path, record):
    path = Path(path)
    old = path.read_bytes() if path.exists() else json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n"
    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    with open(path, "wb") as f:  # read, add, write the whole file back
        f.write(old + data + b"\\t" + f"{zlib.crc32(data):08x}".encode() + b"\\n")
        f.flush()
        os.fsync(f.fileno())
"""

IN_PLACE_APPEND = """def append_record(path, record):
    path = Path(path)
    old = path.read_bytes() if path.exists() else json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n"
    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    with open(path, "r+b" if path.exists() else "wb") as f:  # the same bytes again, then the new line
        f.write(old + data + b"\\t" + f"{zlib.crc32(data):08x}".encode() + b"\\n")
        f.flush()
        os.fsync(f.fileno())
"""


def out_of_order(seek: bool) -> str:
    """An append that writes the second half of its line first (pwrite at its offset, or lseek then write): a kill between leaves a hole."""
    first, second = (
        (
            "os.lseek(fd, base + k, os.SEEK_SET); os.write(fd, payload[k:])",
            "os.lseek(fd, base, os.SEEK_SET); os.write(fd, payload[:k])",
        )
        if seek
        else ("os.pwrite(fd, payload[k:], base + k)", "os.pwrite(fd, payload[:k], base)")
    )
    return f"""def append_record(path, record):
    path = Path(path)
    header = json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n"
    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    line = data + b"\\t" + f"{{zlib.crc32(data):08x}}".encode() + b"\\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        held = os.pread(fd, os.fstat(fd).st_size, 0)
        whole = held[: held.rfind(b"\\n") + 1]
        if len(whole) < len(held):
            os.ftruncate(fd, len(whole))
        payload = line if whole else header + line
        base, k = len(whole), len(payload) // 2
        {first}
        {second}
        os.fsync(fd)
    finally:
        os.close(fd)
    if not whole:
        dfd = os.open(path.parent, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
"""


PWRITE_APPEND = GOOD_APPEND
"""A correct append by file offsets (os.pread, os.ftruncate, os.pwrite), not the solution's file object."""


def after_return(write_too: bool) -> str:
    """An append whose thread fsyncs (and, with ``write_too``, first writes) once append_record returned; the big return value slows the reply."""
    head = (
        '    held = path.read_bytes() if path.exists() else b""\n'
        '    whole = held[: held.rfind(b"\\n") + 1]\n'
        "    def write():\n"
        '        with open(path, "a+b") as f:\n'
        "            f.truncate(len(whole))\n"
        "            f.write(line if whole else header + line)\n"
    )
    if not write_too:
        head += "    write()\n    write = lambda: None\n"
    return (
        "def append_record(path, record):\n"
        "    import sys, threading, time\n"
        "    path = Path(path)\n"
        '    header = json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n"\n'
        '    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")\n'
        '    line = data + b"\\t" + f"{zlib.crc32(data):08x}".encode() + b"\\n"\n'
        + head
        + "    me, main = sys._getframe().f_code, threading.get_ident()\n"
        "    def returned():\n"
        "        f = sys._current_frames().get(main)\n"
        "        while f is not None:\n"
        "            if f.f_code is me:\n"
        "                return False\n"
        "            f = f.f_back\n"
        "        return True\n"
        "    def later():\n"
        "        while not returned():\n"
        "            time.sleep(0)\n"
        "        write()\n"
        "        fd = os.open(path, os.O_RDONLY); os.fsync(fd); os.close(fd)\n"
        "        fd = os.open(path.parent, os.O_RDONLY); os.fsync(fd); os.close(fd)\n"
        "    threading.Thread(target=later, daemon=True).start()\n"
        "    return [0] * 3_000_000  # the reply takes a while to encode: the thread's calls land meanwhile\n"
    )


def moved_by_a_copy(copy: str) -> str:
    """An append that seeks back a line, lets a copy read from the journal's fd (back at the end, unseen by a
    tracer that does not follow it), writes a line of garbage there, then pwrites the real line over it."""
    reads = {
        "sendfile": '            null = os.open("/dev/null", os.O_WRONLY)\n'
        "            os.sendfile(null, fd, None, n)\n"
        "            os.close(null)\n",
        "copy_file_range": '            sink_path = path.with_name(".sink")\n'
        "            sink = os.open(sink_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)\n"
        "            os.copy_file_range(fd, sink, n)\n"
        "            os.close(sink)\n"
        "            os.unlink(sink_path)\n",
    }[copy]
    return (
        "def append_record(path, record):\n"
        "    path = Path(path)\n"
        '    header = json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n"\n'
        '    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")\n'
        '    line = data + b"\\t" + f"{zlib.crc32(data):08x}".encode() + b"\\n"\n'
        "    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)\n"
        "    try:\n"
        "        size = os.lseek(fd, 0, os.SEEK_END)\n"
        "        if size == 0:\n"
        "            os.write(fd, header + line)\n"
        "            os.fsync(fd)\n"
        "            d = os.open(path.parent, os.O_RDONLY)\n"
        "            os.fsync(d)\n"
        "            os.close(d)\n"
        "            return\n"
        "        n = len(line)\n"
        "        if size >= n:\n"
        "            os.lseek(fd, size - n, os.SEEK_SET)\n"
        f"{reads}"
        '            os.write(fd, b"X" * (n - 1) + b"\\n")  # a whole line of garbage: damage if killed now\n'
        "        os.pwrite(fd, line, size)\n"
        "        os.fsync(fd)\n"
        "    finally:\n"
        "        os.close(fd)\n"
    )


POP = "    lines.pop()  # after the last \\n: nothing, or a torn line a kill left (never a record)\n"
CHECKSUM = '            raise JournalError(f"{path}: line {number} is damaged (no tab, or a wrong checksum)")\n'
CUT = "            f.truncate(len(whole))  # cut the torn line a kill mid-append left\n"
FSYNC = "        os.fsync(f.fileno())  # the record is on disk before the next step runs\n"
HEADER = (
    '    if not isinstance(header, dict) or header != JOURNAL_HEADER or type(header.get("version")) is not int:\n'
    '        raise JournalError(f"{path}: line 1 is not the header {JOURNAL_HEADER}")\n'
)
TURN = (
    '        if record["turn"] != state["turns"] + 1:\n'
    "            raise JournalError(f\"turn {record['turn']} follows turn {state['turns']}: a turn is lost or repeated\")\n"
)

WRONG: dict[str, tuple[dict[str, str], str]] = {
    # (the learner's answer cells, the test cell its bug must fail)
    "no_fsync": (edited("append_record", (FSYNC, "")), "test_append_durable"),
    "rewrites_the_whole_file": ({"append_record": REWRITE_APPEND}, "test_kill_during_append"),
    "appends_with_lesson_1s_snapshot": ({"append_record": SNAPSHOT_APPEND}, "test_journal_round_trip"),
    "does_not_cut_a_torn_tail": (edited("append_record", (CUT, "            pass\n")), "test_kill_during_append"),
    "reader_raises_on_a_torn_tail": (
        edited("read_journal", (POP, "    lines = lines[:-1] if lines[-1] == b'' else lines\n")),
        "test_torn_tail",
    ),
    "reader_skips_a_corrupt_line": (
        edited("read_journal", (CHECKSUM, "            continue\n")),
        "test_corrupt_record",
    ),
    "reader_cuts_the_torn_tail_itself": (
        edited(
            "read_journal",
            (POP, POP + "    Path(path).write_bytes(data[: data.rfind(b'\\n') + 1])  # tidy up the crash\n"),
        ),
        "test_torn_tail",
    ),
    "no_version_check": (edited("read_journal", (HEADER, "")), "test_journal_version"),
    "replay_without_a_turn_check": (edited("replay", (TURN, "")), "test_replay"),
    "replay_keeps_the_last_tokens": (
        edited("replay", ('state["tokens_used"] += record["tokens"]', 'state["tokens_used"] = record["tokens"]')),
        "test_replay",
    ),
}
TRACED = ("no_fsync", "rewrites_the_whole_file", "appends_with_lesson_1s_snapshot", "does_not_cut_a_torn_tail")
"""The wrong answers also graded in the isolated re-check, where the append is judged by its trace."""
TRACED_ONLY: dict[str, tuple[dict[str, str], str]] = {
    # rewrites every old byte as it was, then the line: only the trace shows the rewrite
    "rewrites_the_same_bytes_in_place": ({"append_record": IN_PLACE_APPEND}, "test_journal_round_trip"),
    # the line's second half first: a kill between the writes leaves a complete damaged line
    "pwrites_out_of_order": ({"append_record": out_of_order(seek=False)}, "test_kill_during_append"),
    "seeks_and_writes_out_of_order": ({"append_record": out_of_order(seek=True)}, "test_kill_during_append"),
    # a thread fsyncs (or even writes) once append_record returned, while the reply is encoded
    "fsyncs_after_returning": ({"append_record": after_return(write_too=False)}, "test_append_durable"),
    "writes_after_returning": ({"append_record": after_return(write_too=True)}, "test_append_durable"),
    # a copy reading from the journal's fd moves its position where the trace shows no number: the grader fails closed
    "sendfile_moves_the_position": ({"append_record": moved_by_a_copy("sendfile")}, "test_append_durable"),
    "copy_file_range_moves_the_position": (
        {"append_record": moved_by_a_copy("copy_file_range")},
        "test_append_durable",
    ),
}
"""Wrong answers only the re-check can see: the kernel's hints pass them."""


def learner(answers: dict[str, str]) -> dict:
    """The learner's names: the notebook's setup cells, then every solution cell with ``answers`` in place."""
    return EXERCISE.learner(*{**SOLUTIONS, **answers}.values())


graded_cells = EXERCISE.graded_cells


def test_the_journal_carries_most_of_the_points():
    """The journal's test cells are worth more than the snapshot's together."""
    cells = graded_cells()
    journal = sum(points for gid, (points, _) in cells.items() if gid in JOURNAL_TESTS)
    assert set(JOURNAL_TESTS) <= set(cells)
    assert journal > sum(points for gid, (points, _) in cells.items() if gid not in JOURNAL_TESTS)


def test_the_contract_is_the_notebooks_bullets_and_each_rule_is_tested():
    """The journal cell's contract bullets are CONTRACT's rules for it, in order; each rule's checks are called by a test cell."""
    text = next("".join(c["source"]) for c in NOTEBOOK["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "journal")
    after = text.split("**The contract.**\n\n", 1)[1]
    bullets = [line[2:] for line in after.split("\n\n", 1)[0].splitlines()]
    assert bullets == [rule for rule in hidden.CONTRACT if rule in bullets]  # Part 1's rules are the others
    called = {call.check.__name__ for _, calls in graded_cells().values() for call in calls}
    for rule, names in hidden.CONTRACT.items():
        assert names and set(names) <= called, rule


def test_the_format_example_in_the_exercise_checks_out():
    """The journal lines the exercise shows are real ones: each checksum is the CRC-32 of its JSON."""
    text = next("".join(c["source"]) for c in NOTEBOOK["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "journal")
    example = text.split("```\n", 2)[1].replace("<TAB>", "\t").encode()
    assert checks.whole_journal(example, "the example")


def test_the_checks_damaged_journals_are_what_they_say():
    """A torn journal ends without a newline; each corruption leaves a complete line the format refuses."""
    records = [checks.turn_record(1), checks.turn_record(2)]
    assert checks.whole_journal(checks.journal_bytes(records), "j") == records
    assert not checks.torn(records, checks.turn_record(3), 10).endswith(b"\n")
    for how in checks.CORRUPTIONS:
        damaged = checks.corrupt_journal(how)
        assert damaged.endswith(b"\n") and damaged.count(b"\n") == 4, how
        with pytest.raises((CheckFailed, ValueError)):
            checks.whole_journal(damaged, "j")


@pytest.mark.slow
def test_the_solution_scores_full_under_real_kills():
    """The notebook's own solution passes every test cell, visible and hidden, under real SIGKILLs."""
    ns = learner({})
    failed = {gid: why for gid, (_, calls) in graded_cells().items() if (why := failure(calls, ns))}
    assert failed == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_journal_scores_lower(name):
    """Each plausible wrong answer fails the test cell its bug breaks, and every snapshot cell still passes."""
    answers, cell = WRONG[name]
    cells = graded_cells()
    ns = learner(answers)
    require_fails(name, cell, cells, ns)
    assert all(failure(calls, ns) is None for gid, (_, calls) in cells.items() if gid not in JOURNAL_TESTS)


# -- the same in the isolated re-check, the append judged by its trace ------------------------------


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    """Bubblewrap, as grading runs it, where it is installed; else the plain backend."""
    if shutil.which("bwrap") is None:
        return None
    return BwrapBackend(library_copy(tmp_path_factory.mktemp("lib") / "lib"))


def submitted(tmp_path: Path, answers: dict[str, str]) -> Path:
    """The source notebook with ``answers`` in its solution cells, as a learner hands it in."""
    nb = nbformat.read(str(SOURCE), as_version=4)
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = answers[gid]
    path = tmp_path / "submission.ipynb"
    nbformat.write(nb, str(path))
    return path


def needs_the_tracer() -> None:
    """Skip, saying why, where strace cannot trace the learner's process."""
    unavailable = syscalls.available()
    if unavailable is not None:
        pytest.skip(unavailable)


def recheck(
    tmp_path: Path, answers: dict[str, str], backend, cells: tuple[str, ...] = JOURNAL_TESTS
) -> dict[str, str | None]:
    """The verdicts of ``cells`` (the journal's) in the isolated re-check (grade_id -> why it failed, None when it passed).

    Each traced cell costs seconds of kills replayed from the trace: re-check only those a test reads.
    """
    needs_the_tracer()
    report = isolated.run(
        submitted(tmp_path, answers), "resume_skeleton", source=SOURCE, only=list(cells), timeout=60, backend=backend
    )
    return {gid: report[gid] for gid in cells}  # a cell left unreported raises: never a pass, never a failure


@pytest.mark.slow
def test_the_solution_passes_the_traced_journal_checks(tmp_path_factory, backend):
    """In the re-check the solution's appends, traced from outside, pass every journal cell."""
    needs_the_tracer()
    report = attacks.honest(tmp_path_factory.getbasetemp(), "resume_skeleton", backend)  # the other files read it too
    assert {gid: report.get(gid, "unreported") for gid in JOURNAL_TESTS} == dict.fromkeys(JOURNAL_TESTS)


@pytest.mark.slow
def test_an_append_by_offsets_passes_the_traced_journal_checks(tmp_path, backend):
    """In the re-check a correct append through os.pread, os.ftruncate and os.pwrite passes every journal cell."""
    assert recheck(tmp_path, {"append_record": PWRITE_APPEND}, backend) == dict.fromkeys(JOURNAL_TESTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*TRACED, *TRACED_ONLY])
def test_a_wrong_append_fails_by_its_trace(tmp_path, backend, name):
    """A wrong append fails its cell in the re-check too, judged by what strace saw, not by the learner's process."""
    answers, cell = {**WRONG, **TRACED_ONLY}[name]
    verdicts = recheck(tmp_path, answers, backend, (cell,))  # the cell its bug breaks, as a worker re-checks it alone
    assert verdicts[cell], f"{name} passed {cell} in the re-check"
    print(f"{name}: {cell} fails in the re-check: {verdicts[cell]}")


def test_a_replay_that_accepts_gaps_and_repeats_fails_the_visible_check_naming_the_lesson():
    """Without its turn check, replay fails check_replay (gaps and repeats), naming lesson 1, section 8; the solution passes."""
    with pytest.raises(CheckFailed, match=re.escape("lesson 1, section 8")):
        checks.check_replay(learner(WRONG["replay_without_a_turn_check"][0])["replay"])
    checks.check_replay(learner({})["replay"])
