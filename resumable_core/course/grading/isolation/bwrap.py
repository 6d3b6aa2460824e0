"""The bubblewrap backend: every learner process and every checker of a grading run, where bwrap runs.

:meth:`BwrapBackend.run` starts ``bwrap`` with every namespace unshared (no network but its own
loopback, its own PID namespace, ``--die-with-parent``, ``--new-session``), read-only binds of only
what Python needs (``/usr``, ``/lib*``, a few files of ``/etc``, the interpreter's real prefix, the
venv) and of a pristine copy of ``resumable_core`` made once per grading run
(:func:`.views.library_copy`, first on ``PYTHONPATH``), one writable scratch folder (on a
size-capped tmpfs of its own where the grader may mount one, :class:`.disk.Disk`), a private tmpfs
``/tmp`` and ``HOME``, a clean environment (an allowlist), resource limits set in the child before
``exec`` (:class:`.Limits`), a cgroup for the whole sandbox where one can be made
(:class:`.cgroup.Cgroup`: its memory, process and CPU caps; else only ``RLIMIT_AS`` per process and
``RLIMIT_NPROC``, and no CPU cap), a wall clock after which the whole sandbox is killed, caps on
the output it may write to its pipes, and, where the grader is root, a host uid of its own (:func:`_own_uid`).
Why and what it still lets through: ``docs/architecture.md``,
"The sandbox".
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import os
import resource
import shutil
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import shared
from ._names import owned
from ._process import limit_from_exit, processes_of_this_user, start_and_wait
from .backend import Guarantee, IsolationUnavailable, Job, Mount, Outcome
from .cgroup import Cgroup, cgroup_for, cgroup_parents
from .disk import disk_for
from .limits import Limit, Limits
from .sweep import sweep_left_behind

BWRAP = "bwrap"
PRLIMIT = "prlimit"
"""util-linux's ``prlimit``: sets bwrap's file-size cap behind a tracer that must not have it."""
SETPRIV = "setpriv"
"""util-linux's ``setpriv``: bwrap (behind the tracer, which stays the grader's) runs under the sandbox's host uid."""
UIDS = Path("/run/resumable-sandbox-uids")
"""Where grading processes take a host uid of their own for each sandbox: a lock file and a folder per slot."""
FIRST_UID = 0x70000000
"""The first slot's host uid (the slot's number is added): in the band systemd leaves unused, above its containers'
uids (to 0x6FFFFFFF) and shadow's subordinate uids (to 600,100,000 by default), below 2^31 (docs/architecture.md)."""
SLOTS = 4096
"""How many sandboxes may run at once on the machine."""
SCRATCH = "/grading/scratch"
"""Where the writable scratch folder appears inside the sandbox (also the working directory)."""
LIBRARY = "/grading/lib"
"""Where the pristine library copy appears inside the sandbox (first on ``PYTHONPATH``)."""
HOME = "/home/learner"
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "mime.types")
"""The only files of the host's ``/etc`` the sandbox sees (the dynamic linker's cache, the time zone)."""
PASSWD = "learner:x:{uid}:{gid}:learner:" + HOME + ":/bin/false\n"
ALLOWED_ENV = ("LANG", "LC_ALL", "TZ", "NBGRADER_EXECUTION", "RESUMABLE_FAKE_LATENCY")
"""Variables of the caller's environment that reach the sandbox (no key, token or PYTHON* setting)."""

LAUNCH_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The whole environment of the commands in front of the job (the tracer, ``prlimit``, ``bwrap``)."""
ALWAYS = frozenset(
    {
        Guarantee.OWN_NETWORK,
        Guarantee.HOST_HIDDEN,
        Guarantee.READ_ONLY_LIBRARY,
        Guarantee.PRIVATE_TMP,
        Guarantee.NO_SECRETS,
        Guarantee.NOTHING_OUTLIVES,
        Guarantee.MEMORY,
        Guarantee.FILE_SIZE,
        Guarantee.OUTPUT,
        Guarantee.WALL,
    }
)
"""What bwrap holds on any host it runs on; the rest depends on the cgroups and mounts the grader may make."""


def _reachable(path: Path) -> bool:
    """Whether any uid may walk down to ``path`` and read it (bwrap binds it under a uid of its own)."""
    return all(p.stat().st_mode & 0o001 for p in path.parents) and path.stat().st_mode & 0o005 == 0o005


@functools.cache
def _own_uids() -> bool:
    """Whether each sandbox runs under a host uid of its own: the grader is root, mounts, and lets other uids
    make user namespaces (bwrap needs one)."""
    if not shared.available() or not UIDS.parent.is_dir() or not all(map(shutil.which, (SETPRIV, "unshare"))):
        return False
    for knob, refuses in (
        ("kernel/unprivileged_userns_clone", "0"),
        ("kernel/apparmor_restrict_unprivileged_userns", "1"),
    ):
        with contextlib.suppress(OSError):
            if Path("/proc/sys", knob).read_text().strip() == refuses:
                return False
    return True


@contextlib.contextmanager
def _own_uid() -> Iterator[int]:
    """A host uid no other sandbox runs under until this one ends (a slot's lock, held by this process)."""
    UIDS.mkdir(mode=0o711, exist_ok=True)
    for slot in range(SLOTS):
        fd = os.open(UIDS / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            (UIDS / str(slot)).mkdir(mode=0o711, exist_ok=True)
            yield FIRST_UID + slot
        finally:
            os.close(fd)
        return
    raise IsolationUnavailable("bwrap", f"all {SLOTS} host uids of sandboxes are in use")


def _lender(uid: int | None, lent: list[Path]) -> Callable[[Path], Path]:
    """Where bwrap, under ``uid``, finds a host path: the slot's folder and its index in ``lent`` (None: the path)."""
    if uid is None:
        return Path

    def lend(host: Path) -> Path:
        lent.append(host)
        return UIDS / str(uid - FIRST_UID) / str(len(lent) - 1)

    return lend


@functools.cache
def _idmap(uid: int) -> int:
    """A user namespace mapping 0 to ``uid`` (an fd held for the process's life): :func:`.shared.lend` maps through it."""
    helper = subprocess.Popen(["unshare", "--user", "cat"], stdin=subprocess.PIPE, env=LAUNCH_ENV)
    try:
        proc = Path(f"/proc/{helper.pid}")
        while os.readlink(proc / "ns/user") == os.readlink("/proc/self/ns/user"):
            time.sleep(0.001)  # until it has its own namespace
        (proc / "uid_map").write_text(f"0 {uid} 1\n")
        (proc / "setgroups").write_text("deny\n")
        (proc / "gid_map").write_text(f"0 {uid} 1\n")
        return os.open(proc / "ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        helper.kill()
        helper.wait()


def _system_trees() -> list[Path]:
    """The host folders every sandbox sees read-only: ``/usr``, the ``/lib*`` folders, the interpreter's prefixes, ``/etc``."""
    lib = [Path("/", n) for n in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")]
    prefixes = {Path(sys.base_prefix).resolve(), Path(sys.prefix)}
    outside = [p for p in sorted(prefixes) if not str(p).startswith("/usr/")]
    return [Path("/usr"), *(p for p in lib if p.is_dir() and not p.is_symlink()), *outside, Path("/etc")]


def _system_binds(lend: Callable[[Path], Path]) -> list[str]:
    """``/usr``, the ``/lib*``/``/bin`` folders (or their merged-usr symlinks) and the interpreter's prefixes.

    A prefix not every uid may reach (under ``/root``) is bound from where ``lend`` puts it.
    """
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
            args += ["--ro-bind", str(prefix if _reachable(prefix) else lend(prefix)), str(prefix)]
    for name in ETC_FILES:
        if Path("/etc", name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def _installed_libraries() -> list[str]:
    """Every installed ``resumable_core`` in the trees the sandbox sees (the hub's staff venv holds one).

    Each is the whole package, ``course/hidden`` (the answer key, the answer strategies) and all, so an
    empty folder is bound over it: a job sees the library only at :data:`LIBRARY`, the view it is given.
    """
    prefixes = sorted({sys.prefix, sys.base_prefix, "/usr", "/usr/local"})
    return sorted({str(p) for sp in site.getsitepackages(prefixes) if (p := Path(sp, "resumable_core")).is_dir()})


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


@functools.cache
def _probe() -> str | None:
    """None when bubblewrap starts a sandbox here, else why not (one line); asked once per process."""
    if shutil.which(BWRAP) is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    probe = BwrapBackend(limits=Limits(wall=30))
    try:
        with tempfile.TemporaryDirectory(prefix=owned("resumable-sandbox-probe-")) as scratch:
            outcome = probe.run(Job((sys.executable, "-c", "print('ok')"), Path(scratch)))
    except (OSError, IsolationUnavailable) as e:
        return f"bwrap could not start: {e}"
    if outcome.returncode != 0 or outcome.stdout.strip() != b"ok":
        last = (outcome.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        return f"bwrap failed (exit code {outcome.returncode}): {last[:200]}"
    return None


@dataclass(frozen=True)
class BwrapBackend:
    """Jobs in bubblewrap: what they see, the limits they get, the trusted variables set in them."""

    library: Path | None = None
    """The folder holding the pristine ``resumable_core`` (:func:`.views.library_copy`); None for none."""
    limits: Limits = field(default_factory=Limits)
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set inside besides the allowlist (trusted values only: never a secret)."""
    name: str = "bwrap"

    def available(self) -> str | None:
        return _probe()

    def guarantees(self) -> frozenset[Guarantee]:
        controllers = frozenset().union(*cgroup_parents().values())
        more = set()
        if "memory" in controllers:
            more.add(Guarantee.WHOLE_MEMORY)
        if "cpu" in controllers:
            more.add(Guarantee.CPU)
        if "freezer" in controllers:
            more.add(Guarantee.FREEZE)
        if "pids" in controllers or os.geteuid() != 0 or _own_uids():  # root is exempt from RLIMIT_NPROC
            more.add(Guarantee.PROCESSES)
        if os.geteuid() == 0:  # the scratch tmpfs is mounted by the grader, which needs root
            more.add(Guarantee.DISK)
        if shared.available():  # so are the overlays
            more.add(Guarantee.UNMARKED_FILES)
        if _own_uids():
            more.add(Guarantee.OWN_HOST_UID)
        return ALWAYS | more

    def inside(self, mount: Mount) -> str:
        return mount.inside

    def command(
        self, job: Job, scratch: Path, etc: Path, library: Path | None, lend: Callable[[Path], Path] = Path
    ) -> list[str]:
        """The ``bwrap`` command line running ``job`` with ``scratch`` writable at :data:`SCRATCH`.

        ``etc``: an empty folder for the sandbox's own ``/etc/passwd`` and ``/etc/group`` (and, where
        it holds :attr:`Guarantee.UNMARKED_FILES`, its device nodes and copies of its read-only files).
        The job's mounts go after all others. ``lend``: where bwrap finds a host path that is not a system
        tree (:func:`.shared.lend`, where it holds :attr:`Guarantee.OWN_HOST_UID`).
        """
        private = Guarantee.UNMARKED_FILES in self.guarantees()
        if private:  # what :func:`.shared.enter` mounts on
            (etc / "dev").mkdir(exist_ok=True)
        uid, gid = os.getuid(), os.getgid()
        (etc / "passwd").write_text(PASSWD.format(uid=uid, gid=gid))
        (etc / "group").write_text(f"learner:x:{gid}:\n")
        args = [BWRAP, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
        args += ["--uid", str(uid), "--gid", str(gid), "--cap-drop", "ALL", "--hostname", "sandbox"]
        # The private /tmp and HOME first: a later bind may lie under them (a venv in /tmp/x/.venv).
        args += ["--size", str(self.limits.tmp_size), "--tmpfs", "/tmp"]
        args += ["--size", str(self.limits.tmp_size), "--tmpfs", HOME]
        args += _system_binds(lend)
        (etc / "empty").mkdir(exist_ok=True)
        for installed in _installed_libraries():
            args += ["--ro-bind", str(lend(etc / "empty")), installed]
        args += [
            "--ro-bind",
            str(lend(etc / "passwd")),
            "/etc/passwd",
            "--ro-bind",
            str(lend(etc / "group")),
            "/etc/group",
        ]
        args += ["--proc", "/proc", "--dev", "/dev"]
        if private:  # the nodes of the sandbox's own overlay of /dev (:func:`.shared.enter`): their own locks
            for node in shared.DEVICES:
                args += ["--dev-bind-try", str(lend(etc / "dev" / node)), f"/dev/{node}"]
        if library is not None:
            args += ["--ro-bind", str(lend(library)), LIBRARY]
        args += ["--bind", str(lend(scratch)), SCRATCH, "--chdir", SCRATCH]
        for i, mount in enumerate(job.mounts):
            host = mount.host
            if private and not mount.writable and host.is_file():  # an input other jobs see: a copy of its own
                host = Path(shutil.copyfile(host, etc / f"mount-{i}"))
            args += ["--bind" if mount.writable else "--ro-bind", str(lend(host)), mount.inside]
        args += ["--remount-ro", "/"]  # bwrap's root is an uncapped tmpfs in memory: nothing may be written there
        args += ["--clearenv"]
        for k, v in sorted(_environment(self.env).items()):
            args += ["--setenv", k, v]
        return [*args, "--", *job.argv]

    def _argv(
        self, job: Job, limits: Limits, where: tuple[Path, Path, Path | None], uid: int | None, lent: list[Path]
    ) -> list[str]:
        """The whole command: the tracer, ``prlimit``, ``setpriv`` to ``uid`` (None: none), then :meth:`command`
        with ``where`` (the scratch folder, ``etc``, the library); the host paths bwrap finds lent go in ``lent``."""
        cmd = self.command(job, *where, _lender(uid, lent))
        if uid is not None:  # after the tracer and prlimit: only bwrap and the sandbox run under it
            cmd = [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *cmd]
        if job.tracer:  # the tracer's own output is not the learner's file: only bwrap gets the size cap
            size = limits.file_size
            cmd = [*job.tracer, PRLIMIT, f"--fsize={size}:{size}", "--", *cmd]
        return cmd

    def run(self, job: Job) -> Outcome:
        """Run ``job`` in the sandbox until it ends or hits a limit; whatever it started dies with it.

        A writable mount is not under the disk quota (:func:`.disk.capped_folder` makes one that is).
        Afterwards the job's scratch folder holds what the sandbox left there.
        """
        if shutil.which(BWRAP) is None:
            raise IsolationUnavailable(self.name, "bwrap is not installed")
        limits = self.limits if job.wall is None else dataclasses.replace(self.limits, wall=job.wall)
        scratch = Path(job.scratch).resolve()
        library = job.library if job.library is not None else self.library
        started = time.monotonic()
        sweep_left_behind()
        own = _own_uid() if _own_uids() else contextlib.nullcontext(None)
        with tempfile.TemporaryDirectory(prefix=owned("resumable-sandbox-etc-")) as etc, own as uid:
            cgroup = cgroup_for(limits)
            disk = None
            try:
                disk = disk_for(scratch, limits.disk)
                lent: list[Path] = []
                cmd = self._argv(job, limits, (disk.path if disk else scratch, Path(etc), library), uid, lent)
                enforced = cgroup.controllers if cgroup else frozenset()
                # a uid of its own runs no other process
                nproc = limits.processes + (0 if "pids" in enforced or uid is not None else processes_of_this_user())
                trees = shared.trees(_system_trees(), library) if shared.available() else []
                if cgroup is not None and "freezer" in enforced:
                    job.freezer.attach(cgroup.freeze)
                try:
                    # only a settled job's opens wait for the grader: each costs a round trip
                    with (
                        shared.settled(trees, limits.memory, {LIBRARY: library} if library else {})
                        if trees and job.settled
                        else contextlib.nullcontext(-1) as group
                    ):
                        private = (trees, group, Path(etc, "empty"), Path(etc, "dev")) if trees else None
                        loan = (lent, UIDS / str(uid - FIRST_UID), _idmap(uid)) if uid is not None else None
                        setup = functools.partial(
                            _child_setup, limits, nproc, cgroup, private, loan, cap_file_size=not job.tracer
                        )
                        # bwrap (the sandbox's pid 1, whose /proc/1/environ the job can read) and the tracer get
                        # only these variables: --clearenv cleans the job's, not bwrap's own.
                        returncode, stdout, stderr, limit = start_and_wait(
                            cmd, limits, cwd=Path("/"), env=LAUNCH_ENV, preexec=setup
                        )
                finally:
                    job.freezer.attach(None)
                limit = limit or (cgroup.hit() if cgroup else None)
                if cgroup is not None:  # before the copy back: no process of it is left to race it (without a
                    cgroup.kill_and_remove()  # cgroup its PID namespace is dying; the copy skips a swapped-in link)
                if disk is not None:
                    limit = limit or (Limit.DISK if disk.full() else None)
                    if job.keep_scratch:
                        disk.copy_back(scratch)
            finally:
                if cgroup is not None:
                    cgroup.kill_and_remove()
                if disk is not None:
                    disk.remove()
        limit = limit or limit_from_exit(returncode, stderr)
        seconds = time.monotonic() - started
        return Outcome(returncode, stdout, stderr, limits.describe(limit) if limit else None, seconds, limit)


def _child_setup(
    limits: Limits,
    nproc: int,
    cgroup: Cgroup | None,
    private: tuple[list[Path], int, Path, Path] | None,
    loan: tuple[list[Path], Path, int] | None = None,
    *,
    cap_file_size: bool = True,
) -> None:
    """In the child, before ``exec bwrap``: the limits every process of the sandbox inherits.

    ``cap_file_size=False`` when a tracer runs first: its output may outgrow the learner's file cap,
    so ``prlimit`` sets that cap on bwrap instead (:meth:`BwrapBackend.run`).

    ``RLIMIT_NPROC`` (``nproc``) is what caps processes for a grader that is not root and has no
    pids cgroup; root is exempt from it, even inside a user namespace. ``RLIMIT_AS`` stays beside the
    memory cgroup: one allocation over the limit fails at once with a ``MemoryError`` the cell can
    report (the kernel lives on), where the cgroup would let it be mapped and OOM-kill a process
    when its pages are touched; and it is the only memory cap where no memory cgroup can be made.
    """
    if cgroup is not None:
        cgroup.enter()
    if private is not None:  # the shared trees behind overlays of its own (:func:`.shared.enter`)
        shared.enter(*private)
    if loan is not None:  # what bwrap binds, where the sandbox's own host uid reaches it
        shared.lend(*loan)
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if cap_file_size:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
