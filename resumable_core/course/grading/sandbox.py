"""The bubblewrap sandbox every learner kernel and every isolated re-check runs in.

:meth:`Sandbox.run` starts ``bwrap`` with every namespace unshared (no network but its own
loopback, its own PID namespace, ``--die-with-parent``, ``--new-session``), read-only binds of only
what Python needs (``/usr``, ``/lib*``, a few files of ``/etc``, the interpreter's real prefix, the
venv) and of a pristine copy of ``resumable_core`` made once per grading run
(:func:`library_copy`, first on ``PYTHONPATH``), one writable scratch folder, a private tmpfs
``/tmp`` and ``HOME``, a clean environment (an allowlist), resource limits set in the child before
``exec`` (:class:`Limits`), a process cap (a pids cgroup where one can be made, else
``RLIMIT_NPROC``), a wall clock after which the whole sandbox is killed, and caps on the output it
may write to its pipes. Why and what it still lets through: ``docs/architecture.md``, "The sandbox".
"""

from __future__ import annotations

import compileall
import contextlib
import functools
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import resumable_core

BWRAP = "bwrap"
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


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use; every limit it hits is named in :attr:`Result.limit`."""

    memory: int = 1 << 30
    """Address space of each process (``RLIMIT_AS``), bytes."""
    processes: int = 128
    """Processes and threads at once (a pids cgroup, else ``RLIMIT_NPROC``)."""
    file_size: int = 64 << 20
    """Largest file it may write (``RLIMIT_FSIZE``), bytes."""
    output: int = 1 << 20
    """Bytes kept of each of stdout and stderr; more kills the sandbox."""
    wall: float = 600.0
    """Seconds before the whole sandbox is killed."""
    tmp_size: int = 256 << 20
    """Size of the private ``/tmp`` and ``HOME`` tmpfs, bytes each."""

    def describe(self, which: str) -> str:
        """The limit named ``which`` with its value: ``"memory (1 GiB)"``."""
        values = {
            "memory": _mib(self.memory),
            "processes": str(self.processes),
            "file size": _mib(self.file_size),
            "output": _mib(self.output),
            "wall clock": f"{self.wall:g} s",
        }
        return f"{which} ({values[which]})"


@dataclass
class Result:
    """How a sandboxed command ended."""

    returncode: int
    stdout: bytes
    stderr: bytes
    limit: str | None
    """The limit it hit, named with its value (``"wall clock (60 s)"``), or None."""
    seconds: float


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


# --- the process cap ---------------------------------------------------------------------------


def _pids_root() -> Path | None:
    """A pids cgroup folder this process may make children in (cgroup v1's ``pids`` hierarchy), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            if os.access(folder, os.W_OK) and (folder / "cgroup.procs").exists():
                return folder
    return None


class _PidsCgroup:
    """A fresh pids cgroup holding the whole sandbox: the process cap, and a kill that misses no one."""

    def __init__(self, root: Path, limit: int) -> None:
        self.path = root / f"resumable-sandbox-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(limit))

    def enter(self) -> None:
        """Called in the child before ``exec``: it and all its descendants are in the cgroup."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def hit(self) -> bool:
        events = (self.path / "pids.events").read_text().split()
        return len(events) == 2 and int(events[1]) > 0

    def kill_and_remove(self) -> None:
        for _ in range(100):
            pids = (self.path / "cgroup.procs").read_text().split()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.02)
        self.path.rmdir()


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

    def command(self, argv: Sequence[str], scratch: Path, etc: Path, ro: Sequence[tuple[Path, str]] = ()) -> list[str]:
        """The ``bwrap`` command line running ``argv`` with ``scratch`` writable at :data:`SCRATCH`.

        ``etc``: an empty folder for the sandbox's own ``/etc/passwd`` and ``/etc/group``.
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
        args += ["--remount-ro", "/"]  # bwrap's root is an uncapped tmpfs in memory: nothing may be written there
        args += ["--clearenv"]
        for k, v in sorted(_environment(self.env).items()):
            args += ["--setenv", k, v]
        return [*args, "--", *argv]

    def run(self, argv: Sequence[str], scratch: Path, ro: Sequence[tuple[Path, str]] = ()) -> Result:
        """Run ``argv`` in the sandbox until it ends or hits a limit; whatever it started dies with it."""
        if shutil.which(BWRAP) is None:
            raise SandboxError("bwrap is not installed")
        scratch = Path(scratch).resolve()
        root = _pids_root()
        cgroup = _PidsCgroup(root, self.limits.processes) if root else None
        etc = tempfile.TemporaryDirectory(prefix="resumable-sandbox-etc-")
        started = time.monotonic()
        try:
            cmd = self.command(argv, scratch, Path(etc.name), ro)
            nproc = self.limits.processes + (0 if cgroup else _processes_of_this_user())
            setup = functools.partial(_child_setup, self.limits, nproc, cgroup)  # the limits: in the child, before exec
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=setup,
            )
            try:
                stdout, stderr, limit = _pump(proc, self.limits, started + self.limits.wall)
            finally:
                _kill(proc)
            if limit is None and cgroup is not None and cgroup.hit():
                limit = "processes"
        finally:
            if cgroup is not None:
                cgroup.kill_and_remove()
            etc.cleanup()
        limit = limit or _limit_from_exit(proc.returncode, stderr)
        return Result(
            proc.returncode, stdout, stderr, self.limits.describe(limit) if limit else None, time.monotonic() - started
        )


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
    return Result(
        proc.returncode, stdout, stderr, limits.describe(limit) if limit else None, time.monotonic() - started
    )


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


def _child_setup(limits: Limits, nproc: int, cgroup: _PidsCgroup | None) -> None:
    """In the child, before ``exec bwrap``: the limits every process of the sandbox inherits.

    ``RLIMIT_NPROC`` (``nproc``) is what caps processes for a grader that is not root and has no
    pids cgroup; root is exempt from it, even inside a user namespace.
    """
    if cgroup is not None:
        cgroup.enter()
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _pump(proc: subprocess.Popen[bytes], limits: Limits, deadline: float) -> tuple[bytes, bytes, str | None]:
    """Read stdout and stderr until both close; stop at the wall clock or when either passes the cap."""
    if proc.stdout is None or proc.stderr is None:
        raise SandboxError("the sandbox's pipes were not opened")
    out = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    limit = None
    with selectors.DefaultSelector() as sel:
        for f in (proc.stdout, proc.stderr):
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                limit = "wall clock"
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
                    limit = "output"
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


def _limit_from_exit(returncode: int, stderr: bytes) -> str | None:
    """The limit a process that ended on its own hit, from how it ended (None if none shows)."""
    tail = stderr[-4000:]
    if returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or b"File too large" in tail:
        return "file size"
    if returncode != 0 and b"MemoryError" in tail:
        return "memory"
    if returncode != 0 and b"Resource temporarily unavailable" in tail:
        return "processes"
    return None
