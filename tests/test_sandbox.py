"""The bubblewrap sandbox (resumable_core/course/grading/sandbox.py): what a learner's code inside can
reach, and the limits that stop it; and what the grader takes back from it (course/grading/execute.py)."""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from pathlib import Path

import nbformat
import pytest

from resumable_core.course.grading import sandbox as sb

REPO = Path(__file__).resolve().parent.parent

# Skipped only where bwrap is not installed: an installed bwrap that cannot run fails the test below.
pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bwrap is not installed (apt-get install bubblewrap)"
)


def test_the_sandbox_runs_here() -> None:
    """An installed bwrap starts the grading sandbox; when it cannot, the reason is the failure."""
    why = sb.available()
    if why is not None:
        pytest.fail(f"bwrap is installed but the sandbox cannot run: {why}")


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    return sb.library_copy(tmp_path_factory.mktemp("lib") / "lib")


def _run(library: Path, scratch: Path, code: str, limits: sb.Limits | None = None) -> sb.Result:
    box = sb.Sandbox(library, limits or sb.Limits(wall=60))
    return box.run([sys.executable, "-c", textwrap.dedent(code)], scratch)


def _lines(result: sb.Result) -> list[str]:
    return result.stdout.decode().split()


def test_a_port_served_on_localhost_cannot_be_reached(library, tmp_path):
    """A server on the grader's localhost is reachable outside and refused inside: the sandbox has its own loopback."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # the control: it is served
    result = _run(
        library,
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


def test_the_checkout_the_gradebook_solutions_and_home_are_invisible(library, tmp_path):
    """The instructor's checkout, a planted gradebook and solutions folder, and the host's home are not there."""
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "gradebook.db").write_text("grades")
    (course / "solutions" / "answer.py").write_text("ANSWER = 42")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    home = Path.home()
    paths = [REPO / "pyproject.toml", REPO / "solutions", course / "gradebook.db", course / "solutions" / "answer.py"]
    result = _run(
        library,
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
    assert out[len(paths)] == sb.HOME
    on_path_to_python = {p.name for p in Path(sys.base_prefix).resolve().parents if p.parent == home}
    assert (
        set(ast.literal_eval(out[len(paths) + 1])) <= on_path_to_python
    )  # at most the folder leading to the interpreter


def test_the_library_is_the_pristine_copy_and_read_only(library, tmp_path):
    """resumable_core is imported from the copy; writing to it, the venv's site-packages or /usr fails."""
    site = next(p for p in sys.path if p.endswith("site-packages"))
    result = _run(
        library,
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
    assert _lines(result) == [f"{sb.LIBRARY}/resumable_core/__init__.py", "OSError", "OSError", "OSError"]
    assert not Path(site, "evil.pth").exists()


def test_tmp_and_home_are_private_and_thrown_away(library, tmp_path):
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
    assert _lines(_run(library, tmp_path, code)) == ["False", "False"]
    assert _lines(_run(library, tmp_path, code)) == ["False", "False"]
    assert not Path("/tmp", marker).exists()
    assert (tmp_path / marker).read_text() == "kept in scratch"


def test_secrets_and_python_settings_stay_outside(library, tmp_path, monkeypatch):
    """ANTHROPIC_API_KEY, PYTHONOPTIMIZE and anything not on the allowlist never reach the sandbox."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("PYTHONOPTIMIZE", "2")
    monkeypatch.setenv("RESUMABLE_LIVE", "1")
    result = _run(library, tmp_path, "import os, sys; print(sorted(os.environ)); print(sys.flags.optimize)")
    names, optimize = result.stdout.decode().splitlines()
    for name in ("ANTHROPIC_API_KEY", "PYTHONOPTIMIZE", "RESUMABLE_LIVE"):
        assert name not in names
    assert optimize == "0"


def _running_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # the process ended while we looked
            continue
    return found


def test_no_process_outlives_the_sandbox(library, tmp_path):
    """A background process started in its own session, and left running, is gone when the sandbox ends."""
    marker = f"resumable-outlive-{uuid.uuid4().hex}"
    result = _run(
        library,
        tmp_path,
        f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{marker}"], start_new_session=True)
        print("started")
        """,
    )
    assert _lines(result) == ["started"]
    assert _running_with(marker) == []


def _can_make(controller: str) -> bool:
    return any(controller in names for names in sb._cgroup_parents().values())


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


@pytest.mark.skipif(not _can_make("memory"), reason="no memory cgroup can be made here (not root, no delegation)")
def test_memory_spread_over_forked_processes_is_capped_for_the_whole_sandbox(library, tmp_path):
    """Six children of 128 MiB, each far under the per-process cap: no more than 512 MiB is held at once."""
    limits = sb.Limits(memory=512 << 20, wall=120)
    result = _run(library, tmp_path, SPREAD.format(n=6, mib=128), limits)
    survivors, killed = map(int, _lines(result))  # the parent lives on to count them
    assert survivors * 128 < 512 and killed >= 2
    assert result.limit == "memory (512 MiB)"


def test_a_memory_bomb_is_stopped_and_named(library, tmp_path):
    """One allocation past the memory limit fails at once (RLIMIT_AS), and the result names the memory limit."""
    limits = sb.Limits(memory=512 << 20, wall=60)
    result = _run(library, tmp_path, "x = bytearray(1 << 30)", limits)
    assert result.returncode != 0 and b"MemoryError" in result.stderr
    assert result.limit == "memory (512 MiB)"


def test_a_fork_bomb_is_stopped_and_named(library, tmp_path):
    """Forking past the process cap fails, and the result names the process limit."""
    limits = sb.Limits(processes=24, wall=60)
    code = """
        import os, time
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        """
    result = _run(library, tmp_path, code, limits)
    assert result.returncode != 0 and result.limit == "processes (24)"


def test_a_disk_filler_is_stopped_at_the_file_size_limit(library, tmp_path):
    """A file may not grow past the file-size limit; the result names it and the file stops there."""
    limits = sb.Limits(file_size=1 << 20, wall=60)
    result = _run(library, tmp_path, "open('big', 'wb').write(b'x' * (4 << 20))", limits)
    assert result.limit == "file size (1 MiB)"
    assert (tmp_path / "big").stat().st_size <= 1 << 20


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


@pytest.mark.skipif(os.geteuid() != 0, reason="the scratch quota needs a tmpfs the grader mounts, as root")
def test_a_disk_filler_of_small_files_is_stopped_at_the_disk_limit(library, tmp_path):
    """Many small files stop at the disk limit, named; what the folder held before is there and does not count."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "submitted.bin").write_bytes(b"s" * (8 << 20))  # twice the quota, already there
    code = "import os; print(os.path.getsize('submitted.bin'))" + FILLER
    result = _run(library, scratch, code, sb.Limits(disk=4 << 20, wall=120))
    size, (error, written) = _lines(result)[0], _lines(result)[1:]
    assert size == str(8 << 20) and error == "ENOSPC" and 0 < int(written) <= 1024
    assert result.limit == "disk (4 MiB)"
    kept = sorted(p.name for p in scratch.iterdir())
    assert len(kept) == int(written) + 1 and "submitted.bin" in kept  # what it wrote comes back to the host
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch"]  # the mount point beside it went, with its mount
    assert str(tmp_path) not in Path("/proc/self/mounts").read_text()


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
    box = sb.Sandbox(library, sb.Limits(wall=60))
    result = box.run(
        [sys.executable, "-c", textwrap.dedent(code)], scratch, ro=[(ro, "/grading/in")], rw=[(rw, "/grading/out")]
    )
    assert result.stdout.decode().splitlines() == ["given", "OSError /grading/in/x", "wrote /grading/out/x"]
    assert (rw / "x").read_text() == "written" and not (ro / "x").exists()


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
    with sb.capped_folder(2 << 20) as shared:
        box = sb.Sandbox(library, sb.Limits(wall=60))
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        result = box.run([sys.executable, "-c", textwrap.dedent(code)], scratch, rw=[(shared, "/grading/shared")])
        assert result.stdout.decode().strip() == "No space left on device"
        assert (shared / "big").stat().st_size <= 2 << 20
    assert list((tmp_path / "tmp").iterdir()) == [] and str(tmp_path) not in Path("/proc/self/mounts").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="the scratch quota needs a tmpfs the grader mounts, as root")
def test_what_a_grader_that_died_mid_run_left_is_removed_by_the_next_sandbox(library, tmp_path):
    """A mounted scratch tmpfs and an empty cgroup named for an ended process go; a live grader's stay."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead, alive = f"resumable-sandbox-disk-{ended.pid}-x", f"resumable-sandbox-disk-{os.getpid()}-x"
    for name in (dead, alive):
        (tmp_path / name).mkdir()
        sb._mount_tmpfs(tmp_path / name, 0, "size=1m")
    cgroups = [parent / f"resumable-sandbox-{ended.pid}-x" for parent in sb._cgroup_parents()]
    for folder in cgroups:
        folder.mkdir()
    try:
        assert _run(library, tmp_path / alive, "print('ran')").stdout == b"ran\n"
        assert not (tmp_path / dead).exists() and [f for f in cgroups if f.exists()] == []
        assert str(tmp_path / alive) in Path("/proc/self/mounts").read_text()
    finally:
        sb._umount(tmp_path / alive)
        for folder in cgroups:
            with contextlib.suppress(FileNotFoundError):
                folder.rmdir()


def test_cgroup_v2_limits_and_out_of_memory_are_read_from_its_files(tmp_path):
    """In a cgroup v2 folder: memory.max is the memory limit, no swap, pids.max the process cap; an OOM names memory."""
    for name in ("memory.max", "memory.swap.max", "pids.max"):
        (tmp_path / name).write_text("max\n")  # as the kernel makes them in a fresh cgroup
    sb._set_limits(tmp_path, frozenset({"memory", "pids"}), sb.Limits(memory=1 << 30, processes=64))
    assert [(tmp_path / n).read_text() for n in ("memory.max", "memory.swap.max", "pids.max")] == [
        str(1 << 30),
        "0",
        "64",
    ]
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 0\noom_kill 0\n")
    assert not sb._out_of_memory(tmp_path)  # reclaimed at the limit ("max") is not out of memory
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 40\noom 1\noom_kill 1\n")
    assert sb._out_of_memory(tmp_path)


def test_the_cpu_cap_is_a_cfs_quota_on_cgroup_v2_and_v1(tmp_path):
    """Half a CPU is cpu.max "50000 100000" on cgroup v2, cfs_quota_us 50000 per cfs_period_us 100000 on v1."""
    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    for folder, names in ((v2, ["cpu.max"]), (v1, ["cpu.cfs_quota_us", "cpu.cfs_period_us"])):
        folder.mkdir()
        for name in names:
            (folder / name).write_text("max 100000\n" if name == "cpu.max" else "-1\n")
    assert sb._set_limits(v2, frozenset({"cpu"}), sb.Limits(cpus=0.5)) == {"cpu"}
    assert (v2 / "cpu.max").read_text() == "50000 100000"
    assert sb._set_limits(v1, frozenset({"cpu"}), sb.Limits(cpus=0.5)) == {"cpu"}
    assert [(v1 / n).read_text() for n in ("cpu.cfs_quota_us", "cpu.cfs_period_us")] == ["50000", "100000"]


def test_a_cgroup_limit_that_cannot_be_set_leaves_out_only_its_controller(tmp_path):
    """A CPU quota the kernel refuses drops the cpu controller alone: memory and pids of that folder still hold."""
    for name in ("memory.max", "memory.swap.max", "pids.max"):
        (tmp_path / name).write_text("max\n")
    (tmp_path / "cpu.max").mkdir()  # writing it fails as a refused quota does (an OSError)
    held = sb._set_limits(tmp_path, frozenset({"memory", "pids", "cpu"}), sb.Limits(memory=1 << 30, processes=64))
    assert held == {"memory", "pids"} and (tmp_path / "pids.max").read_text() == "64"


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


@pytest.mark.slow
@pytest.mark.skipif(not _can_make("cpu"), reason="no cpu cgroup can be made here (not root, no delegation)")
def test_cpu_burners_get_no_more_than_the_cpu_cap(library, tmp_path):
    """Eight forked spinners for 3 s get half a CPU's worth of time under a cap of half a CPU, whatever the cores."""
    result = _run(library, tmp_path, BURNERS.format(n=8, seconds=3), sb.Limits(cpus=0.5, wall=60))
    share = float(result.stdout)  # CPU seconds of the spinners per second of wall clock
    assert 0.05 < share <= 0.5 * 1.2  # they did spin; a little over the cap: the first period, rounding
    assert result.limit is None  # throttled, not stopped


def test_an_output_flood_is_capped_and_named(library, tmp_path):
    """Writing without end to stdout stops at the output cap: what is kept is exactly the cap."""
    limits = sb.Limits(output=1 << 20, wall=60)
    result = _run(library, tmp_path, "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", limits)
    assert result.limit == "output (1 MiB)" and len(result.stdout) == 1 << 20


def test_the_wall_clock_kills_the_whole_sandbox(library, tmp_path):
    """A command that never ends is killed at the wall clock, and the result names it."""
    result = _run(library, tmp_path, "import time; time.sleep(600)", sb.Limits(wall=2))
    assert result.limit == "wall clock (2 s)"


def test_without_bwrap_available_says_why(monkeypatch):
    """With no bwrap on PATH, available() gives the reason and run() raises SandboxError with it."""
    sb.available.cache_clear()
    monkeypatch.setattr(sb, "BWRAP", "no-such-bwrap")
    try:
        assert sb.available() == "bwrap is not installed (apt-get install bubblewrap)"
        with pytest.raises(sb.SandboxError, match="install bubblewrap or pass --no-sandbox") as info:
            sb.Sandbox(None).run(["true"], Path(os.getcwd()))
        assert info.value.reason == "bwrap is not installed"
    finally:
        sb.available.cache_clear()


# --- what the grader takes back (execute.merge_result) -------------------------------------------


def _sent() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("print('ok')", metadata={"nbgrader": {"grade_id": "a", "grade": True, "points": 1}}),
        nbformat.v4.new_markdown_cell("text"),
        nbformat.v4.new_code_cell("import os; os._exit(1)"),
        nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {"grade_id": "b", "grade": True, "points": 2}}),
    ]
    return nb


def _result(sent: nbformat.NotebookNode, done: int, stopped: str | None = None) -> nbformat.NotebookNode:
    got = nbformat.reads(nbformat.writes(sent), as_version=4)
    for cell in got.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="a warning\n")]
            cell.execution_count = 1
    got.metadata["resumable_sandbox"] = {"done": done, "stopped": stopped}
    return got


def test_partial_results_are_kept_and_the_rest_says_why():
    """Cells before the runner's mark keep their outputs (stderr as stdout); the others get an error naming why."""
    from resumable_core.course.grading.execute import merge_result

    sent = _sent()
    merged = merge_result(sent, _result(sent, done=2, stopped="the kernel died"), None)
    first, _, killer, test = merged.cells
    assert first.outputs == [{"output_type": "stream", "name": "stdout", "text": "a warning\n"}]
    for cell in (killer, test):
        assert [(o.output_type, o.ename, o.evalue) for o in cell.outputs] == [
            ("error", sb.NOT_RUN, "not run: the kernel died")
        ]
    merged = merge_result(_sent(), None, "the sandbox hit its wall clock (60 s) limit")
    assert merged.cells[0].outputs[0].evalue == "not run: the sandbox hit its wall clock (60 s) limit"


def test_a_forged_result_cannot_change_the_cells():
    """A result whose cell source, metadata or count differs from what was sent gives that cell no outputs of its."""
    from resumable_core.course.grading.execute import merge_result

    sent = _sent()
    forged = _result(sent, done=4)
    forged.cells[0].source = "pass"
    forged.cells[3].metadata["nbgrader"]["points"] = 100
    merged = merge_result(sent, forged, None)
    assert merged.cells[0].outputs[0].ename == sb.NOT_RUN and merged.cells[3].outputs[0].ename == sb.NOT_RUN
    assert merged.cells[3].metadata["nbgrader"]["points"] == 2 and merged.cells[0].source == "print('ok')"
    assert merged.cells[2].outputs[0].name == "stdout"  # the unchanged cell between keeps its outputs
    sent = _sent()
    shorter = _result(sent, done=4)
    shorter.cells.pop()
    assert all(c.outputs[0].ename == sb.NOT_RUN for c in merge_result(sent, shorter, None).cells if "outputs" in c)


def test_a_notebook_runs_in_the_sandbox_and_comes_back_as_data(library, tmp_path):
    """The learner's process in the sandbox: stderr comes back as stdout, writes are thrown away, a kill's later cells say why."""
    from resumable_core.course.grading.execute import SandboxedExecute

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("import sys\nprint('careful', file=sys.stderr)"),
        nbformat.v4.new_code_cell("open('left-behind.txt', 'w').write('x')\nprint(open('data.txt').read())"),
        nbformat.v4.new_code_cell("import os\nos._exit(1)"),
        nbformat.v4.new_code_cell("print('never')"),
    ]
    (tmp_path / "data.txt").write_text("the learner's own file")
    execute = SandboxedExecute(timeout=60, library=str(library), sandboxed=True)
    out, _ = execute.preprocess(nb, {"metadata": {"path": str(tmp_path), "name": "learner"}})
    assert [(o.output_type, o.name, o.text) for o in out.cells[0].outputs] == [("stream", "stdout", "careful\n")]
    assert out.cells[1].outputs[0].text == "the learner's own file\n"
    assert not (tmp_path / "left-behind.txt").exists()
    for cell in out.cells[2:]:
        assert cell.outputs[0].ename == sb.NOT_RUN and "the learner's process ended" in cell.outputs[0].evalue


LEFT_RUNNING = """
import os, subprocess, sys, time
from pathlib import Path

def running(marker):
    found = 0
    for p in Path("/proc").iterdir():
        try:
            found += p.name.isdigit() and marker.encode() in (p / "cmdline").read_bytes()
        except OSError:
            pass
    return found
"""


def _kernel_notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(src)) for src in sources]
    return nb


@pytest.mark.slow
def test_processes_a_cell_leaves_running_are_killed_with_the_cell(library, tmp_path):
    """A spinning child, a sleeping child and a double-forked daemon left by a cell are gone when the next cell runs."""
    from resumable_core.course.grading.execute import SandboxedExecute

    marker = f"resumable-leftover-{uuid.uuid4().hex}"
    start = f"""
        spinning = subprocess.Popen([sys.executable, "-c", "while True: pass", "{marker}"])
        sleeping = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{marker}"])
        middle = os.fork()
        if middle == 0:  # the daemon: its parent exits, it lives on in a session of its own
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"])
            os._exit(0)
        os.waitpid(middle, 0)
        for _ in range(500):  # until the daemon has exec'd (its cmdline names the marker)
            if running("{marker}") == 3:
                break
            time.sleep(0.02)
        print(running("{marker}"))
        """
    nb = _kernel_notebook(LEFT_RUNNING, start, f"print(running('{marker}'))")
    execute = SandboxedExecute(timeout=60, library=str(library), sandboxed=True)
    out, _ = execute.preprocess(nb, {"metadata": {"path": str(tmp_path), "name": "learner"}})
    assert [c.outputs[0].text for c in out.cells[1:]] == ["3\n", "0\n"]
    assert _running_with(marker) == []


# --- the wall clock's budget (execute.SandboxedExecute.wall_clock, budget.wall_budget) -----------


def test_added_cells_do_not_stretch_the_wall_clock(tmp_path):
    """A submission with 30 added empty code cells gets the wall clock of the release's code cells, no more."""
    from traitlets.config import Config

    from resumable_core.course.grading.budget import wall_budget
    from resumable_core.course.grading.execute import SandboxedExecute

    release = _kernel_notebook("x = 1", "print(x)", "assert x == 1")
    release.cells.insert(1, nbformat.v4.new_markdown_cell("text"))
    (tmp_path / "release" / "a1").mkdir(parents=True)
    nbformat.write(release, str(tmp_path / "release" / "a1" / "nb.ipynb"))
    submission = nbformat.reads(nbformat.writes(release), as_version=4)
    submission.cells += [nbformat.v4.new_code_cell("") for _ in range(30)]
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    execute = SandboxedExecute(config=config, timeout=10)
    resources = {"nbgrader": {"assignment": "a1", "notebook": "nb"}, "metadata": {"path": str(tmp_path)}}
    assert execute.wall_clock(submission, resources) == execute.wall_clock(release, resources) == wall_budget(3, 10)
    assert wall_budget(3, 10) < wall_budget(33, 10)  # what the submission's own count would have given


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_result_that_is_not_a_regular_file_is_no_result(tmp_path, kind):
    """A result made a link to /dev/zero, a fifo or a folder is refused at once, never read or waited on."""
    from resumable_core.course.grading.recheck import read_result as _read_result

    path = tmp_path / ".result.ipynb"
    {"symlink": lambda: path.symlink_to("/dev/zero"), "fifo": lambda: os.mkfifo(path), "folder": path.mkdir}[kind]()
    result, why = _read_result(path, 1 << 20)
    assert result is None and why in ("the sandbox wrote no result", "the sandbox's result is not a regular file")
