"""The learner's process of one notebook: its folders on the host, its job on the backend, its result.

It runs the notebook's cells once (:mod:`..inside.learner_server`), saving the executed notebook
nbgrader records, then serves the re-check's checker until it is stopped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..isolation import Backend, Guarantee, Job, Limit, Mount, Outcome, capped_folder, owned
from . import syscalls
from .learner_view import learner_library
from .plan import traced
from .restarter import HAND_SOCKET, RESTART, RESTART_SOCKET, Restarter

RPC = "/grading/rpc"
"""Where the socket folder appears in both sandboxes."""
SHARED = "/grading/shared"
"""The one folder both sandboxes see, at the same path: the copies of handed paths, nothing else."""
IN = "/grading/in"
"""Where each process finds its read-only inputs."""
CONTROL = "/grading/control"
"""Where the learner's process watches for the host's stop mark (read-only: the host's own folder)."""
STOP = "stop"
TRACE = "/grading/trace"
"""Where the checker finds the learner's process's system calls (a tracer outside both sandboxes writes them)."""
SOCKET = "learner.sock"
RESULT = "executed.ipynb"
"""The executed notebook, in the socket folder (the trusted side reads it while the process serves)."""
ENDED = "ended"
"""Made in the control folder when the learner's process has ended (so nothing waits for one that died)."""
WRITABLE = ("rpc", "shared")
"""The folders a learner's process may write: on a capped tmpfs of their own, apart from every file the host writes."""
TRACE_CAP = 256 << 20
"""Bytes of the learner's process's system-call trace (a capped tmpfs of its own, where one can be mounted)."""
FRESH_MARGIN = 10.0
"""Seconds past one cell's timeout a freshly started process may live (the checker waits no longer for its call)."""
STOP_GRACE = 15.0
"""Seconds a learner's process has to end once the host's stop mark appears (it polls for it every 0.02 s)."""
MARGIN = 30.0
"""Seconds past its wall clock that the host waits for a learner's process before it counts it ended."""
RESULT_CAP = 16 << 20
"""Bytes of the executed notebook the host reads back (``SandboxedExecute.result_cap``'s default; ``check`` warns
near it: ``self_check.OUTPUT_CAP``). The learner's process stops at the cell whose outputs pass it
(:func:`..inside.shell.run_notebook`), so the cells before it keep their outputs."""
LEARNER_MODULE = "resumable_core.course.grading.inside.learner_server"
CHECKER_MODULE = "resumable_core.course.grading.inside.checker"


@dataclass
class Layout:
    """One re-run's folders on the host: each process's inputs, the socket folder, the shared folder.

    Each is a :class:`.isolation.Mount`; where a process sees it is the backend's to say. The
    folders the learner's process may write (:data:`WRITABLE`) are on a capped tmpfs of their own,
    the trace on another: filling them can fail only the learner's own calls, never a file the host
    writes (its inputs, the copy back of a scratch folder, the ended mark), which live in ``folder``.
    """

    folder: Path
    """The host's own folder: the inputs, the scratch folders, the ended mark."""
    writable: Path
    """The capped folder holding :data:`WRITABLE`."""
    traces: Path
    """The capped folder the tracer writes in."""
    backend: Backend
    inputs: dict[str, dict[str, Path]] = field(default_factory=lambda: {"learner": {}, "checker": {}})

    def host(self, name: str) -> Path:
        root = self.writable if name in WRITABLE else self.traces if name == "trace" else self.folder
        path = root / name
        path.mkdir(exist_ok=True)
        return path

    def give(self, side: str, name: str, data: str) -> None:
        """Write the input ``name`` that only ``side``'s process sees."""
        path = self.host(f"in-{side}") / name
        path.write_text(data, encoding="utf-8")
        self.inputs[side][name] = path

    def mounts(self, side: str) -> tuple[Mount, ...]:
        """What ``side``'s process sees: its inputs (read-only), the socket and shared folders, the checker the trace."""
        ro = [Mount(p, f"{IN}/{name}") for name, p in self.inputs[side].items()]
        if side == "checker":  # the trace (a tracer writes it from outside) and the host's restart socket
            # (:mod:`.restarter`), read-only, so nobody can swap it: only the checker sees them
            ro += [Mount(self.host("trace"), TRACE), Mount(self.host("restart"), RESTART)]
        ro.append(Mount(self.host("control"), CONTROL))  # the host's marks: stop, ended
        return (*ro, Mount(self.host("rpc"), RPC, writable=True), Mount(self.host("shared"), SHARED, writable=True))

    def path(self, side: str, name: str) -> str:
        """Where ``side``'s process finds the input or folder (rpc, shared) ``name``."""
        if name in self.inputs[side]:
            return self.backend.inside(Mount(self.inputs[side][name], f"{IN}/{name}"))
        return self.backend.inside(Mount(self.host(name), {"rpc": RPC, "shared": SHARED}[name], writable=True))

    def restart_socket(self) -> str:
        """The host's restart socket as the checker sees it."""
        return f"{self.backend.inside(Mount(self.host('restart'), RESTART))}/{RESTART_SOCKET}"

    def trace(self, side: str) -> str:
        """The learner's process's trace file, as ``side`` sees it (the tracer on the host writes it)."""
        if side == "checker":
            return f"{self.backend.inside(Mount(self.host('trace'), TRACE))}/learner.trace"
        return str(self.host("trace") / "learner.trace")


def start(layout: Layout, side: str, job: Job, ended: Path | None = None) -> Callable[..., Outcome | None]:
    """Run ``job`` on the layout's backend, on a thread; returns what waits for its outcome (None: not in time).

    ``ended`` is created when it ends (so the checker stops waiting for a learner's process that died).
    """
    out: list[Outcome] = []

    def target() -> None:
        try:
            out.append(layout.backend.run(job))
        except Exception as e:  # noqa: BLE001 - the host's own failure (a full disk): the process counts as ended
            out.append(Outcome(-1, b"", f"the grader could not run it: {type(e).__name__}: {e}".encode(), None, 0.0))
        finally:
            if ended is not None:
                ended.touch()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def wait(timeout: float | None = None) -> Outcome | None:
        thread.join(timeout)
        if thread.is_alive():
            return None
        return out[0] if out else Outcome(-1, b"", b"", None, 0.0)

    return wait


def _argv_of_learner(
    layout: Layout, timeout: int, wall: float, kill_leftovers: bool, output_cap: int, anthropic: bool
) -> list[str]:
    # -P: the working folder (the learner's) is not first on sys.path: no module of theirs stands in for the kit's
    argv = [sys.executable, "-P", "-m", LEARNER_MODULE, layout.path("learner", "notebook.ipynb")]
    argv += [
        "--out",
        f"{layout.path('learner', 'rpc')}/{RESULT}",
        "--socket",
        f"{layout.path('learner', 'rpc')}/{SOCKET}",
    ]
    argv += ["--timeout", str(int(timeout)), "--wall", str(wall), "--output-cap", str(int(output_cap))]
    argv += ["--stop", f"{layout.backend.inside(Mount(layout.host('control'), CONTROL))}/{STOP}"]
    return argv + (["--kill-leftovers"] if kill_leftovers else []) + (["--anthropic"] if anthropic else [])


@dataclass
class LearnerProcess:
    """The learner's process of one notebook, in its sandbox: it runs the cells once, then serves the re-check.

    :meth:`start` it; :meth:`executed` waits until the cells ran and reads the executed notebook
    back (as data: it is the learner's file); :func:`run` re-checks against it; :meth:`stop` ends it
    and removes its folders.
    """

    layout: Layout
    assignment: str
    wall: float
    wait: Callable[..., Outcome | None]
    stack: contextlib.ExitStack
    restarter: Restarter
    """Where the checker's restarted calls get a freshly started process (:mod:`.restarter`)."""
    deadline: float
    """``time.monotonic()`` past which the host stops waiting for it (its wall clock and :data:`MARGIN`)."""
    traced: bool = False
    """It runs under the tracer: its assignment's checks judge system calls (:func:`.plan.traced`)."""
    result: Outcome | None = None

    @classmethod
    def start(
        cls,
        nb: Any,
        folder: Path | None,
        assignment: str,
        *,
        timeout: int,
        wall: float,
        backend: Backend,
        loopless: bool = False,
        output_cap: int = RESULT_CAP,
        anthropic: bool = False,
    ) -> LearnerProcess:
        """Run the nbformat notebook ``nb`` (with a copy of ``folder``'s files beside it) for at most ``wall`` seconds.

        ``loopless``: on the library view whose loop refuses to run (:func:`..learner_view.learner_library`).
        ``output_cap``: the bytes its executed notebook may hold (it stops at the cell that floods past them).
        ``anthropic``: it imports anthropic's types before the cells (:func:`..inside.learner_server.preload`).
        """
        stack = contextlib.ExitStack()
        own = Path(
            stack.enter_context(
                tempfile.TemporaryDirectory(prefix=owned("resumable-recheck-"), ignore_cleanup_errors=True)
            )
        )
        # Both processes write here (the socket, the result, the copies): a capped tmpfs where one can be mounted.
        writable = stack.enter_context(capped_folder(backend.limits.disk))
        traces = stack.enter_context(capped_folder(TRACE_CAP))
        layout = Layout(own, Path(writable), Path(traces), backend)
        pristine = layout.folder / "submission"  # the host's copy: every process starts from it, none writes it
        if folder is not None:
            # a link stays a link, never the host's file it names (in the sandbox it names the sandbox's)
            ignore = shutil.ignore_patterns(".ipynb_checkpoints", "*.ipynb")
            shutil.copytree(folder, pristine, symlinks=True, ignore=ignore)
        pristine.mkdir(exist_ok=True)
        scratch = shutil.copytree(pristine, layout.folder / "scratch-learner", symlinks=True)
        import nbformat  # here, not at the top: the checker imports this package and never needs it

        layout.give("learner", "notebook.ipynb", nbformat.writes(nb))
        nothing_outlives = Guarantee.NOTHING_OUTLIVES in backend.guarantees()
        argv = _argv_of_learner(layout, timeout, wall, nothing_outlives, output_cap, anthropic)
        tracer = (
            syscalls.tracer_argv(Path(layout.trace("learner")))
            if traced(assignment) and syscalls.available() is None
            else []
        )
        library = learner_library(backend.library, loopless=loopless) if backend.library else None
        # the loaded process's own copy: no inode it can lock or open is one a fresh process sees
        loaded = shutil.copytree(library, own / "library", symlinks=True) if library else None
        notebook = Mount(layout.inputs["learner"]["notebook.ipynb"], f"{IN}/notebook.ipynb")

        def fresh_job(fresh_scratch: Path, hand: Mount) -> Job:
            """A freshly started learner's process: the notebook, a fresh copy of the files, the hand socket; no tracer."""
            shutil.copytree(pristine, fresh_scratch, symlinks=True)
            handed = f"{backend.inside(hand)}/{HAND_SOCKET}"
            fresh = (sys.executable, "-P", "-m", LEARNER_MODULE, backend.inside(notebook), "--serve-handed", handed)
            return Job(
                (*fresh, "--timeout", str(int(timeout))),
                fresh_scratch,
                (notebook, hand),
                wall=float(timeout) + FRESH_MARGIN,
                library=library,
                keep_scratch=False,
            )

        job = Job(
            tuple(argv),
            scratch,
            layout.mounts("learner"),
            wall=wall,
            library=loaded,
            tracer=tuple(tracer),
            keep_scratch=False,  # nothing reads it after: what the learner leaves there never reaches the host's disk
        )
        restarter = Restarter(layout.host("restart"), backend, fresh_job, job)
        stack.callback(restarter.close, 0.0)  # stop() closed it already; this is for the folders' sake
        wait = start(layout, "learner", job, layout.host("control") / ENDED)
        return cls(layout, assignment, wall, wait, stack, restarter, time.monotonic() + wall + MARGIN, bool(tracer))

    def ended(self) -> bool:
        return (self.layout.host("control") / ENDED).exists() or time.monotonic() > self.deadline

    def executed(self, cap: int) -> tuple[Any | None, str | None]:
        """Wait until the cells ran (or the process ended); the executed notebook (None if unusable) and why.

        ``why`` is None when the cells ran to the end and the process is serving; otherwise it says
        what stopped it (a limit of the sandbox, an exit), and the notebook is as far as it got.
        """
        socket_path = self.layout.host("rpc") / SOCKET
        while not socket_path.exists() and not self.ended():
            time.sleep(0.02)
        why = None
        if self.ended():
            self.result = (self.wait() if (self.layout.host("control") / ENDED).exists() else None) or _overdue(
                self.wall
            )
            why = (
                f"the sandbox hit its {self.result.limit} limit"
                if self.result.limit
                else "the learner's process ended before its last cell (os._exit, a crash or a signal)"
            )
        nb, unusable = read_result(self.layout.host("rpc") / RESULT, cap)
        return nb, why or unusable

    def stop(self) -> Outcome:
        """End the process (if it still serves) and remove its folders; its result.

        One that ignores the stop mark for :data:`STOP_GRACE` seconds is left to its wall clock,
        its folders removed when its sandbox ends: the worker goes on at once.
        """
        self.restarter.close(FRESH_MARGIN)  # the checker is done: each fresh process's connection has closed
        with contextlib.suppress(OSError):
            (self.layout.host("control") / STOP).touch()
        result = self.result or self.wait(STOP_GRACE)
        if result is None:
            threading.Thread(target=self._close_when_ended, daemon=True).start()
            return _overdue(self.wall)
        self.stack.close()
        return result

    def _close_when_ended(self) -> None:
        self.wait()
        self.stack.close()


def _overdue(wall: float) -> Outcome:
    """The outcome of a learner's process the host gave up waiting for (its backend never returned)."""
    return Outcome(-1, b"", b"", f"wall clock ({wall:g} s)", wall + MARGIN, Limit.WALL)


def read_result(path: Path, cap: int) -> tuple[Any | None, str | None]:
    """The executed notebook in ``path`` (None if unusable) and why it is not usable.

    Opened without following a link and without blocking: a submission may have made the file a
    symlink to ``/dev/zero`` or a fifo; anything but a regular file under ``cap`` is no result.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None, "the sandbox wrote no result"
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None, "the sandbox's result is not a regular file"
    with os.fdopen(fd, "rb") as f:
        if st.st_size > cap:
            return None, f"the executed notebook is over the output cap ({st.st_size >> 20} MiB > {cap >> 20} MiB)"
        data = f.read(cap + 1)
    import nbformat

    try:
        return nbformat.reads(data.decode("utf-8"), as_version=4), None
    except Exception as e:  # noqa: BLE001 - anything unreadable is just no result
        return None, f"the sandbox's result is not a notebook ({type(e).__name__})"
