"""The bubblewrap sandbox every learner kernel and every isolated re-check runs in.

:meth:`Sandbox.run` starts ``bwrap`` with every namespace unshared (no network but its own
loopback, its own PID namespace, ``--die-with-parent``, ``--new-session``), read-only binds of only
what Python needs (``/usr``, ``/lib*``, a few files of ``/etc``, the interpreter's real prefix, the
venv) and of a pristine copy of ``resumable_core`` made once per grading run
(:func:`library_copy`, first on ``PYTHONPATH``), one writable scratch folder (on a size-capped tmpfs
of its own where the grader may mount one, :class:`_Disk`), a private tmpfs ``/tmp`` and ``HOME``, a
clean environment (an allowlist), resource limits set in the child before ``exec`` (:class:`Limits`),
a cgroup for the whole sandbox where one can be made (:class:`_Cgroup`: its memory, process and CPU
caps; else only ``RLIMIT_AS`` per process and ``RLIMIT_NPROC``, and no CPU cap), a wall clock after which the whole
sandbox is killed, and caps on the output it may write to its pipes. Why and what it still lets
through: ``docs/architecture.md``, "The sandbox".
"""

from __future__ import annotations

import compileall
import contextlib
import ctypes
import enum
import functools
import os
import re
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import resumable_core

BWRAP = "bwrap"
PRLIMIT = "prlimit"
"""util-linux's ``prlimit``: sets bwrap's file-size cap behind a tracer that must not have it."""
SCRATCH = "/grading/scratch"
"""Where the writable scratch folder appears inside the sandbox (also the working directory)."""
LIBRARY = "/grading/lib"
"""Where the pristine library copy appears inside the sandbox (first on ``PYTHONPATH``)."""
HOME = "/home/learner"
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "mime.types")
"""The only files of the host's ``/etc`` the sandbox sees (the dynamic linker's cache, the time zone)."""
PASSWD = "learner:x:{uid}:{gid}:learner:" + HOME + ":/bin/false\n"
NOT_RUN = "GradingStopped"
"""The ``ename`` of the error output a cell gets when the sandbox stopped before it ran (or while it ran)."""
ALLOWED_ENV = ("LANG", "LC_ALL", "TZ", "NBGRADER_EXECUTION", "RESUMABLE_FAKE_LATENCY")
"""Variables of the caller's environment that reach the sandbox (no key, token or PYTHON* setting)."""


class SandboxError(Exception):
    """The sandbox cannot be used; ``.reason`` says why and the message names the fix."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the grading sandbox cannot run: {reason}; install bubblewrap or pass --no-sandbox")
        self.reason = reason


def _mib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


class Limit(enum.Enum):
    """A limit a sandbox can hit (:attr:`Result.hit`); its value is the name learners read (``"memory (1 GiB)"``)."""

    MEMORY = "memory"
    PROCESSES = "processes"
    FILE_SIZE = "file size"
    DISK = "disk"
    OUTPUT = "output"
    WALL = "wall clock"


CFS_PERIOD = 100_000
"""Microseconds of the CPU cap's period (the kernel's default): the sandbox gets ``Limits.cpus`` times it per period."""


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use; every limit it hits is named in :attr:`Result.limit` (a CPU cap slows, never stops)."""

    memory: int = 1 << 30
    """Memory of the whole sandbox (a memory cgroup, no swap), and address space of each process (``RLIMIT_AS``), bytes."""
    processes: int = 128
    """Processes and threads at once (a pids cgroup, else ``RLIMIT_NPROC``)."""
    cpus: float = 1.0
    """CPUs' worth of time the whole sandbox may use at once (a cpu cgroup's quota; where none can be made, no cap)."""
    file_size: int = 64 << 20
    """Largest file it may write (``RLIMIT_FSIZE``), bytes."""
    disk: int = 256 << 20
    """What it may add to its scratch folder (a tmpfs of its own, where the grader may mount one), bytes."""
    output: int = 1 << 20
    """Bytes kept of each of stdout and stderr; more kills the sandbox."""
    wall: float = 600.0
    """Seconds before the whole sandbox is killed."""
    tmp_size: int = 256 << 20
    """Size of the private ``/tmp`` and ``HOME`` tmpfs, bytes each."""

    def describe(self, which: Limit) -> str:
        """The limit ``which`` named with its value: ``"memory (1 GiB)"``."""
        values = {
            Limit.MEMORY: _mib(self.memory),
            Limit.PROCESSES: str(self.processes),
            Limit.FILE_SIZE: _mib(self.file_size),
            Limit.DISK: _mib(self.disk),
            Limit.OUTPUT: _mib(self.output),
            Limit.WALL: f"{self.wall:g} s",
        }
        return f"{which.value} ({values[which]})"


@dataclass
class Result:
    """How a sandboxed command ended."""

    returncode: int
    stdout: bytes
    stderr: bytes
    limit: str | None
    """The limit it hit, named with its value (``"wall clock (60 s)"``), or None: the text learners read."""
    seconds: float
    hit: Limit | None = None
    """Which limit it hit (:attr:`limit`'s kind), or None: compare this, never :attr:`limit`'s text."""


@functools.cache
def available() -> str | None:
    """None when bubblewrap runs here, else why not (one line)."""
    if shutil.which(BWRAP) is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    probe = Sandbox(library=None, limits=Limits(wall=30))
    try:
        with tempfile.TemporaryDirectory(prefix="resumable-sandbox-probe-") as scratch:
            result = probe.run([sys.executable, "-c", "print('ok')"], Path(scratch))
    except (OSError, SandboxError) as e:
        return f"bwrap could not start: {e}"
    if result.returncode != 0 or result.stdout.strip() != b"ok":
        last = (result.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        return f"bwrap failed (exit code {result.returncode}): {last[:200]}"
    return None


def library_copy(dest: Path) -> Path:
    """A pristine, compiled copy of the ``resumable_core`` package in ``dest`` (bound read-only); returns ``dest``.

    Made from the package's sources (no ``__pycache__`` of the checkout's is copied), once per
    grading run before the first student: what a submission does to the checkout reaches no one.
    """
    package = Path(resumable_core.__file__).resolve().parent
    target = dest / "resumable_core"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    compileall.compile_dir(str(target), quiet=1)
    return dest  # read-only inside: bound with --ro-bind


# --- the cgroup: processes, memory and CPU of the whole sandbox ----------------------------------

CGROUP_CONTROLLERS = frozenset({"pids", "memory", "cpu"})
"""The cgroup controllers a sandbox's cgroup uses: ``pids``, ``memory`` and ``cpu`` cap its processes, memory and CPU."""


def _cgroup_mounts() -> tuple[dict[str, Path], Path | None]:
    """Where each cgroup v1 controller's hierarchy is mounted, and where the v2 hierarchy is (or None)."""
    v1: dict[str, Path] = {}
    v2 = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup":
            for option in fields[3].split(","):
                v1.setdefault(option, Path(fields[1]))
        elif len(fields) >= 4 and fields[2] == "cgroup2" and v2 is None:
            v2 = Path(fields[1])
    return v1, v2


def _enable_v2(folder: Path) -> set[str]:
    """The controllers of ours a child of v2 ``folder`` gets, enabled in its ``cgroup.subtree_control`` if need be.

    Enabling fails, and the controller is left out, where ``folder`` is not delegated to this user or
    holds processes itself (cgroup v2's "no internal processes" rule; the root cgroup is exempt).
    """
    try:
        available = set((folder / "cgroup.controllers").read_text().split()) & CGROUP_CONTROLLERS
        enabled = set((folder / "cgroup.subtree_control").read_text().split())
    except OSError:
        return set()
    for name in sorted(available - enabled):
        with contextlib.suppress(OSError):
            (folder / "cgroup.subtree_control").write_text(f"+{name}")
            enabled.add(name)
    return available & enabled


def _cgroup_parents() -> dict[Path, frozenset[str]]:
    """Folders this process may make a cgroup in, each with the controllers of ours a child there gets.

    cgroup v1 mounts each controller in its own hierarchy (a folder per controller); v2 has one.
    """
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        v1, v2 = _cgroup_mounts()
    except OSError:
        return {}
    parents: dict[Path, set[str]] = {}
    for line in own:
        _, names, path = line.split(":", 2)
        if names:
            for name in set(names.split(",")) & CGROUP_CONTROLLERS & set(v1):
                parents.setdefault(v1[name] / path.lstrip("/"), set()).add(name)
        elif v2 is not None and (enabled := _enable_v2(v2 / path.lstrip("/"))):
            parents.setdefault(v2 / path.lstrip("/"), set()).update(enabled)
    return {
        folder: frozenset(names)
        for folder, names in parents.items()
        if os.access(folder, os.W_OK) and (folder / "cgroup.procs").exists()
    }


def _counter(path: Path, key: str) -> int:
    """The value of ``key`` in a cgroup file of ``key value`` lines (``pids.events``, ``memory.events``), 0 if absent."""
    for line in path.read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def _out_of_memory(folder: Path) -> bool:
    """Whether the memory cgroup ``folder`` ran out: its OOM (v2) or OOM-kill (v1 and v2) count is not 0."""
    v2 = folder / "memory.events"
    if v2.exists():
        return _counter(v2, "oom") + _counter(v2, "oom_kill") > 0
    return _counter(folder / "memory.oom_control", "oom_kill") > 0


def _set_memory(folder: Path, limits: Limits) -> None:
    if (folder / "memory.max").exists():  # cgroup v2
        (folder / "memory.max").write_text(str(limits.memory))
        if (folder / "memory.swap.max").exists():
            (folder / "memory.swap.max").write_text("0")
    else:  # cgroup v1; memory plus swap no more than memory: no swap
        (folder / "memory.limit_in_bytes").write_text(str(limits.memory))
        if (folder / "memory.memsw.limit_in_bytes").exists():
            (folder / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))


def _set_cpu(folder: Path, limits: Limits) -> None:
    quota = max(1000, round(limits.cpus * CFS_PERIOD))  # the kernel refuses a quota under 1 ms
    if (folder / "cpu.max").exists():  # cgroup v2
        (folder / "cpu.max").write_text(f"{quota} {CFS_PERIOD}")
    else:  # cgroup v1
        (folder / "cpu.cfs_period_us").write_text(str(CFS_PERIOD))
        (folder / "cpu.cfs_quota_us").write_text(str(quota))


def _set_pids(folder: Path, limits: Limits) -> None:
    (folder / "pids.max").write_text(str(limits.processes))


_SETTERS = {"pids": _set_pids, "memory": _set_memory, "cpu": _set_cpu}


def _set_limits(folder: Path, controllers: frozenset[str], limits: Limits) -> frozenset[str]:
    """Write the limits of ``controllers`` into the cgroup ``folder``; the controllers whose limit holds.

    One that cannot be set (v1 refuses a CPU quota over the parent's) is left out alone: on v2, where
    one folder holds every controller, it must not take the memory and process caps with it.
    """
    held = set()
    for name in sorted(controllers & set(_SETTERS)):
        try:
            _SETTERS[name](folder, limits)
        except OSError:
            continue
        held.add(name)
    return frozenset(held)


class _Cgroup:
    """A fresh cgroup holding the whole sandbox: its process, memory and CPU caps, and a kill that misses no one.

    One folder per hierarchy it is made in (cgroup v1 has one per controller, v2 one for all); a
    controller whose limit cannot be set is left out, and so is a hierarchy left with none.
    """

    def __init__(self, parents: Mapping[Path, frozenset[str]], limits: Limits) -> None:
        name = f"{_owned('resumable-sandbox-')}{uuid.uuid4().hex[:12]}"
        self.folders: dict[Path, frozenset[str]] = {}
        for parent, controllers in parents.items():
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            held = _set_limits(folder, controllers, limits)
            if not held:
                folder.rmdir()
                continue
            self.folders[folder] = held
        self.controllers = frozenset().union(*self.folders.values())

    def enter(self) -> None:
        """Called in the child before ``exec``: it and all its descendants are in the cgroup."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def hit(self) -> Limit | None:
        """The limit the kernel counted a hit of: memory (out of memory) or processes; else None."""
        for folder, controllers in self.folders.items():
            if "memory" in controllers and _out_of_memory(folder):
                return Limit.MEMORY
        for folder, controllers in self.folders.items():
            if "pids" in controllers and _counter(folder / "pids.events", "max"):
                return Limit.PROCESSES
        return None

    def kill_and_remove(self) -> None:
        for _ in range(100):
            pids = {pid for folder in self.folders for pid in (folder / "cgroup.procs").read_text().split()}
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.02)
        for folder in self.folders:
            folder.rmdir()
        self.folders = {}


# --- what a grader that died mid-run left -------------------------------------------------------

_LEFT_BEHIND = re.compile(r"resumable-sandbox-(?:disk-|shared-)?(\d+)-")
"""The names of the cgroups and mount points a sandbox makes, with the grader's process id."""


def _owned(prefix: str) -> str:
    """``prefix`` with this process's id: what it leaves behind if it dies mid-run can be found and removed."""
    return f"{prefix}{os.getpid()}-"


def _gone(name: str) -> bool:
    """Whether ``name`` is a cgroup or mount point of ours whose grader process has ended."""
    found = _LEFT_BEHIND.match(name)
    if found is None:
        return False
    try:
        os.kill(int(found.group(1)), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def _sweep_left_behind() -> None:
    """Unmount the tmpfs and remove the (empty) cgroups of graders that died mid-run (a SIGKILL skips ``finally``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            point = Path(line.split()[1])
            if line.startswith("tmpfs ") and _gone(point.name):
                with contextlib.suppress(OSError):
                    _umount(point)
                    point.rmdir()
    for parent in _cgroup_parents():
        with contextlib.suppress(OSError):
            for folder in parent.glob("resumable-sandbox-*"):
                if _gone(folder.name):
                    with contextlib.suppress(OSError):  # not empty: a process of it still runs
                        folder.rmdir()


def _cgroup(limits: Limits) -> _Cgroup | None:
    """The sandbox's cgroup, or None where no controller of ours can be used (not root, no delegation)."""
    parents = _cgroup_parents()
    cgroup = _Cgroup(parents, limits) if parents else None
    return cgroup if cgroup is not None and cgroup.folders else None


# --- the disk quota ------------------------------------------------------------------------------

_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MNT_DETACH = 2, 4, 32, 2
_FULL = 64 << 10
"""Free bytes under which the scratch tmpfs counts as full (the disk limit hit)."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(target: Path, flags: int, options: str) -> None:
    if _libc().mount(b"tmpfs", os.fsencode(target), b"tmpfs", flags, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def _umount(target: Path) -> None:
    if _libc().umount2(os.fsencode(target), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def _copy_file(src: str, dest: Path) -> None:
    """Copy ``src`` if it is a regular file; a symlink, fifo, socket or device (even one swapped in) is skipped."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # a symlink (ELOOP), a fifo with no writer, or gone
        return
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            with open(dest, "wb") as out:
                shutil.copyfileobj(f, out, 1 << 20)
            os.chmod(dest, stat.S_IMODE(mode) & 0o777)


def _copy_regular(src: Path, dest: Path) -> None:
    """The folders and regular files under ``src`` into ``dest``; nothing else, no link followed."""
    todo = [(src, dest)]  # a loop, not recursion: a learner may nest folders thousands deep
    while todo:
        here, there = todo.pop()
        with os.scandir(here) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    (there / entry.name).mkdir(exist_ok=True)
                    todo.append((Path(entry.path), there / entry.name))
                elif entry.is_file(follow_symlinks=False):
                    _copy_file(entry.path, there / entry.name)


def _empty(folder: Path) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


class _Disk:
    """The scratch folder on a tmpfs of its own for one run: what the sandbox writes there is capped.

    The choice: the host's scratch folder, bound as it is, is capped only by the host's disk
    (``RLIMIT_FSIZE`` caps each file, not their number), and a tmpfs made inside the sandbox is gone
    with the result file when the sandbox ends. So the grader (as root: mounting needs it) mounts a
    tmpfs on the host, copies the scratch folder in, remounts it at that size plus ``Limits.disk``
    (plus as many inodes as pages), binds it at :data:`SCRATCH`, and once the sandbox is dead puts its
    folders and regular files back into the scratch folder: never a symlink, fifo or device, so the
    grader reads nothing a learner points it at. Its pages count against the memory cgroup as well.
    """

    def __init__(self, scratch: Path, size: int) -> None:
        # Beside the scratch folder, never inside it (a TMPDIR under it): the copy in would copy itself.
        self.path = Path(tempfile.mkdtemp(prefix=_owned("resumable-sandbox-disk-"), dir=scratch.parent))
        self.mounted = False
        try:
            _mount_tmpfs(self.path, _MS_NOSUID | _MS_NODEV, "mode=0700")
            self.mounted = True
            _copy_regular(scratch, self.path)
            used = os.statvfs(self.path)
            blocks, inodes = used.f_blocks - used.f_bfree, used.f_files - used.f_ffree
            options = f"size={blocks * used.f_frsize + size},nr_inodes={inodes + max(1024, size // 4096)}"
            _mount_tmpfs(self.path, _MS_REMOUNT | _MS_NOSUID | _MS_NODEV, options)
        except OSError:
            self.remove()
            raise

    def full(self) -> bool:
        """Whether the sandbox filled it: less than :data:`_FULL` bytes or no inode left."""
        free = os.statvfs(self.path)
        return free.f_bavail * free.f_frsize < _FULL or free.f_favail == 0

    def copy_back(self, scratch: Path) -> None:
        """Make ``scratch`` hold what the sandbox left (call only when every process of it is dead)."""
        _empty(scratch)
        _copy_regular(self.path, scratch)

    def remove(self) -> None:
        if self.mounted:
            _umount(self.path)
        self.mounted = False
        self.path.rmdir()


@contextlib.contextmanager
def capped_folder(size: int) -> Iterator[Path]:
    """A fresh folder to bind read-write (``rw=``) into sandboxes, on a tmpfs of ``size`` bytes.

    Where the grader may not mount (not root) it is a plain temporary folder, capped only by the
    disk. Removed, with all in it, at the end.
    """
    _sweep_left_behind()
    path = Path(tempfile.mkdtemp(prefix=_owned("resumable-sandbox-shared-")))
    try:
        _mount_tmpfs(path, _MS_NOSUID | _MS_NODEV, f"size={size},nr_inodes={max(1024, size // 4096)},mode=0700")
    except PermissionError:
        mounted = False
    else:
        mounted = True
    try:
        yield path
    finally:
        if mounted:
            _umount(path)  # detached: its files go with it
            path.rmdir()
        else:
            shutil.rmtree(path, ignore_errors=True)


def _disk(scratch: Path, size: int) -> _Disk | None:
    """The scratch folder's own tmpfs, or None where the grader may not mount one (not root): no quota."""
    try:
        return _Disk(scratch, size)
    except PermissionError:
        return None


# --- the command -------------------------------------------------------------------------------


def _system_binds() -> list[str]:
    """``/usr``, the ``/lib*``/``/bin`` folders (or their merged-usr symlinks) and the interpreter's prefixes."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/") / name
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    prefixes = {Path(sys.base_prefix).resolve(), Path(sys.prefix)}
    for prefix in sorted(prefixes):
        if not str(prefix).startswith("/usr/"):
            args += ["--ro-bind", str(prefix), str(prefix)]
    for name in ETC_FILES:
        if Path("/etc", name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def _environment(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in ALLOWED_ENV if k in os.environ}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        HOME=HOME,
        USER="learner",
        TMPDIR="/tmp",
        LANG=env.get("LANG", "C.UTF-8"),
        PYTHONPATH=LIBRARY,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        PYTHONUNBUFFERED="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
        MPLBACKEND="Agg",
        MALLOC_ARENA_MAX="2",  # glibc reserves 64 MiB of address space per thread's arena: a kernel would near 1 GiB
        MPLCONFIGDIR="/tmp/matplotlib",
        IPYTHONDIR="/tmp/ipython",
        JUPYTER_RUNTIME_DIR="/tmp/jupyter-runtime",
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.update(extra)
    return env


@dataclass(frozen=True)
class Sandbox:
    """One kind of sandbox of a grading run: the library copy it sees, its limits, extra variables."""

    library: Path | None
    """The folder holding the pristine ``resumable_core`` (:func:`library_copy`); None for none."""
    limits: Limits = field(default_factory=Limits)
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set inside besides the allowlist (trusted values only: never a secret)."""
    tracer: tuple[str, ...] = ()
    """A command put before ``bwrap``, outside the sandbox (the re-check's system-call tracer, :mod:`.syscalls`)."""

    def command(
        self,
        argv: Sequence[str],
        scratch: Path,
        etc: Path,
        ro: Sequence[tuple[Path, str]] = (),
        rw: Sequence[tuple[Path, str]] = (),
    ) -> list[str]:
        """The ``bwrap`` command line running ``argv`` with ``scratch`` writable at :data:`SCRATCH`.

        ``etc``: an empty folder for the sandbox's own ``/etc/passwd`` and ``/etc/group``. ``ro`` and
        ``rw``: more (host path, path inside) binds, read-only and writable, mounted after all others.
        """
        uid, gid = os.getuid(), os.getgid()
        (etc / "passwd").write_text(PASSWD.format(uid=uid, gid=gid))
        (etc / "group").write_text(f"learner:x:{gid}:\n")
        args = [BWRAP, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
        args += ["--uid", str(uid), "--gid", str(gid), "--cap-drop", "ALL", "--hostname", "sandbox"]
        # The private /tmp and HOME first: a later bind may lie under them (a venv in /tmp/x/.venv).
        args += ["--size", str(self.limits.tmp_size), "--tmpfs", "/tmp"]
        args += ["--size", str(self.limits.tmp_size), "--tmpfs", HOME]
        args += _system_binds()
        args += ["--ro-bind", str(etc / "passwd"), "/etc/passwd", "--ro-bind", str(etc / "group"), "/etc/group"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        if self.library is not None:
            args += ["--ro-bind", str(self.library), LIBRARY]
        args += ["--bind", str(scratch), SCRATCH, "--chdir", SCRATCH]
        for host, inside in ro:
            args += ["--ro-bind", str(host), inside]
        for host, inside in rw:
            args += ["--bind", str(host), inside]
        args += ["--remount-ro", "/"]  # bwrap's root is an uncapped tmpfs in memory: nothing may be written there
        args += ["--clearenv"]
        for k, v in sorted(_environment(self.env).items()):
            args += ["--setenv", k, v]
        return [*args, "--", *argv]

    def run(
        self,
        argv: Sequence[str],
        scratch: Path,
        ro: Sequence[tuple[Path, str]] = (),
        rw: Sequence[tuple[Path, str]] = (),
    ) -> Result:
        """Run ``argv`` in the sandbox until it ends or hits a limit; whatever it started dies with it.

        ``ro``, ``rw``: more binds (:meth:`command`), none inside ``scratch``; an ``rw`` folder is not under
        the disk quota (:func:`capped_folder` makes one that is). Afterwards ``scratch`` holds what the
        sandbox left there.
        """
        if shutil.which(BWRAP) is None:
            raise SandboxError("bwrap is not installed")
        scratch = Path(scratch).resolve()
        started = time.monotonic()
        _sweep_left_behind()
        with tempfile.TemporaryDirectory(prefix="resumable-sandbox-etc-") as etc:
            cgroup = _cgroup(self.limits)
            disk = None
            try:
                disk = _disk(scratch, self.limits.disk)
                cmd = self.command(argv, disk.path if disk else scratch, Path(etc), ro, rw)
                if self.tracer:  # the tracer's own output is not the learner's file: only bwrap gets the size cap
                    size = self.limits.file_size
                    cmd = [*self.tracer, PRLIMIT, f"--fsize={size}:{size}", "--", *cmd]
                returncode, stdout, stderr, limit = self._start_and_wait(cmd, cgroup)
                limit = limit or (cgroup.hit() if cgroup else None)
                if cgroup is not None:  # before the copy back: no process of it is left to race it (without a
                    cgroup.kill_and_remove()  # cgroup its PID namespace is dying; the copy skips a swapped-in link)
                if disk is not None:
                    limit = limit or (Limit.DISK if disk.full() else None)
                    disk.copy_back(scratch)
            finally:
                if cgroup is not None:
                    cgroup.kill_and_remove()
                if disk is not None:
                    disk.remove()
        limit = limit or _limit_from_exit(returncode, stderr)
        seconds = time.monotonic() - started
        return Result(returncode, stdout, stderr, self.limits.describe(limit) if limit else None, seconds, limit)

    def _start_and_wait(self, cmd: list[str], cgroup: _Cgroup | None) -> tuple[int, bytes, bytes, Limit | None]:
        """Run ``cmd`` (bwrap) with the limits set before ``exec``; its exit code, output and the limit it hit."""
        enforced = cgroup.controllers if cgroup else frozenset()
        nproc = self.limits.processes + (0 if "pids" in enforced else _processes_of_this_user())
        setup = functools.partial(_child_setup, self.limits, nproc, cgroup, cap_file_size=not self.tracer)
        deadline = time.monotonic() + self.limits.wall
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=setup,
        )
        try:
            stdout, stderr, limit = _pump(proc, self.limits, deadline)
        finally:
            _kill(proc)
        return proc.returncode, stdout, stderr, limit


def run_plain(argv: Sequence[str], cwd: Path, limits: Limits, env: Mapping[str, str]) -> Result:
    """Run ``argv`` without the sandbox (``grade --no-sandbox``): only the wall clock and output caps hold."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr, limit = _pump(proc, limits, started + limits.wall)
    finally:
        _kill(proc)
    described = limits.describe(limit) if limit else None
    return Result(proc.returncode, stdout, stderr, described, time.monotonic() - started, limit)


def _processes_of_this_user() -> int:
    """How many processes this uid runs now: ``RLIMIT_NPROC`` counts them too when bwrap clones the sandbox."""
    uid = f"Uid:\t{os.getuid()}\t"
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and uid in (entry / "status").read_text():
                count += 1
        except OSError:  # the process ended while we looked
            continue
    return count


def _child_setup(limits: Limits, nproc: int, cgroup: _Cgroup | None, *, cap_file_size: bool = True) -> None:
    """In the child, before ``exec bwrap``: the limits every process of the sandbox inherits.

    ``cap_file_size=False`` when a tracer runs first: its output may outgrow the learner's file cap,
    so ``prlimit`` sets that cap on bwrap instead (:meth:`Sandbox.run`).

    ``RLIMIT_NPROC`` (``nproc``) is what caps processes for a grader that is not root and has no
    pids cgroup; root is exempt from it, even inside a user namespace. ``RLIMIT_AS`` stays beside the
    memory cgroup: one allocation over the limit fails at once with a ``MemoryError`` the cell can
    report (the kernel lives on), where the cgroup would let it be mapped and OOM-kill a process
    when its pages are touched; and it is the only memory cap where no memory cgroup can be made.
    """
    if cgroup is not None:
        cgroup.enter()
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if cap_file_size:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _pump(proc: subprocess.Popen[bytes], limits: Limits, deadline: float) -> tuple[bytes, bytes, Limit | None]:
    """Read stdout and stderr until both close; stop at the wall clock or when either passes the cap."""
    if proc.stdout is None or proc.stderr is None:
        raise SandboxError("the sandbox's pipes were not opened")
    out = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    limit: Limit | None = None
    with selectors.DefaultSelector() as sel:
        for f in (proc.stdout, proc.stderr):
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                limit = Limit.WALL
                break
            for key, _ in sel.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = out[key.fd]
                kept = chunk[: max(0, limits.output - len(buf))]
                buf += kept
                if len(kept) < len(chunk):
                    limit = Limit.OUTPUT
            if limit:
                break
    return bytes(out[proc.stdout.fileno()]), bytes(out[proc.stderr.fileno()]), limit


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL bwrap's whole session: its PID namespace's init dies, and the kernel kills the rest."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def _limit_from_exit(returncode: int, stderr: bytes) -> Limit | None:
    """The limit a process that ended on its own hit, from how it ended (None if none shows)."""
    tail = stderr[-4000:]
    if returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or b"File too large" in tail:
        return Limit.FILE_SIZE
    if returncode != 0 and b"MemoryError" in tail:
        return Limit.MEMORY
    if returncode != 0 and b"Resource temporarily unavailable" in tail:
        return Limit.PROCESSES
    return None
