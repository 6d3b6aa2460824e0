"""The bubblewrap backend's own parts (course/grading/isolation/bwrap.py, cgroup.py, disk.py): its cgroup
files, its disk quota's copy back, the leftovers of a grader that died. What every backend must hold
is in the conformance suite (tests/test_isolation_conformance.py)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from resumable_core.course.grading.isolation import (
    BwrapBackend,
    IsolationUnavailable,
    Job,
    Limits,
    Mount,
    Outcome,
    cgroup,
    disk,
    library_copy,
    shared,
)
from resumable_core.course.grading.isolation import bwrap as bwrap_backend

REPO = Path(__file__).resolve().parent.parent

# Skipped only where bwrap is not installed: an installed bwrap that cannot run fails the test below.
pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bwrap is not installed (apt-get install bubblewrap)"
)


def test_the_sandbox_runs_here() -> None:
    """An installed bwrap starts the grading sandbox; when it cannot, the reason is the failure."""
    why = BwrapBackend().available()
    if why is not None:
        pytest.fail(f"bwrap is installed but the sandbox cannot run: {why}")


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    return library_copy(tmp_path_factory.mktemp("lib") / "lib")


def _run(library: Path, scratch: Path, code: str, limits: Limits | None = None) -> Outcome:
    box = BwrapBackend(library, limits or Limits(wall=60))
    return box.run(Job((sys.executable, "-c", textwrap.dedent(code)), scratch))


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the scratch quota needs a tmpfs the grader mounts, as root")
def test_only_folders_and_regular_files_come_back_from_scratch(library, tmp_path):
    """A symlink to a host file, a fifo and a symlinked folder left in scratch never reach the grader."""
    code = """
        import os
        os.symlink("/etc/hostname", ".result.ipynb")
        os.symlink("/etc", "etc")
        os.mkfifo("pipe")
        os.makedirs("deep/er")
        open("deep/er/kept.txt", "w").write("kept")
        """
    result = _run(library, tmp_path, code)
    assert result.returncode == 0 and result.limit is None
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["deep", "deep/er", "deep/er/kept.txt"]


@pytest.mark.slow
def test_rw_binds_are_writable_and_ro_binds_read_only(library, tmp_path):
    """An ``rw`` bind takes writes that reach the host; an ``ro`` bind is readable and refuses them."""
    scratch, ro, rw = tmp_path / "scratch", tmp_path / "ro", tmp_path / "rw"
    for folder in (scratch, ro, rw):
        folder.mkdir()
    (ro / "given.txt").write_text("given")
    code = """
        print(open("/grading/in/given.txt").read())
        for path in ("/grading/in/x", "/grading/out/x"):
            try:
                open(path, "w").write("written")
                print("wrote", path)
            except OSError as e:
                print(type(e).__name__, path)
        """
    box = BwrapBackend(library, Limits(wall=60))
    mounts = (Mount(ro, "/grading/in"), Mount(rw, "/grading/out", writable=True))
    result = box.run(Job((sys.executable, "-c", textwrap.dedent(code)), scratch, mounts))
    assert result.stdout.decode().splitlines() == ["given", "OSError /grading/in/x", "wrote /grading/out/x"]
    assert (rw / "x").read_text() == "written" and not (ro / "x").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="a capped folder needs a tmpfs the grader mounts, as root")
def test_a_capped_folder_bound_rw_takes_no_more_than_its_size(library, tmp_path, monkeypatch):
    """Writes into a capped folder bound ``rw`` stop at its size; it goes, mount and all, at the end."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code = """
        try:
            with open("/grading/shared/big", "wb") as f:
                for _ in range(4):
                    f.write(b"x" * (1 << 20))
        except OSError as e:
            print(e.strerror)
        """
    with disk.capped_folder(2 << 20) as shared:
        box = BwrapBackend(library, Limits(wall=60))
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        mounts = (Mount(shared, "/grading/shared", writable=True),)
        result = box.run(Job((sys.executable, "-c", textwrap.dedent(code)), scratch, mounts))
        assert result.stdout.decode().strip() == "No space left on device"
        assert (shared / "big").stat().st_size <= 2 << 20
    assert list((tmp_path / "tmp").iterdir()) == [] and str(tmp_path) not in Path("/proc/self/mounts").read_text()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the scratch quota needs a tmpfs the grader mounts, as root")
def test_what_a_grader_that_died_mid_run_left_is_removed_by_the_next_sandbox(library, tmp_path, monkeypatch):
    """An ended grader's (unreaped) tmpfs, temp folder and cgroup go, the process in it killed; a live one's stay."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])  # left a zombie: its parent never reaped it
    while Path(f"/proc/{ended.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.05)
    dead, alive = f"resumable-sandbox-disk-{ended.pid}-x", f"resumable-sandbox-disk-{os.getpid()}-x"
    for name in (dead, alive):
        (tmp_path / name).mkdir()
        disk._mount_tmpfs(tmp_path / name, 0, "size=1m")
    for name in (f"resumable-recheck-{ended.pid}-x", "resumable-recheck-x"):
        (tmp_path / "tmp" / name / "scratch").mkdir(parents=True)
    cgroups = [parent / f"resumable-sandbox-{ended.pid}-x" for parent in cgroup.cgroup_parents()]
    sandboxed = subprocess.Popen(["sleep", "600"])  # a sandbox's process its grader's death left running
    for folder in cgroups:
        folder.mkdir()
        (folder / "cgroup.procs").write_text(str(sandboxed.pid))
    try:
        assert _run(library, tmp_path / alive, "print('ran')").stdout == b"ran\n"
        assert sandboxed.wait(timeout=30) == -9
        assert not (tmp_path / dead).exists() and [f for f in cgroups if f.exists()] == []
        assert [f.name for f in (tmp_path / "tmp").iterdir()] == ["resumable-recheck-x"]  # no process id: not ours
        assert str(tmp_path / alive) in Path("/proc/self/mounts").read_text()
    finally:
        ended.wait()
        sandboxed.kill()
        disk.umount(tmp_path / alive)
        for folder in cgroups:
            with contextlib.suppress(OSError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    os.kill(int(pid), 9)
                folder.rmdir()


@pytest.mark.skipif(
    os.geteuid() != 0 or not any("freezer" in c for c in cgroup.cgroup_parents().values()),
    reason="needs the cgroup freezer, as root",
)
def test_a_frozen_cgroup_left_behind_is_thawed_then_killed_and_removed(monkeypatch):
    """A grader killed while a fresh process ran leaves the loaded one's cgroup frozen: the next sweep thaws it, so its
    processes die and it goes (unthawed, SIGKILL never took, and every sandbox after it waited seconds in vain)."""
    from resumable_core.course.grading.isolation import sweep

    ended = subprocess.Popen([sys.executable, "-c", "pass"])  # a zombie: the grader that died
    while Path(f"/proc/{ended.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.05)
    # parents of this test's own: the sweep sees no cgroup but the one planted here
    parents = {p / f"resumable-test-{os.getpid()}": c for p, c in cgroup.cgroup_parents().items()}
    folders = {p / f"resumable-sandbox-{ended.pid}-x": c for p, c in parents.items()}
    monkeypatch.setattr(sweep, "cgroup_parents", lambda: parents)
    frozen = subprocess.Popen(["sleep", "600"])
    try:
        for folder in [*parents, *folders]:
            folder.mkdir()
        for folder, controllers in folders.items():
            (folder / "cgroup.procs").write_text(str(frozen.pid))
            if "freezer" in controllers:
                cgroup._freeze(folder, True)
        sweep.sweep_left_behind()
        assert frozen.wait(timeout=30) == -9
        assert [f for f in folders if f.exists()] == []
    finally:
        ended.wait()
        for folder, controllers in folders.items():
            if folder.exists() and "freezer" in controllers:
                cgroup._freeze(folder, False)
        frozen.kill()
        frozen.wait()
        for folder in [*folders, *parents]:
            with contextlib.suppress(OSError):
                folder.rmdir()


def test_cgroup_v2_limits_and_out_of_memory_are_read_from_its_files(tmp_path):
    """In a cgroup v2 folder: memory.max is the memory limit, no swap, pids.max the process cap; an OOM names memory."""
    for name in ("memory.max", "memory.swap.max", "pids.max"):
        (tmp_path / name).write_text("max\n")  # as the kernel makes them in a fresh cgroup
    cgroup._set_limits(tmp_path, frozenset({"memory", "pids"}), Limits(memory=1 << 30, processes=64))
    assert [(tmp_path / n).read_text() for n in ("memory.max", "memory.swap.max", "pids.max")] == [
        str(1 << 30),
        "0",
        "64",
    ]
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 0\noom_kill 0\n")
    assert not cgroup._out_of_memory(tmp_path)  # reclaimed at the limit ("max") is not out of memory
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 40\noom 1\noom_kill 1\n")
    assert cgroup._out_of_memory(tmp_path)


def test_the_cpu_cap_is_a_cfs_quota_on_cgroup_v2_and_v1(tmp_path):
    """Half a CPU is cpu.max "50000 100000" on cgroup v2, cfs_quota_us 50000 per cfs_period_us 100000 on v1."""
    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    for folder, names in ((v2, ["cpu.max"]), (v1, ["cpu.cfs_quota_us", "cpu.cfs_period_us"])):
        folder.mkdir()
        for name in names:
            (folder / name).write_text("max 100000\n" if name == "cpu.max" else "-1\n")
    assert cgroup._set_limits(v2, frozenset({"cpu"}), Limits(cpus=0.5)) == {"cpu"}
    assert (v2 / "cpu.max").read_text() == "50000 100000"
    assert cgroup._set_limits(v1, frozenset({"cpu"}), Limits(cpus=0.5)) == {"cpu"}
    assert [(v1 / n).read_text() for n in ("cpu.cfs_quota_us", "cpu.cfs_period_us")] == ["50000", "100000"]


def test_a_cgroup_limit_that_cannot_be_set_leaves_out_only_its_controller(tmp_path):
    """A CPU quota the kernel refuses drops the cpu controller alone: memory and pids of that folder still hold."""
    for name in ("memory.max", "memory.swap.max", "pids.max"):
        (tmp_path / name).write_text("max\n")
    (tmp_path / "cpu.max").mkdir()  # writing it fails as a refused quota does (an OSError)
    held = cgroup._set_limits(tmp_path, frozenset({"memory", "pids", "cpu"}), Limits(memory=1 << 30, processes=64))
    assert held == {"memory", "pids"} and (tmp_path / "pids.max").read_text() == "64"


def test_without_bwrap_available_says_why(monkeypatch):
    """With no bwrap on PATH, available() gives the reason and run() raises IsolationUnavailable with it."""
    bwrap_backend._probe.cache_clear()
    monkeypatch.setattr(bwrap_backend, "BWRAP", "no-such-bwrap")
    try:
        assert BwrapBackend().available() == "bwrap is not installed (apt-get install bubblewrap)"
        with pytest.raises(IsolationUnavailable, match="install bubblewrap or pass --no-sandbox") as info:
            BwrapBackend().run(Job(("true",), Path(os.getcwd())))
        assert info.value.reason == "bwrap is not installed" and info.value.backend == "bwrap"
    finally:
        bwrap_backend._probe.cache_clear()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the scratch quota needs a tmpfs the grader mounts, as root")
def test_sparse_files_come_back_no_bigger_than_the_disk_cap(library, tmp_path):
    """Forty sparse 64 MiB files take no room in the tmpfs; copied back (holes as bytes) they stop at its size."""
    code = """
        for i in range(40):
            with open(f"sparse{i}", "wb") as f:
                f.seek((64 << 20) - 1)
                f.write(b"x")
        """
    result = _run(library, tmp_path, code, Limits(disk=128 << 20, wall=60))
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    kept = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert 0 < kept <= 128 << 20


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the scratch quota needs a tmpfs the grader mounts, as root")
def test_a_job_that_keeps_no_scratch_leaves_nothing_on_the_host(library, tmp_path):
    """With keep_scratch=False, what a job writes in its scratch folder stays in its tmpfs and goes with it."""
    (tmp_path / "given.txt").write_text("given")
    code = "open('left.txt', 'w').write('x'); print(open('given.txt').read())"
    job = Job((sys.executable, "-c", code), tmp_path, keep_scratch=False)
    result = BwrapBackend(library, Limits(wall=60)).run(job)
    assert result.stdout == b"given\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["given.txt"]


@pytest.mark.slow
@pytest.mark.skipif(not shared.available(), reason="the overlays need CAP_SYS_ADMIN (root)")
def test_only_a_settled_job_finds_what_it_opens_cached(tmp_path):
    """A settled job's opens wait until the file is wholly in the page cache; another job's (an autograde's, a
    checker's) pay nothing: what it opens and does not read stays out of the cache."""
    marked = Path(
        sys.base_prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "pydoc_data", "topics.py"
    )
    pages = -(-marked.stat().st_size // os.sysconf("SC_PAGE_SIZE"))
    cached = []
    for settled in (False, True):
        fd = os.open(marked, os.O_RDONLY)  # on disk (tmp_path may be a tmpfs, whose pages stay)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        job = Job((sys.executable, "-c", f"open({str(marked)!r}).close()"), tmp_path, settled=settled)
        assert BwrapBackend(limits=Limits(wall=60)).run(job).returncode == 0
        cached.append(_cached_pages(marked))
    assert cached == [0, pages]


def _cached_pages(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        got = shared._Stat()
        shared._libc.syscall(shared._CACHESTAT, fd, ctypes.byref(shared._Range(0, 0)), ctypes.byref(got), 0)
        return got.cache
    finally:
        os.close(fd)


@pytest.mark.slow
@pytest.mark.skipif(not shared.available(), reason="the overlays need CAP_SYS_ADMIN (root)")
def test_a_settled_job_whose_opens_cannot_be_settled_fails(tmp_path, monkeypatch):
    """Whatever goes wrong answering a settled job's opens denies them: the job fails, never runs unsettled, and
    the grader does not hang (an open left unanswered waits, bwrap's own exec too, and the grader's Popen on it)."""

    def fails(self: object, fd: int) -> bool:
        raise RuntimeError("a bug in the answering thread")

    monkeypatch.setattr(shared._Settler, "_settled", fails)
    job = Job((sys.executable, "-c", "print('ran')"), tmp_path, wall=3, settled=True)
    with pytest.raises(PermissionError):  # bwrap's exec is the first open refused
        BwrapBackend(limits=Limits(wall=60)).run(job)
