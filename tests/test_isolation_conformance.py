"""The isolation backends' conformance suite: every backend in ``BACKENDS`` runs every test here.

In the manner of langgraph's checkpoint conformance tests: a test checks one :class:`Guarantee`
(its ``guarantee`` mark) by its effect, from outside the job, and is skipped, with the reason, on a
backend that does not claim it here (``Backend.guarantees()``). A backend that claims a guarantee it
does not hold fails. A new backend joins by being added to ``BACKENDS``; a new guarantee, by a test.
"""

from __future__ import annotations

import ast
import shutil
import socket
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from attack_samples import MINCORE  # tests/ is on sys.path under pytest (rootdir-relative import)

from resumable_core.course.grading.isolation import (
    BACKENDS,
    Backend,
    Guarantee,
    Job,
    Limits,
    Mount,
    Outcome,
    library_copy,
    make_backend,
)

REPO = Path(__file__).resolve().parent.parent
guarantee = pytest.mark.guarantee


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    return library_copy(tmp_path_factory.mktemp("lib") / "lib")


@pytest.fixture(params=sorted(BACKENDS))
def make(request, library) -> Callable[..., Backend]:
    """Makes the backend under test with the given limits; skips a test of a guarantee it does not claim."""
    name = request.param
    if name == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (apt-get install bubblewrap)")
    marker = request.node.get_closest_marker("guarantee")
    claimed = make_backend(name).guarantees()
    if marker is not None and marker.args[0] not in claimed:
        pytest.skip(f"{name} does not claim {marker.args[0].name} here")

    def make(limits: Limits | None = None) -> Backend:
        backend = make_backend(name, library=library, limits=limits or Limits(wall=60))
        assert backend.available() is None, backend.available()
        return backend

    return make


@pytest.fixture
def run(make) -> Callable[..., Outcome]:
    """Runs Python ``code`` as a job in ``scratch`` on the backend under test."""

    def run(scratch: Path, code: str, limits: Limits | None = None) -> Outcome:
        return make(limits).run(Job((sys.executable, "-c", textwrap.dedent(code)), scratch))

    return run


def _lines(result: Outcome) -> list[str]:
    return result.stdout.decode().split()


def _running_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # the process ended while we looked
            continue
    return found


SPREAD = """
import os, select
ready_r, ready_w = os.pipe()
release_r, release_w = os.pipe()
kids = set()
for _ in range({n}):
    pid = os.fork()
    if pid == 0:
        os.close(release_w)  # else no child ever sees the release
        share = b"x" * ({mib} << 20)  # written, so resident
        os.write(ready_w, b"%d " % os.getpid())
        os.read(release_r, 1)  # hold it until every child holds its share or is dead
        os._exit(0)
    kids.add(pid)
ready, ended = set(), dict()
while ready | set(ended) != kids:
    if select.select([ready_r], [], [], 0.1)[0]:
        ready.update(int(p) for p in os.read(ready_r, 4096).split())
    for pid in kids - set(ended):
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            ended[pid] = status
os.close(release_w)
ended.update((pid, os.waitpid(pid, 0)[1]) for pid in kids - set(ended))
held = [pid for pid in ready if ended[pid] & 0x7F != 9]
print(len(held), sum(status & 0x7F == 9 for status in ended.values()))
"""


FILLER = """
import errno
written = 0
try:
    for i in range(100_000):
        with open(f"small-{i}", "wb") as f:
            f.write(b"x" * 1000)
        written += 1
except OSError as e:
    print(errno.errorcode[e.errno], written)
"""


BURNERS = """
import os, resource, time
started = time.monotonic()
kids = []
for _ in range({n}):
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + {seconds}
        while time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print((used.ru_utime + used.ru_stime) / (time.monotonic() - started))
"""


def test_every_guarantee_has_a_conformance_test() -> None:
    """Each Guarantee is checked by at least one test here: none can be claimed untested."""
    marks = {
        m.args[0]
        for f in globals().values()
        if callable(f) and getattr(f, "__name__", "").startswith("test_")
        for m in getattr(f, "pytestmark", [])
        if m.name == "guarantee"
    }
    assert marks == set(Guarantee)


@pytest.mark.slow
def test_a_backend_claims_only_guarantees(make) -> None:
    """What a backend claims is a set of Guarantee members, and it runs here (bwrap only where installed)."""
    backend = make()
    assert backend.guarantees() <= set(Guarantee) and backend.name in BACKENDS


def test_mounts_are_where_the_backend_says_and_writable_ones_reach_the_host(make, tmp_path):
    """A job finds each mount at ``inside(mount)``; what it writes to a writable mount is on the host after."""
    scratch, given, out = tmp_path / "scratch", tmp_path / "given", tmp_path / "out"
    for folder in (scratch, given, out):
        folder.mkdir()
    (given / "given.txt").write_text("given")
    backend = make()
    ro, rw = Mount(given, "/grading/in"), Mount(out, "/grading/out", writable=True)
    code = f"""
        print(open({backend.inside(ro)!r} + "/given.txt").read())
        open({backend.inside(rw)!r} + "/x", "w").write("written")
        """
    result = backend.run(Job((sys.executable, "-c", textwrap.dedent(code)), scratch, (ro, rw)))
    assert result.stdout.decode().split() == ["given"] and (out / "x").read_text() == "written"


@guarantee(Guarantee.READ_ONLY_LIBRARY)
def test_a_read_only_mount_refuses_writes(make, tmp_path):
    """A mount that is not writable is readable and refuses every write."""
    scratch, given = tmp_path / "scratch", tmp_path / "given"
    scratch.mkdir(), given.mkdir()
    backend = make()
    ro = Mount(given, "/grading/in")
    code = f"""
        try:
            open({backend.inside(ro)!r} + "/x", "w").write("written")
            print("written")
        except OSError as e:
            print(type(e).__name__)
        """
    result = backend.run(Job((sys.executable, "-c", textwrap.dedent(code)), scratch, (ro,)))
    assert _lines(result) == ["OSError"] and not (given / "x").exists()


@pytest.mark.slow
def test_a_job_sets_its_own_wall_clock(make, tmp_path):
    """A job's ``wall`` replaces the backend's for that job alone, and the outcome names it."""
    backend = make(Limits(wall=600))
    result = backend.run(Job((sys.executable, "-c", "import time; time.sleep(600)"), tmp_path, wall=1))
    assert result.limit == "wall clock (1 s)" and backend.limits.wall == 600


@pytest.mark.slow
def test_a_job_imports_the_library_it_names(make, library, tmp_path):
    """``Job.library`` is the ``resumable_core`` the job imports: a view made for it wins over the backend's."""
    view = tmp_path / "view"
    shutil.copytree(library, view)
    (view / "resumable_core" / "marker.py").write_text("WHO = 'the view'\n")
    code = "from resumable_core import marker; print(marker.WHO.replace(' ', '-'))"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = make().run(Job((sys.executable, "-c", code), scratch, library=view))
    assert _lines(result) == ["the-view"], result.stderr.decode()[-2000:]


@guarantee(Guarantee.OWN_NETWORK)
def test_a_port_served_on_localhost_cannot_be_reached(run, tmp_path):
    """A server on the grader's localhost is reachable outside and refused inside: the sandbox has its own loopback."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # the control: it is served
    result = run(
        tmp_path,
        f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=5)
            print("connected")
        except OSError as e:
            print(type(e).__name__)
        """,
    )
    server.close()
    assert _lines(result) == ["ConnectionRefusedError"]


@guarantee(Guarantee.HOST_HIDDEN)
def test_the_checkout_the_gradebook_solutions_and_home_are_invisible(run, tmp_path):
    """The instructor's checkout, a planted gradebook and solutions folder, and the host's home are not there."""
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "gradebook.db").write_text("grades")
    (course / "solutions" / "answer.py").write_text("ANSWER = 42")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    home = Path.home()
    paths = [REPO / "pyproject.toml", REPO / "solutions", course / "gradebook.db", course / "solutions" / "answer.py"]
    result = run(
        scratch,
        f"""
        import os
        from pathlib import Path
        for p in {[str(p) for p in paths]!r}:
            print(Path(p).exists())
        print(os.environ["HOME"])
        home = Path({str(home)!r})
        print(sorted(os.listdir(home)) if home.is_dir() else [])
        """,
    )
    out = result.stdout.decode().splitlines()
    assert out[: len(paths)] == ["False"] * len(paths)
    assert out[len(paths)] != str(home)  # a HOME of its own
    on_path_to_python = {p.name for p in Path(sys.base_prefix).resolve().parents if p.parent == home}
    assert (
        set(ast.literal_eval(out[len(paths) + 1])) <= on_path_to_python
    )  # at most the folder leading to the interpreter


@guarantee(Guarantee.READ_ONLY_LIBRARY)
def test_the_library_is_the_pristine_copy_and_read_only(run, tmp_path):
    """resumable_core is imported from the copy; writing to it, the venv's site-packages or /usr fails."""
    site = next(p for p in sys.path if p.endswith("site-packages"))
    result = run(
        tmp_path,
        f"""
        import resumable_core
        print(resumable_core.__file__)
        for target in [resumable_core.__file__, {site!r} + "/evil.pth", "/usr/evil"]:
            try:
                open(target, "a").write("import os")
                print("written")
            except OSError as e:
                print(type(e).__name__)
        """,
    )
    imported, *writes = _lines(result)
    assert imported.endswith("/resumable_core/__init__.py") and not imported.startswith(str(REPO))
    assert writes == ["OSError", "OSError", "OSError"]
    assert not Path(site, "evil.pth").exists()


@pytest.mark.slow
@guarantee(Guarantee.PRIVATE_TMP)
def test_tmp_and_home_are_private_and_thrown_away(run, tmp_path):
    """Files written in /tmp and HOME are in no later sandbox and not on the host; scratch is the one writable folder."""
    marker = f"left-{uuid.uuid4().hex}"
    code = f"""
        import os
        from pathlib import Path
        print(Path("/tmp/{marker}").exists(), Path(os.environ["HOME"], "{marker}").exists())
        Path("/tmp/{marker}").write_text("x")
        Path(os.environ["HOME"], "{marker}").write_text("x")
        Path("{marker}").write_text("kept in scratch")
        """
    assert _lines(run(tmp_path, code)) == ["False", "False"]
    assert _lines(run(tmp_path, code)) == ["False", "False"]
    assert not Path("/tmp", marker).exists()
    assert (tmp_path / marker).read_text() == "kept in scratch"


@guarantee(Guarantee.NO_SECRETS)
def test_secrets_and_python_settings_stay_outside(run, tmp_path, monkeypatch):
    """ANTHROPIC_API_KEY, PYTHONOPTIMIZE and anything not on the allowlist reach no process it can see, its pid 1 too."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("PYTHONOPTIMIZE", "2")
    monkeypatch.setenv("RESUMABLE_LIVE", "1")
    code = """
        import os, sys
        print(sorted(os.environ))
        print(sys.flags.optimize)
        seen = []  # every process it can see, bwrap's own pid 1 too: /proc/N/environ
        for entry in os.listdir("/proc"):
            try:
                seen.append(b"sk-secret" in open(f"/proc/{entry}/environ", "rb").read())
            except OSError:
                continue
        print(len(seen), any(seen))
        """
    result = run(tmp_path, code)
    names, optimize, environs = result.stdout.decode().splitlines()
    for name in ("ANTHROPIC_API_KEY", "PYTHONOPTIMIZE", "RESUMABLE_LIVE"):
        assert name not in names
    assert optimize == "0"
    assert environs.split()[1] == "False" and int(environs.split()[0]) >= 1


@guarantee(Guarantee.NOTHING_OUTLIVES)
def test_no_process_outlives_the_sandbox(run, tmp_path):
    """A background process started in its own session, and left running, is gone when the sandbox ends."""
    marker = f"resumable-outlive-{uuid.uuid4().hex}"
    result = run(
        tmp_path,
        f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{marker}"], start_new_session=True)
        print("started")
        """,
    )
    assert _lines(result) == ["started"]
    assert _running_with(marker) == []


@pytest.mark.slow
@guarantee(Guarantee.WHOLE_MEMORY)
def test_memory_spread_over_forked_processes_is_capped_for_the_whole_sandbox(run, tmp_path):
    """Six children of 128 MiB, each far under the per-process cap: no more than 512 MiB is held at once."""
    limits = Limits(memory=512 << 20, wall=120)
    result = run(tmp_path, SPREAD.format(n=6, mib=128), limits)
    survivors, killed = map(int, _lines(result))  # the parent lives on to count them
    assert survivors * 128 < 512 and killed >= 2
    assert result.limit == "memory (512 MiB)"


@guarantee(Guarantee.MEMORY)
def test_a_memory_bomb_is_stopped_and_named(run, tmp_path):
    """One allocation past the memory limit fails at once (RLIMIT_AS), and the result names the memory limit."""
    limits = Limits(memory=512 << 20, wall=60)
    result = run(tmp_path, "x = bytearray(1 << 30)", limits)
    assert result.returncode != 0 and b"MemoryError" in result.stderr
    assert result.limit == "memory (512 MiB)"


@guarantee(Guarantee.PROCESSES)
def test_a_fork_bomb_is_stopped_and_named(run, tmp_path):
    """Forking past the process cap fails, and the result names the process limit."""
    limits = Limits(processes=24, wall=60)
    code = """
        import os, time
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        """
    result = run(tmp_path, code, limits)
    assert result.returncode != 0 and result.limit == "processes (24)"


@guarantee(Guarantee.FILE_SIZE)
def test_a_disk_filler_is_stopped_at_the_file_size_limit(run, tmp_path):
    """A file may not grow past the file-size limit; the result names it and the file stops there."""
    limits = Limits(file_size=1 << 20, wall=60)
    result = run(tmp_path, "open('big', 'wb').write(b'x' * (4 << 20))", limits)
    assert result.limit == "file size (1 MiB)"
    assert (tmp_path / "big").stat().st_size <= 1 << 20


@pytest.mark.slow
@guarantee(Guarantee.DISK)
def test_a_disk_filler_of_small_files_is_stopped_at_the_disk_limit(run, tmp_path):
    """Many small files stop at the disk limit, named; what the folder held before is there and does not count."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "submitted.bin").write_bytes(b"s" * (8 << 20))  # twice the quota, already there
    code = "import os; print(os.path.getsize('submitted.bin'))" + FILLER
    result = run(scratch, code, Limits(disk=4 << 20, wall=120))
    size, (error, written) = _lines(result)[0], _lines(result)[1:]
    assert size == str(8 << 20) and error == "ENOSPC" and 0 < int(written) <= 1024
    assert result.limit == "disk (4 MiB)"
    kept = sorted(p.name for p in scratch.iterdir())
    assert len(kept) == int(written) + 1 and "submitted.bin" in kept  # what it wrote comes back to the host
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch"]  # the mount point beside it went, with its mount
    assert str(tmp_path) not in Path("/proc/self/mounts").read_text()


@pytest.mark.slow
@guarantee(Guarantee.CPU)
def test_cpu_burners_get_no_more_than_the_cpu_cap(run, tmp_path):
    """Eight forked spinners for 3 s get half a CPU's worth of time under a cap of half a CPU, whatever the cores."""
    result = run(tmp_path, BURNERS.format(n=8, seconds=3), Limits(cpus=0.5, wall=60))
    share = float(result.stdout)  # CPU seconds of the spinners per second of wall clock
    assert 0.05 < share <= 0.5 * 1.2  # they did spin; a little over the cap: the first period, rounding
    assert result.limit is None  # throttled, not stopped


@guarantee(Guarantee.OUTPUT)
def test_an_output_flood_is_capped_and_named(run, tmp_path):
    """Writing without end to stdout stops at the output cap: what is kept is exactly the cap."""
    limits = Limits(output=1 << 20, wall=60)
    result = run(tmp_path, "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", limits)
    assert result.limit == "output (1 MiB)" and len(result.stdout) == 1 << 20


@pytest.mark.slow
@guarantee(Guarantee.WALL)
def test_the_wall_clock_kills_the_whole_sandbox(run, tmp_path):
    """A command that never ends is killed at the wall clock, and the result names it."""
    result = run(tmp_path, "import time; time.sleep(600)", Limits(wall=1))
    assert result.limit == "wall clock (1 s)"


def _sizes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.glob("tick-*")}


@guarantee(Guarantee.FREEZE)
def test_a_frozen_job_makes_no_progress_in_any_of_its_processes(make, tmp_path):
    """While frozen, neither the job nor a child it started in a session of its own writes a byte; thawed, both go on."""
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    scratch.mkdir(), out.mkdir()
    backend = make()
    shared = backend.inside(Mount(out, "/out", writable=True))
    ticking = f"""
import os, sys, time
with open(f"{shared}/tick-{{sys.argv[1]}}", "ab", buffering=0) as f:
    while not os.path.exists("{shared}/stop"):
        f.write(b"."), time.sleep(0.005)
"""
    code = f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {ticking!r}, 'child'], start_new_session=True)\n"
    job = Job(
        (sys.executable, "-c", code + f"sys.argv[1:] = ['parent']\nexec({ticking!r})"),
        scratch,
        (Mount(out, "/out", writable=True),),
    )
    ended = threading.Thread(target=backend.run, args=(job,))
    ended.start()
    try:
        while ended.is_alive() and (len(before := _sizes(out)) < 2 or min(before.values()) == 0):
            threading.Event().wait(0.05)
        with job.freezer.frozen():
            frozen = _sizes(out)
            threading.Event().wait(0.5)
            assert _sizes(out) == frozen
        threading.Event().wait(0.3)
        assert all(n > frozen[name] for name, n in _sizes(out).items()), (frozen, _sizes(out))
    finally:
        (out / "stop").touch()
        ended.join(30)


MARKS = """
import fcntl, glob, os, sys, time
dropped = sorted(glob.glob(os.path.dirname(os.__file__) + "/idlelib/idle_test/*.py"))[:16]
for path in ["{input}", os.__file__, "/dev/null"]:  # locks held on an input, the standard library, a device
    fcntl.flock(os.open(path, os.O_RDONLY), fcntl.LOCK_EX)
for path in dropped:  # pages dropped from the page cache
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
open("{out}/ready", "w").close()
while not os.path.exists("{out}/stop"):
    time.sleep(0.05)
"""

PROBE = (
    MINCORE
    + """
import fcntl, glob

dropped = sorted(glob.glob(os.path.dirname(os.__file__) + "/idlelib/idle_test/*.py"))[:16]
for path in ["{input}", os.__file__, "/dev/null"]:
    try:
        fcntl.flock(os.open(path, os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        print("locked:", path)
for path in dropped:
    if not _cached(path):
        print("not cached:", path)
print("probed")
"""
)


@pytest.mark.slow
@guarantee(Guarantee.UNMARKED_FILES)
def test_a_frozen_job_leaves_no_lock_and_no_dropped_page_for_the_next(make, tmp_path):
    """A job holds locks on an input, the standard library and /dev/null and drops library pages from the page
    cache; frozen: a settled job started next sees none of its locks and every page cached."""
    backend = make()
    given, out = tmp_path / "input.txt", tmp_path / "out"
    given.write_text("data"), out.mkdir()
    mounts = (Mount(given, "/in/input.txt"), Mount(out, "/out", writable=True))
    names = {"input": backend.inside(mounts[0]), "out": backend.inside(mounts[1])}
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    marking = Job((sys.executable, "-c", MARKS.format(**names)), tmp_path / "a", mounts)
    ended = threading.Thread(target=backend.run, args=(marking,))
    ended.start()
    try:
        while ended.is_alive() and not (out / "ready").exists():
            threading.Event().wait(0.05)
        assert (out / "ready").exists(), "the marking job never got ready"
        with marking.freezer.frozen():
            probe = Job((sys.executable, "-c", PROBE.format(**names)), tmp_path / "b", mounts, settled=True)
            probed = backend.run(probe)
    finally:
        (out / "stop").touch()
        ended.join(30)
    assert probed.stdout.decode().split("\n") == ["probed", ""], (probed.stdout, probed.stderr)


KEY_HOLDER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
# add_key("user", description, payload, 1, the process keyring): /proc/keys lists it to every process of its host uid
if libc.syscall(248, b"user", sys.argv[1].encode(), b"x", 1, ctypes.c_int(-2)) < 0:
    sys.exit(f"add_key: {{os.strerror(ctypes.get_errno())}}")
open("{out}/ready", "w").close()
while not os.path.exists("{out}/stop"):
    time.sleep(0.05)
"""


@guarantee(Guarantee.OWN_HOST_UID)
def test_a_job_sees_no_key_of_another_running_job(make, tmp_path):
    """A key a running job holds is listed in /proc/keys to every process of its host uid (the red team: one learner's
    hidden inputs, as a key's description, reached a submission graded at the same time). Under uids of their own,
    another job sees none of its keys."""
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    scratch.mkdir(), out.mkdir()
    backend, marker = make(), f"held-{uuid.uuid4().hex}"
    shared = backend.inside(Mount(out, "/out", writable=True))
    holder = Job(
        (sys.executable, "-c", KEY_HOLDER.format(out=shared), marker), scratch, (Mount(out, "/out", writable=True),)
    )
    held = threading.Thread(target=backend.run, args=(holder,))
    held.start()
    try:
        while held.is_alive() and not (out / "ready").exists():
            threading.Event().wait(0.05)
        assert held.is_alive()
        (tmp_path / "other").mkdir()
        seen = backend.run(Job((sys.executable, "-c", "print(open('/proc/keys').read())"), tmp_path / "other"))
        assert seen.returncode == 0, seen
        assert marker.encode() not in seen.stdout
    finally:
        (out / "stop").touch()
        held.join(30)
