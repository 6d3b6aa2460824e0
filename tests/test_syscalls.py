"""The syscall verdicts: real savers under the real strace (plain and in bubblewrap), the parser on recorded lines."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable_core.course.assignments import REGISTRY
from resumable_core.course.checks.support import OBSERVES
from resumable_core.course.grading.isolation import BwrapBackend, Job, Mount, Outcome, PlainBackend, capped_folder
from resumable_core.course.grading.recheck import syscalls
from resumable_core.course.grading.recheck.plan import traced
from resumable_core.course.grading.recheck.syscalls import Event, atomic_problem, durable_problem, read_events

SAVERS = Path(__file__).parent / "syscall_savers"
OLD = b'{"version": 1, "old": true}\n'
NEW = b'{"version": 1, "task": "t", "turns": 2}\n'
SHARED = "/grading/shared"
"""Where the folder of the checked calls appears inside the sandbox."""
MODES = [
    pytest.param("plain"),
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(
            shutil.which("bwrap") is None, reason="bwrap is not installed (apt-get install bubblewrap)"
        ),
    ),
]


@dataclass
class Saved:
    """One traced run of a saver: what the trace showed of its folder and what it left there."""

    events: list[Event]
    target: str
    """The target's path as the saver saw it (inside the sandbox, in bwrap mode)."""
    content: bytes | None
    returncode: int
    stderr: str


def _save(saver: str, tmp_path: Path, mode: str) -> Saved:
    """Run ``savers.py saver`` under the tracer, in bubblewrap or not, on a fresh folder holding OLD."""
    reason = syscalls.available()
    if reason is not None:
        pytest.skip(reason)
    tmp_path = tmp_path.resolve()
    unique = uuid.uuid4().hex
    shared = tmp_path / "shared"
    host = shared / unique
    host.mkdir(parents=True)
    (host / "state.json").write_bytes(OLD)  # from the host, before the trace starts
    trace = tmp_path / "trace.txt"  # beside the shared folder, not in it: the sandbox never sees it
    if mode == "bwrap":
        folder = f"{SHARED}/{unique}"
        (tmp_path / "etc").mkdir()
        (tmp_path / "scratch").mkdir()
        command = [sys.executable, "/grading/savers/savers.py", saver, f"{folder}/state.json"]
        mounts = (Mount(SAVERS, "/grading/savers"), Mount(shared, SHARED, writable=True))
        job = Job(tuple(command), tmp_path / "scratch", mounts)
        argv = BwrapBackend().command(job, tmp_path / "scratch", tmp_path / "etc", None)
    else:
        folder = str(host)
        argv = [sys.executable, str(SAVERS / "savers.py"), saver, f"{folder}/state.json"]
    proc = subprocess.run([*syscalls.tracer_argv(trace), *argv], capture_output=True, timeout=120, check=False)
    target = host / "state.json"
    content = target.read_bytes() if target.exists() else None
    return Saved(read_events(trace, folder), f"{folder}/state.json", content, proc.returncode, proc.stderr.decode())


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_correct_saver_passes_both_verdicts(tmp_path, mode):
    """Temp file in the folder, fsync, os.replace, fsync of the folder: atomic and durable."""
    saved = _save("correct", tmp_path, mode)
    assert saved.returncode == 0, saved.stderr
    assert saved.content == NEW
    assert atomic_problem(saved.events, saved.target) is None
    assert durable_problem(saved.events, saved.target) is None


WRONG = [
    # saver, what atomic_problem says (None: nothing), what durable_problem says, content left (None: not checked)
    ("plain_open", "opened state.json for writing in place", "never renamed a file onto state.json", None),
    ("os_write_in_place", "opened state.json for writing in place", "never renamed a file onto state.json", NEW),
    ("no_fsync", None, "never fsynced the temp file", NEW),
    ("fsync_after_rename", None, "fsynced the temp file only after the rename", NEW),
    ("no_folder_fsync", None, "never fsynced the folder after the rename", NEW),
    ("relative_after_chdir", None, None, NEW),
    ("relative_in_place", "opened state.json for writing in place", "never renamed a file onto state.json", None),
    ("rename_away", "renamed state.json (or its folder) away", None, NEW),
    ("fake_fsync", None, "never fsynced the temp file", NEW),
    ("killed_mid_save", "no save happened", "never renamed a file onto state.json", OLD),
    ("threaded", None, None, NEW),
    ("hostile_correct", None, None, NEW),
    ("hostile_in_place", "opened state.json for writing in place", None, None),
]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("saver", "atomic", "durable", "content"), WRONG, ids=[w[0] for w in WRONG])
def test_each_saver_gets_its_verdicts(tmp_path, mode, saver, atomic, durable, content):
    """Each saver's trace gives the verdicts its code deserves, whatever it printed or named its files."""
    saved = _save(saver, tmp_path, mode)
    killed = (-9, 128 + 9)  # strace passes the signal on; bwrap's init reports it as an exit code
    assert saved.returncode in (killed if saver == "killed_mid_save" else (0,)), saved.stderr
    got_atomic, got_durable = atomic_problem(saved.events, saved.target), durable_problem(saved.events, saved.target)
    assert (got_atomic is None) == (atomic is None) and (atomic is None or atomic in str(got_atomic)), got_atomic
    assert (got_durable is None) == (durable is None) and (durable is None or durable in str(got_durable)), got_durable
    if content is not None:
        assert saved.content == content


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_temp_file_in_another_folder_is_refused(tmp_path, mode):
    """A temp file in /tmp: renamed across folders it is not durable; where that rename fails, the copy is in place."""
    saved = _save("temp_elsewhere", tmp_path, mode)
    assert saved.returncode == 0, saved.stderr
    one_disk = mode == "plain" and os.stat(tempfile.gettempdir()).st_dev == os.stat(tmp_path).st_dev
    atomic, durable = atomic_problem(saved.events, saved.target), durable_problem(saved.events, saved.target)
    if one_disk:
        assert atomic is None
        assert durable is not None and "is not created in the folder of state.json" in durable
    else:  # the sandbox's /tmp is a tmpfs of its own: shutil.move copies into the target
        assert atomic is not None and "for writing in place" in atomic
        assert durable is not None


# -- the parser on recorded lines -------------------------------------------------------------

F = "/f"
T = "/f/state.json"
GOOD = """\
7  openat(AT_FDCWD</w>, "/f/t", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3</f/t>
7  write(3</f/t>, ""..., 40) = 40
7  fsync(3</f/t>) = 0
7  rename("/f/t", "/f/state.json") = 0
7  openat(AT_FDCWD</w>, "/f", O_RDONLY|O_CLOEXEC) = 4</f>
7  fsync(4</f>) = 0
"""


def _events(text: str) -> list[Event]:
    return read_events(text, F)


def test_recorded_correct_save_passes():
    """The recorded lines of a right save pass both verdicts, with every field read."""
    events = _events(GOOD)
    assert [e.syscall for e in events] == ["openat", "write", "fsync", "rename", "openat", "fsync"]
    first = events[0]
    assert (first.pid, first.paths, first.returned, first.result, first.end) == (7, ("/f/t",), "/f/t", 3, 1)
    assert first.flags == ("O_WRONLY", "O_CREAT", "O_TRUNC", "O_CLOEXEC")
    assert events[3].paths == ("/f/t", T)
    assert atomic_problem(events, T) is None and durable_problem(events, T) is None


def test_unfinished_and_resumed_lines_make_one_event():
    """An ``<unfinished ...>`` line and its ``<... resumed>`` make one event that starts and ends where they are."""
    text = """\
[pid   101] openat(AT_FDCWD</w>, "/f/t", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666 <unfinished ...>
[pid   102] write(1<pipe:[7]>, ""..., 1) = 1
[pid   101] <... openat resumed>)      = 3</f/t>
[pid   101] fsync(3</f/t> <unfinished ...>
[pid   102] write(1<pipe:[7]>, ""..., 1 <unfinished ...>
[pid   101] <... fsync resumed>)       = 0
[pid   102] <... write resumed>)       = 1
"""
    events = _events(text)
    assert [(e.syscall, e.line, e.end, e.result) for e in events] == [("openat", 1, 3, 3), ("fsync", 4, 6, 0)]
    assert events[0].returned == "/f/t" and events[0].paths == ("/f/t",)


def test_a_call_killed_midway_may_have_happened():
    """A call the process was killed in has no result and no end, and is not counted as failed."""
    text = '9  rename("/f/t", "/f/state.json" <unfinished ...>\n9  +++ killed by SIGKILL +++\n'
    [event] = _events(text)
    assert (event.syscall, event.paths, event.result, event.end, event.failed) == (
        "rename",
        ("/f/t", T),
        None,
        None,
        False,
    )


def test_escaped_names_are_decoded():
    """Hex (-xx) and C escapes decode to the file's real name; a quote or newline in it splits nothing."""
    hexed = '3  rename("\\x2f\\x66\\x2f\\x61\\x22\\x0a\\x3d\\x20\\x30", "\\x2f\\x66\\x2f\\x62") = 0\n'
    plain = '3  rename("/f/a\\"\\n= 0", "/f/c\\\\d\\303\\251") = 0\n'
    assert _events(hexed)[0].paths == ('/f/a"\n= 0', "/f/b")
    assert _events(plain)[0].paths == ('/f/a"\n= 0', "/f/c\\d\u00e9")


def test_relative_paths_follow_the_working_folder():
    """Relative paths resolve against the cwd strace showed or a chdir; another process's chdir makes them unknown."""
    known = '5  openat(AT_FDCWD</f>, "x", O_RDONLY) = 3</f/x>\n5  rename("t", "state.json") = 0\n'
    assert _events(known)[1].paths == ("/f/t", T)
    moved = '5  chdir("/f") = 0\n5  unlink("t") = 0\n6  chdir("/") = 0\n5  unlink("state.json") = 0\n'
    assert [e.paths for e in _events(moved)] == [("/f",), ("/f/t",), (None,)]
    unknown = _events('5  rename("t", "state.json") = 0\n')
    assert unknown[0].paths == (None, None)
    assert "could not resolve" in str(atomic_problem(unknown, T))


def test_dirfd_and_proc_links():
    """A dirfd's kernel path anchors a relative name; a path through /proc's links is never trusted."""
    text = '5  renameat2(4</f>, "t", 4</f>, "state.json", RENAME_NOREPLACE) = 0\n'
    assert _events(text)[0].paths == ("/f/t", T)
    proc = '5  rename("/proc/self/cwd/t", "/proc/self/cwd/state.json") = 0\n'
    assert _events(proc)[0].paths == (None, None)
    assert "could not resolve" in str(atomic_problem(_events(proc), T))


def test_failed_calls_change_nothing():
    """An open for writing the kernel refused is no write in place."""
    text = '7  openat(AT_FDCWD</w>, "/f/state.json", O_WRONLY|O_TRUNC) = -1 EACCES (Permission denied)\n' + GOOD
    events = _events(text)
    assert events[0].failed and events[0].error == "EACCES"
    assert atomic_problem(events, T) is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("7  ftruncate(5</f/state.json>, 0) = 0", "in place with ftruncate()"),
        ('7  unlink("/f/state.json") = 0', "deleted state.json"),
        ('7  rename("/f/state.json", "/f/old") = 0', "renamed state.json (or its folder) away"),
        ('7  rename("/f", "/g") = 0', "renamed state.json (or its folder) away"),
        ("7  io_uring_setup(8, {flags=0}) = 5<anon_inode:[io_uring]>", "io_uring"),
        ("7  mmap(NULL, 40, PROT_READ|PROT_WRITE, MAP_SHARED, 3</f/t>, 0) = 0x7f00", "mapped t shared"),
        ('7  linkat(AT_FDCWD</w>, "/f/t", AT_FDCWD</w>, "/tmp/alias", 0) = 0', "hard link"),
        ('7  symlink("/f", "/tmp/f") = 0', "symbolic link"),
        ("7  copy_file_range(4</tmp/x>, NULL, 5</f/state.json>, NULL, 9, 0) = 9", "in place with copy_file_range()"),
        ("7  ioctl(5</f/state.json>, FICLONE, 4) = 0", "in place with ioctl()"),
        ('7  write(5, ""..., 9) = 9', "could not resolve"),
        ('7  symlink("/proc/self/cwd", "/tmp/l") = 0\n7  unlink("/tmp/l/state.json") = 0', "could not resolve"),
        ('7  symlink("/g", "/tmp/l") = 0\n7  truncate("/tmp/l", 0) = 0', "could not resolve"),
        ('7  symlink("/g", "/tmp/l") = 0\n7  rename("/tmp/l/../f/t", "/f/old") = 0', "could not resolve"),
        ('7  renameat2(AT_FDCWD</f>, "/f/state\\x', "could not read"),
    ],
)
def test_each_way_of_changing_the_target_is_caught(line, reason):
    """Truncating, deleting, moving, aliasing or mapping the target, io_uring, or an unreadable call each fail (a)."""
    problem = atomic_problem(_events(GOOD + line + "\n"), T)
    assert problem is not None and reason in problem, problem


def test_an_exchange_onto_the_target_is_atomic():
    """renameat2(RENAME_EXCHANGE) swaps the new file in without the target ever missing."""
    text = GOOD.replace(
        '7  rename("/f/t", "/f/state.json") = 0',
        '7  renameat2(AT_FDCWD</w>, "/f/t", AT_FDCWD</w>, "/f/state.json", RENAME_EXCHANGE) = 0',
    )
    assert atomic_problem(_events(text), T) is None
    assert durable_problem(_events(text), T) is None


def test_durable_order_on_recorded_lines():
    """fdatasync counts as fsync; an fsync before the last write, or a folder fsync before the rename, does not."""
    assert durable_problem(_events(GOOD.replace("fsync(3", "fdatasync(3")), T) is None
    late_write = GOOD.replace("7  fsync(3</f/t>) = 0\n", '7  fsync(3</f/t>) = 0\n7  write(3</f/t>, ""..., 1) = 1\n')
    assert "before its last write" in str(durable_problem(_events(late_write), T))
    early_folder = GOOD.replace("7  fsync(4</f>) = 0\n", "").replace(
        '7  openat(AT_FDCWD</w>, "/f/t"', '7  fsync(4</f>) = 0\n7  openat(AT_FDCWD</w>, "/f/t"'
    )
    assert "only before the rename" in str(durable_problem(_events(early_folder), T))


def test_lines_that_cannot_touch_the_folder_are_left_out():
    """Other folders, strace's own status lines and garbage naming nothing are no events; garbage naming the folder is."""
    text = '7  openat(AT_FDCWD</w>, "/g/x", O_WRONLY|O_CREAT, 0666) = 3</g/x>\n7  +++ exited with 0 +++\nhello world\n'
    assert _events(text) == []
    assert _events('7  symlink("/proc/self/fd/0", "/newroot/dev/stdin") = 0\n') == []  # bwrap's own
    [odd] = read_events("7  frobnicate(the folder f3a9 is here) = 0\n", "/grading/shared/f3a9")
    assert odd.unparsed


def test_tracer_argv_is_a_prefix_writing_to_an_absolute_file():
    """The prefix follows forks, decodes fds, hides data, filters in the kernel, and never reads "|x" as a pipe."""
    argv = syscalls.tracer_argv(Path("|x"))
    strace = argv[argv.index("strace") : argv.index("--") + 1]
    assert {"-f", "-y", "-xx", "--seccomp-bpf"} <= set(strace) and strace[strace.index("-s") + 1] == "0"
    assert Path(strace[strace.index("-o") + 1]).is_absolute()


FLOOD = """import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for _ in range(20000):
    os.lseek(fd, 0, os.SEEK_SET)
sys.stderr.write("the command's own\\n")
"""


@pytest.mark.slow
def test_the_tracers_own_messages_never_reach_the_commands_stderr(tmp_path):
    """A trace that fills its folder: strace's message for every line it cannot write stays off the command's stderr
    (the job's capped output), which holds the command's own words only; the trace counts as cut off."""
    if (why := syscalls.available()) is not None:
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.skip("a folder that fills needs a tmpfs, which only root mounts")
    with capped_folder(256 << 10) as folder:
        trace = folder / "trace.txt"
        argv = [*syscalls.tracer_argv(trace), sys.executable, "-c", FLOOD, str(folder)]
        proc = subprocess.run(argv, capture_output=True, timeout=300, check=False)
        assert proc.returncode == 0 and proc.stderr == b"the command's own\n", proc.stderr[-300:]
        assert "filled its folder" in str(syscalls.cut_off(trace))
    roomy = tmp_path / "trace.txt"
    assert subprocess.run([*syscalls.tracer_argv(roomy), "/bin/true"], check=False).returncode == 0
    assert syscalls.cut_off(roomy) is None and Path(f"{roomy}{syscalls.LOG}").read_bytes() == b""


FRAGMENTS = st.sampled_from(
    [
        "7  ",
        "[pid 8] ",
        "openat(",
        "rename(",
        "mmap(",
        "AT_FDCWD</f>",
        '"',
        "\\x2f",
        "\\",
        ", ",
        ") = ",
        "0x7f",
        "-1 ENOENT (No such file)",
        "?",
        "3</f/state.json>",
        " <unfinished ...>",
        "<... openat resumed>",
        "+++ killed by SIGKILL +++",
        "O_WRONLY|O_TRUNC",
        "RENAME_EXCHANGE",
        "MAP_SHARED",
        "<",
        ">",
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        "0123",
    ]
)
LINES = st.lists(st.one_of(FRAGMENTS, st.text(max_size=12)), max_size=14).map("".join)


@pytest.mark.slow
@settings(deadline=None)
@given(st.lists(LINES, max_size=20))
def test_read_events_never_raises(lines):
    """Any text at all reads as events without raising, and both verdicts judge them without raising."""
    events = read_events("\n".join(lines), F)
    assert all(isinstance(e, Event) for e in events)
    for verdict in (atomic_problem, durable_problem):
        assert verdict(events, T) is None or isinstance(verdict(events, T), str)


# -- an append, and what a kill in the middle of it leaves -------------------------------------

J = "/f/journal.jsonl"
HEAD = b'{"format":"resumable-journal","version":1}\n'
LINE = b'{"turn":1}\t12345678\n'
APPEND = f"""\
7  openat(AT_FDCWD</w>, "{J}", O_RDWR|O_CREAT|O_APPEND|O_CLOEXEC, 0666) = 3<{J}>
7  write(3<{J}>, ""..., {len(LINE)}) = {len(LINE)}
7  fsync(3<{J}>) = 0
"""


def test_an_append_leaves_every_prefix_of_its_write():
    """A plain append: the states are the old file, then each prefix of the new line on it; fsynced after the write."""
    seen = syscalls.append_states(_events(APPEND), J, HEAD, HEAD + LINE)
    assert seen.problem is None and seen.synced_after_last_write and not seen.created and seen.start == len(HEAD)
    assert seen.states == tuple(HEAD + LINE[:k] for k in range(len(LINE) + 1))


def test_an_append_that_creates_the_journal_starts_from_no_file():
    """Creating the file: no file, an empty one, then each prefix; the folder's fsync after the open counts."""
    text = APPEND.replace(f"{len(LINE)}) = {len(LINE)}", f"{len(HEAD + LINE)}) = {len(HEAD + LINE)}")
    text += '7  openat(AT_FDCWD</w>, "/f", O_RDONLY|O_CLOEXEC) = 4</f>\n7  fsync(4</f>) = 0\n'
    seen = syscalls.append_states(_events(text), J, None, HEAD + LINE)
    assert seen.problem is None and seen.created and seen.folder_synced_after_create
    assert seen.states[:3] == (None, b"", HEAD[:1]) and seen.states[-1] == HEAD + LINE
    assert not syscalls.append_states(
        _events(APPEND.replace("7  fsync", "7  fstat")), J, HEAD, HEAD + LINE
    ).synced_after_last_write


def test_a_cut_torn_tail_and_a_rewrite_show_in_the_states():
    """An ftruncate before the write leaves the cut file as a state; an O_TRUNC open leaves an empty one."""
    torn = HEAD + LINE[:5]
    cut = APPEND.replace("7  write", f"7  ftruncate(3<{J}>, {len(HEAD)}) = 0\n7  write")
    seen = syscalls.append_states(_events(cut), J, torn, HEAD + LINE)
    assert seen.problem is None and seen.states[:2] == (torn, HEAD)
    whole = len(HEAD + LINE)
    rewrite = APPEND.replace("O_RDWR|O_CREAT|O_APPEND", "O_WRONLY|O_CREAT|O_TRUNC").replace(
        f"{len(LINE)}) = {len(LINE)}", f"{whole}) = {whole}"
    )
    seen = syscalls.append_states(_events(rewrite), J, HEAD, HEAD + LINE)
    assert seen.problem is None and b"" in seen.states


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (f'7  rename("/f/t", "{J}") = 0', "renamed a file onto"),
        (f'7  unlink("{J}") = 0', "unlink"),
        ("7  io_uring_setup(8, 0x7ff) = 5", "io_uring_setup"),
        ('7  write(5, ""..., 9) = 9', "could not resolve"),
        ('7  renameat2(AT_FDCWD</f>, "/f/jour\\x', "could not follow"),
    ],
)
def test_what_is_no_append_is_a_problem(extra, reason):
    """Renaming onto the journal, deleting it, io_uring, an unresolved fd or an unreadable call rule the append out."""
    seen = syscalls.append_states(_events(APPEND + extra + "\n"), J, HEAD, HEAD + LINE)
    assert seen.problem is not None and reason in seen.problem, seen.problem
    assert seen.states == (HEAD, HEAD + LINE)


def test_writes_the_file_does_not_account_for_are_a_problem():
    """A file the writes cannot have made (cut after them, or not its old bytes plus theirs) is no append."""
    assert "fewer bytes" in str(syscalls.append_states(_events(APPEND), J, HEAD, b"x").problem)
    assert "not its old bytes" in str(syscalls.append_states(_events(APPEND), J, HEAD, b"X" * len(HEAD) + LINE).problem)


APPENDER = """import os, sys
path = sys.argv[1]
with open(path, "ab") as f:
    f.write(b'{"turn":1}\\t12345678\\n')
    f.flush()
    os.fsync(f.fileno())
"""


@pytest.mark.slow
def test_a_real_append_under_strace(tmp_path):
    """A real process appending under the real strace: its one write gives every prefix, and its fsync is seen."""
    reason = syscalls.available()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path.resolve() / "j"
    folder.mkdir()
    target = folder / "journal.jsonl"
    target.write_bytes(HEAD)  # before the trace starts
    trace = tmp_path / "trace.txt"
    argv = [*syscalls.tracer_argv(trace), sys.executable, "-c", APPENDER, str(target)]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    seen = syscalls.append_states(read_events(trace, str(folder)), str(target), HEAD, target.read_bytes())
    assert seen.problem is None and seen.synced_after_last_write
    assert seen.states == tuple(HEAD + LINE[:k] for k in range(len(LINE) + 1))


def _offset_append(first: str, second: str) -> str:
    """The open of APPEND without O_APPEND, then two writes (``first``, ``second``) and an fsync."""
    opened = APPEND.splitlines()[0].replace("O_CREAT|O_APPEND", "O_CREAT")
    return f"{opened}\n7  {first}\n7  {second}\n7  fsync(3<{J}>) = 0\n"


def test_writes_land_where_their_offsets_and_seeks_put_them():
    """pwrite64 at the file's end, and lseek to it then write, give the same prefixes as an O_APPEND write."""
    n, end = len(LINE), len(HEAD)
    k = n // 2
    prefixes = tuple(HEAD + LINE[:i] for i in range(n + 1))
    by_offset = _offset_append(
        f'pwrite64(3<{J}>, ""..., {k}, {end}) = {k}', f'pwrite64(3<{J}>, ""..., {n - k}, {end + k}) = {n - k}'
    )
    by_seek = _offset_append(f"lseek(3<{J}>, 0, SEEK_END) = {end}", f'write(3<{J}>, ""..., {n}) = {n}')
    for text in (by_offset, by_seek):
        seen = syscalls.append_states(_events(text), J, HEAD, HEAD + LINE)
        assert seen.problem is None and seen.start == end and seen.states == prefixes, seen.problem


def test_a_write_past_the_end_is_a_problem_by_offset_or_seek():
    """The line's second half first (pwrite64 past the end, or lseek past it then write) leaves a hole: refused."""
    n, end = len(LINE), len(HEAD)
    k = n // 2
    second_first = [
        _offset_append(
            f'pwrite64(3<{J}>, ""..., {n - k}, {end + k}) = {n - k}', f'pwrite64(3<{J}>, ""..., {k}, {end}) = {k}'
        ),
        _offset_append(f"lseek(3<{J}>, {end + k}, SEEK_SET) = {end + k}", f'write(3<{J}>, ""..., {n - k}) = {n - k}'),
    ]
    for text in second_first:
        seen = syscalls.append_states(_events(text), J, HEAD, HEAD + LINE)
        assert "starts past its end" in str(seen.problem), seen.problem


def test_a_plain_write_at_position_zero_overwrites_the_header():
    """Without O_APPEND or a seek, a write lands at offset 0: the states show the header overwritten (start 0)."""
    text = _offset_append(
        f'write(3<{J}>, ""..., {len(HEAD)}) = {len(HEAD)}', f"lseek(3<{J}>, 0, SEEK_CUR) = {len(HEAD)}"
    )
    seen = syscalls.append_states(_events(text), J, HEAD, b"X" * len(HEAD))
    assert seen.problem is None and seen.start == 0


@pytest.mark.parametrize(
    ("calls", "reason"),
    [
        (f'write(4<{J}>, ""..., 9) = 9', "did not see opened"),
        (f'_llseek(3<{J}>, 0, [44], SEEK_END) = 0\n7  write(3<{J}>, ""..., 9) = 9', "could not follow"),
        (f"dup(3<{J}>) = 5", "dup()"),
        (f"fcntl(3<{J}>, F_SETFL, O_APPEND) = 0", "F_SETFL"),
        (f'pwrite64(3<{J}>, ""..., 9, ?) = 9', "could not follow"),
    ],
)
def test_a_write_whose_place_cannot_be_known_is_a_problem(calls, reason):
    """A write through an fd not seen opened, after an unfollowed seek, a dup or a flag change, or at an unread offset is refused."""
    opened = APPEND.splitlines()[0].replace("O_CREAT|O_APPEND", "O_CREAT")
    seen = syscalls.append_states(_events(f"{opened}\n7  {calls}\n"), J, HEAD, HEAD + b"x" * 9)
    assert seen.problem is not None and reason in seen.problem, seen.problem


APPENDER_BY_SEEK = """import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.read(fd, 1 << 20)  # to the end: the next write lands there
os.write(fd, b'{"turn":1}\\t12345678\\n')
os.fsync(fd)
"""


@pytest.mark.slow
def test_a_real_read_then_write_under_strace(tmp_path):
    """A real process that reads to the end, then writes: strace's read moves the position, so the write lands at the end."""
    reason = syscalls.available()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path.resolve() / "j"
    folder.mkdir()
    target = folder / "journal.jsonl"
    target.write_bytes(HEAD)
    trace = tmp_path / "trace.txt"
    argv = [*syscalls.tracer_argv(trace), sys.executable, "-c", APPENDER_BY_SEEK, str(target)]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    seen = syscalls.append_states(read_events(trace, str(folder)), str(target), HEAD, target.read_bytes())
    assert seen.problem is None and seen.start == len(HEAD)
    assert seen.states == tuple(HEAD + LINE[:k] for k in range(len(LINE) + 1))


def _marked(mark: str) -> str:
    """The line of the learner's process marking that the call ``mark`` names returned."""
    path = "".join(f"\\x{b:02x}" for b in (syscalls.RETURNED + mark).encode())
    return f'7  openat(AT_FDCWD</w>, "{path}", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)\n'


def test_what_follows_the_return_is_no_part_of_the_call():
    """The events after the call's mark are cut off; an fsync or write to the folder among them is a problem."""
    mark = "ab" * 8
    text = APPEND.replace("7  fsync", _marked(mark) + "8  fsync")
    returned = syscalls.returned_mark(text, mark)
    assert returned is not None and returned.line == 3 and syscalls.returned_mark(text, "cd" * 8) is None
    during, late = syscalls.until_returned(_events(text), returned, J)
    assert [e.syscall for e in during] == ["openat", "write"] and "after it returned (trace line 4)" in str(late)
    assert not syscalls.append_states(during, J, HEAD, HEAD + LINE).synced_after_last_write
    whole = APPEND + _marked(mark)
    assert syscalls.until_returned(_events(APPEND), syscalls.returned_mark(whole, mark), J) == (_events(APPEND), None)
    assert "no end of the call" in str(syscalls.until_returned(_events(APPEND), None, J)[1])


def test_a_call_in_progress_at_the_return_never_returned():
    """A write whose result is printed after the mark counts as one that never returned."""
    text = f'7  write(3<{J}>, ""..., 9 <unfinished ...>\n{_marked("ab" * 8)}7  <... write resumed>) = 9\n'
    during, late = syscalls.until_returned(_events(text), syscalls.returned_mark(text, "ab" * 8), J)
    assert late is None and during[0].end is None and during[0].result is None


def test_a_change_by_another_thread_is_no_part_of_the_call():
    """An fsync of the journal by another thread than the call's, even before the return, is a problem."""
    text = APPEND.replace("7  fsync", "8  fsync") + _marked("ab" * 8)
    during, late = syscalls.until_returned(_events(text), syscalls.returned_mark(text, "ab" * 8), J)
    assert "from another thread or process (trace line 3)" in str(late) and len(during) == 2


def test_a_seek_by_another_thread_before_the_return_is_a_problem():
    """Another thread's lseek or read of the journal's fd during the call (which moves where its writes land) is a problem; after the return it is not."""
    n, end = len(LINE), len(HEAD)
    opened = APPEND.splitlines()[0].replace("O_CREAT|O_APPEND", "O_CREAT")
    for moved in (f"8  lseek(3<{J}>, {end + 4}, SEEK_SET) = {end + 4}", f'8  read(3<{J}>, ""..., 4) = 4'):
        calls = f'7  lseek(3<{J}>, 0, SEEK_END) = {end}\n{moved}\n7  write(3<{J}>, ""..., {n}) = {n}\n'
        text = f"{opened}\n{calls}{_marked('ab' * 8)}"
        during, late = syscalls.until_returned(_events(text), syscalls.returned_mark(text, "ab" * 8), J)
        assert "from another thread or process (trace line 3)" in str(late) and len(during) == 3, late
    after = f"{APPEND}{_marked('ab' * 8)}8  lseek(3<{J}>, 0, SEEK_SET) = 0\n"
    assert syscalls.until_returned(_events(after), syscalls.returned_mark(after, "ab" * 8), J)[1] is None


def test_a_dups_new_fd_without_a_path_was_not_open():
    """strace shows a dup's new fd without a path when it was not open: it names no file (the tracer's own shell
    makes one before the command), but an old fd without a path is still unresolved."""
    assert read_events("8  dup2(3<pipe:[7]>, 2) = 2<pipe:[7]>\n", "/f") == []
    assert read_events("8  dup2(3, 2) = 2\n", "/f")[0].fds == (None, "(not open)")
    assert read_events(f"8  dup3(3<{J}>, 9, O_CLOEXEC) = 9<{J}>\n", "/f")[0].fd_numbers == (3, 9)


def _stamped(text: str, start: float) -> str:
    """``text``'s lines with strace's -ttt times, one millisecond apart from ``start``."""
    lines = text.splitlines(keepends=True)
    return "".join(f"7 {start + i / 1000:.6f} {line.split(None, 1)[1]}" for i, line in enumerate(lines))


def test_the_checkers_clock_bounds_a_call_whatever_its_mark_says():
    """A call begun after the checker had the reply is after the return, even before the mark; a mark after the reply is a problem."""
    mark = "ab" * 8
    text = _stamped(APPEND + _marked(mark), 1000.0)  # open 1000.000, write .001, fsync .002, mark .003
    returned = syscalls.returned_mark(text, mark)
    assert returned is not None and returned.at == 1000.003
    assert syscalls.until_returned(_events(text), returned, J, replied_at=1000.004) == (_events(text)[:3], None)
    # the learner's process held its mark back until its fsync: the fsync began after the checker had the reply
    during, late = syscalls.until_returned(_events(text)[:2], returned, J, replied_at=1000.0015)
    assert "after the grader had its reply" in str(late) and during == []
    during, late = syscalls.until_returned(_events(text), dataclasses.replace(returned, at=1000.0015), J, 1000.0015)
    assert [e.syscall for e in during] == ["openat", "write"] and "fsync() on the folder" in str(late)
    assert "after it returned (trace line 3)" in str(late)


def test_a_mark_is_hex_only():
    """mark_returned refuses a mark that is no short lowercase hex string (it becomes a path)."""
    for bad in ("../x", "AB" * 8, 7, "a" * 65):
        with pytest.raises(ValueError, match="hex"):
            syscalls.mark_returned(bad)
    syscalls.mark_returned("ab" * 8)


def test_a_growing_trace_is_read_as_the_whole_file_parsing_each_line_once(tmp_path, monkeypatch):
    """syscalls.Trace answers as read_events and returned_mark on the whole file at every moment it grows (a cut
    line, a call resumed later, a working folder changed earlier), and parses each complete line once."""
    mark = "ab" * 8
    unfinished = f'7  write(3<{J}>, ""..., 9 <unfinished ...>\n{_marked(mark)}7  <... write resumed>) = 9\n'
    text = f'9  chdir("/f") = 0\n{APPEND}{unfinished}9  openat(AT_FDCWD, "journal.jsonl", O_WRONLY) = 4\n'
    data, path = text.encode(), tmp_path / "trace"
    path.write_bytes(b"")
    trace = syscalls.Trace(path, F)
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    for cut in sorted({*range(0, len(data), 11), *ends, *(e - 1 for e in ends)}):
        path.write_bytes(data[:cut])
        assert trace.events(F) == read_events(path, F), cut
        assert trace.returned_mark(mark) == syscalls.returned_mark(path, mark), cut
    assert {e.syscall for e in trace.events(F)} >= {"chdir", "write", "fsync", "openat"}
    parsed: list[int] = []
    line = syscalls._Reader._line

    def counted(self, text, number):
        parsed.append(number)
        return line(self, text, number)

    monkeypatch.setattr(syscalls._Reader, "_line", counted)
    trace, lines = syscalls.Trace(path, F), text.splitlines(keepends=True)
    for n in range(len(lines) + 1):  # grown a whole line at a time
        path.write_text("".join(lines[:n]))
        trace.events(F)
        trace.returned_mark(mark)
    assert parsed == list(range(1, len(lines) + 1))


@dataclass(frozen=True)
class _Recording(PlainBackend):
    """Runs nothing: keeps each job it is given, and says the job ended at once."""

    jobs: list[Job] = dataclasses.field(default_factory=list)

    def run(self, job: Job) -> Outcome:
        self.jobs.append(job)
        return Outcome(0, b"", b"", None, 0.0)


@pytest.mark.parametrize("assignment", sorted(REGISTRY))
def test_only_a_learners_process_whose_checks_observe_runs_under_the_tracer(assignment):
    """The tracer slows every file call: only an assignment with a check that judges system calls pays for it."""
    import nbformat

    from resumable_core.course.grading.recheck.learner import LearnerProcess

    backend = _Recording()
    process = LearnerProcess.start(nbformat.v4.new_notebook(), None, assignment, timeout=5, wall=5, backend=backend)
    process.stop()
    wanted = assignment == "resume_skeleton" and syscalls.available() is None
    assert bool(backend.jobs[0].tracer) is wanted is process.traced


def test_every_check_that_observes_is_marked_so():
    """A check that reads the trace but is not marked would find none and fail: each one is marked (``observes``)."""
    for a in REGISTRY.values():
        for module in (a.checks(), a.hidden()):
            for name, check in vars(module).items():
                if name.startswith("check_") and getattr(check, "__module__", None) == module.__name__:
                    reads = any(
                        n in check.__code__.co_names
                        for n in ("observed_save", "observed_append", "require_appends_only")
                    )
                    assert reads == getattr(check, OBSERVES, False), f"{module.__name__}.{name}"
    assert [a for a in REGISTRY if traced(a)] == ["resume_skeleton"]
