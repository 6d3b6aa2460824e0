"""Step 4 across machines (``grade --scheduler``): grading one student is a Dask task, and only bytes cross to it
and back. One result is taken per student, so a task rerun elsewhere merges no rows twice."""

from __future__ import annotations

import contextlib
import io
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import resumable_core

from ..errors import GradingError
from ..isolation import library_copy, make_backend, owned, sweep_left_behind
from ..model import StudentReport
from .workers import LOG_TAIL, WORKER_EXITED, read_report, start_worker
from .workspace import Execution, tree_digest, write_course

SCHEMES = ("tcp://", "tls://", "inproc://")
CONNECT_TIMEOUT = "10s"
"""How long ``grade`` waits for the scheduler before it refuses to start."""
STOP_POLL = 1.0
"""Seconds a task waits on the run's stop event between looks at its grading process."""
_libraries: dict[str, Path] = {}
"""Per worker process: the library copy made for each digest (one per process, not one per task)."""


def scheduler_address(text: str) -> str:
    """``text`` if it is a Dask scheduler address (``tcp://host:port``); else a one-line error naming the form."""
    if not text.startswith(SCHEMES) or not text.split("://", 1)[1]:
        raise GradingError(f"--scheduler {text!r} is not a Dask scheduler address; give tcp://HOST:PORT")
    return text


def library_digest() -> str:
    """A SHA-256 of the installed ``resumable_core``'s sources: a worker grading with another library is refused."""
    return tree_digest(Path(resumable_core.__file__).resolve().parent)


# --- bytes in, bytes out -------------------------------------------------------------------------


def pack(root: Path, names: list[str]) -> bytes:
    """A gzipped tar of ``names`` (files or folders, relative to ``root``; missing ones skipped)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in names:
            if (root / name).exists():
                tar.add(root / name, arcname=name)
    return buffer.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Unpack :func:`pack`'s bytes into ``dest``; tarfile's ``data`` filter refuses links out, absolute and ``..`` paths."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def release_bundle(main: Path, assignment: str) -> bytes:
    """What every task of a run shares: the working course's source, release and gradebook as released."""
    return pack(main, [f"source/{assignment}", f"release/{assignment}", "gradebook.db"])


def submission_bundle(main: Path, student: str) -> bytes:
    """One student's submitted files, as the working course holds them (ids already checked)."""
    return pack(main, [f"submitted/{student}"])


def grade_student_task(
    release: bytes,
    submission: bytes,
    assignment: str,
    student: str,
    timeout: int,
    isolation: str | None,
    digest: str,
    stop: Any,
) -> tuple[str, int, bytes]:
    """On a worker: grade ``student`` in a throwaway course; (that folder, the grading process's exit code, the records
    as bytes). ``stop``: the run's ``distributed.Event``, set when ``grade`` is interrupted, which kills the process."""
    if digest != library_digest():
        raise GradingError(
            f"this worker's resumable_core differs from the instructor's (digest {library_digest()[:12]} vs "
            f"{digest[:12]}); install the same version on every worker"
        )
    why = make_backend(isolation).available() if isolation else None
    if why:
        raise GradingError(f"this worker cannot run the grading sandbox: {why}; install bubblewrap on every worker")
    root = Path(tempfile.mkdtemp(prefix=owned("resumable-grade-")))
    try:
        unpack(release, root)
        unpack(submission, root)
        execution = None if isolation is None else Execution(_library(digest, isolation), isolation)
        write_course(root, timeout, execution)
        proc = start_worker(root, assignment, [student])  # dies with this worker, its sandboxes with it
        try:
            # until it ends, or grade is interrupted (the scheduler answers a waiter as soon as it is set)
            while proc.poll() is None and not stop.wait(STOP_POLL):
                pass
        finally:
            proc.kill()
            proc.wait()
        records = pack(root, ["gradebook.db", f"autograded/{student}", f"reports/{student}.json", "worker.log"])
        return str(root), proc.returncode, records
    finally:
        shutil.rmtree(root, ignore_errors=True)
        sweep_left_behind()  # what a worker killed here before left (its process is gone)


def _library(digest: str, isolation: str) -> Path | None:
    """The sandbox's library copy on this worker, made once per process (``plain`` needs none)."""
    if isolation != "bwrap":
        return None
    if digest not in _libraries or not _libraries[digest].is_dir():
        _libraries[digest] = library_copy(Path(tempfile.mkdtemp(prefix=owned("resumable-lib-"))) / "lib")
    return _libraries[digest]


def unpack_task_result(folder: Path, student: str, remote_root: str, archive: bytes) -> StudentReport | None:
    """Unpack a task's records into ``folder``; its report if it is ``student``'s, now naming ``folder``."""
    unpack(archive, folder)
    log = folder / "worker.log"
    if log.is_file() and log.stat().st_size > LOG_TAIL:
        log.write_bytes(log.read_bytes()[-LOG_TAIL:])
    report = read_report(folder / "reports" / f"{student}.json", student, Path(remote_root))
    if report is not None:
        report.worker = str(folder)
    return report


# --- on the instructor's machine -----------------------------------------------------------------


def connect(address: str) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or a one-line error saying how to start one."""
    try:
        from distributed import Client
    except ImportError as e:  # the class extra is not installed
        raise GradingError(f"--scheduler needs Dask: pip install 'resumable-agents[class]' ({e})") from e
    try:
        return Client(scheduler_address(address), timeout=CONNECT_TIMEOUT)
    except OSError as e:
        raise GradingError(
            f"cannot reach the Dask scheduler at {address} ({e}); start one (`dask scheduler`) or drop --scheduler"
        ) from e


def check_scheduler(address: str | None) -> None:
    """Connect to the scheduler at ``address`` and leave (None: no cluster); a one-line error if it is not there."""
    if address:
        connect(address).close()


def run_on_cluster(
    main: Path,
    assignment: str,
    students: list[str],
    address: str,
    timeout: int,
    progress: Callable[[StudentReport], None],
    execution: Execution | None = None,
) -> dict[str, StudentReport]:
    """Grade ``students`` as tasks on the cluster at ``address``; each one's report, its records in ``main/workers/``."""
    from distributed import Event, as_completed

    results: dict[str, StudentReport] = {}
    if not students:
        return results
    isolation = None if execution is None else execution.isolation
    digest, run = library_digest(), uuid.uuid4().hex[:8]
    client = connect(address)
    stop = Event(f"grade-stop-{run}", client=client)
    try:
        # the release goes in each task itself, not scattered: data scattered to the workers dies with
        # them, and a task rerun after its worker was lost must find everything it needs in itself
        release = release_bundle(main, assignment)
        futures = {
            client.submit(
                grade_student_task,
                release,
                submission_bundle(main, student),
                assignment,
                student,
                timeout,
                isolation,
                digest,
                stop,
                key=f"grade-{assignment}-{student}-{run}",  # two runs of one student are two gradings
            ): student
            for student in students
        }
        for future in as_completed(futures):
            student = futures[future]
            try:
                remote_root, code, archive = future.result()
                folder = main / "workers" / f"task-{student}"
                report = unpack_task_result(folder, student, remote_root, archive)
                # no report (its process was killed, or interrupted): not done, --resume grades them again
                error = None if report else f"{WORKER_EXITED} {code} on the cluster (its log: {folder / 'worker.log'})"
            except Exception as e:  # noqa: BLE001 - whatever the task raised is that student's failure, not the run's
                report, error = None, f"the grading task failed on the cluster: {type(e).__name__}: {e}"
            results[student] = report or StudentReport(student, str(main / "workers"), success=False, error=error or "")
            progress(results[student])
    except BaseException:  # interrupted (Ctrl-C): running tasks kill their grading process; closing drops the rest
        with contextlib.suppress(OSError):  # a scheduler gone: its tasks went with it
            stop.set()
        raise
    finally:
        client.close()
    return results
