"""The sample classes of the real ``reconcile`` assignment, each graded once per pytest session.

Several test files read the same graded class: the first to ask grades it, under a file lock the others (other
xdist workers included) wait on, and every later one reads that run. A run is read-only: a test that changes
one copies it first.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from dask_cluster import Cluster

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
TIMEOUT = 30
"""Seconds per cell, for every class the tests grade: a fresh kernel imports anthropic in ~10 s on a loaded 2-core
box. A looping cell waits this long."""
ZIP_STUDENTS = ("correct", "rerun_everything", "monkeypatch", "os_exit")
"""One of each way a graded notebook ends: full marks, failed checks, zeroed by the isolated re-check,
a dead kernel (graded before the next student in the same worker); ``not_a_notebook`` and ``empty``
come too. The other samples differ only in what their notebook holds, which no layout, --jobs or cluster changes."""
KILLED = "killed.json"
"""In ``zip_run``'s folder: what became of the Dask worker SIGKILLed mid-run (``dask_cluster.kill_while_grading``)."""

Run = tuple[dict[str, float], Path, dict[str, dict[str, str]]]
"""A graded class: every student's expected score, grade's ``--out`` folder, and grades.csv's rows by student."""


def rows(path: Path) -> dict[str, dict[str, str]]:
    """A grades.csv's rows by student."""
    with open(path, newline="") as f:
        return {r["student_id"]: r for r in csv.DictReader(f)}


def once(base: Path, name: str, grade: Callable[[Path], None]) -> Path:
    """The folder in which ``grade(folder)`` ran once this session: the first caller runs it, the others wait and read.

    ``base``: the caller's basetemp. Under xdist each worker's is a folder of the session's, which they all share.
    """
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "graded-classes"
    root.mkdir(exist_ok=True)
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when a killed worker's process ends
        if not (root / f"{name}.done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a caller that failed midway left
            folder.mkdir()
            grade(folder)
            (root / f"{name}.done").touch()
    return folder


def _graded(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    layout: str,
    students: tuple[str, ...] | None,
    how: Callable[[Path, list[str]], int],
) -> Run:
    """The class graded once this session by ``how(root, grade's arguments)``, which returns grade's exit code."""
    import grading_samples as samples  # here: it reads the course's reconcile, which the core suite may lack

    from resumable_core.course.grading.isolation import BwrapBackend

    def grade(root: Path) -> None:
        path = root / ("class.zip" if layout == "zip" else "class")
        expected = samples.write_class(SOURCE, path, layout=layout, students=students)
        if layout == "submitted":  # the Korean class, in the same run: one run's fixed cost, not two
            expected |= samples.write_korean_class(path / "submitted")
        (root / "expected.json").write_text(json.dumps(expected))
        sandbox = [] if BwrapBackend().available() is None else ["--no-sandbox"]  # the scores hold either way
        args = ["grade", str(path), "--assignment", "reconcile", "--out", str(root / "out")]
        if how(root, [*args, "--timeout", str(TIMEOUT), *sandbox]) != 0:
            raise RuntimeError(f"grade of the {layout} class exited non-zero")

    root = once(tmp_path_factory.getbasetemp(), name, grade)
    return json.loads((root / "expected.json").read_text()), root / "out", rows(root / "out" / "grades.csv")


def folder_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Every sample, and the Korean class (``grading_samples.BOTH_FETCHED``), as a ``submitted/`` folder, graded with
    ``--jobs 2``."""
    from resumable_core.__main__ import main as cli_main

    return _graded(
        tmp_path_factory, "reconcile-submitted", "submitted", None, lambda _, a: cli_main([*a, "--jobs", "2"])
    )


def zip_run(tmp_path_factory: pytest.TempPathFactory, cluster: Callable[[], Cluster]) -> Run:
    """The ``ZIP_STUDENTS`` as a zip of flat ``<student>.ipynb`` files, graded on the Dask cluster ``cluster()`` (asked
    for only by the caller that grades) while its worker w1 is SIGKILLed mid-student: ``KILLED`` says what became of it.

    One run for two proofs: a zip graded anywhere scores as the same students in a folder do (``folder_run``), and a
    run that loses a worker still grades every student as that run does."""
    from dask_cluster import kill_while_grading, left_in

    from resumable_core.__main__ import main as cli_main

    def on_cluster(root: Path, args: list[str]) -> int:
        dask = cluster()
        killed: list[str] = []
        left: list[set] = []
        watcher = threading.Thread(target=kill_while_grading, args=(dask, "w1", killed, left))
        watcher.start()
        code = cli_main([*args, "--scheduler", dask.address])
        watcher.join()
        facts = {"killed": killed, "left": [sorted(s) for s in left], "left_in_tmp": left_in(dask.tmp)}
        (root / KILLED).write_text(json.dumps(facts))
        return code

    return _graded(tmp_path_factory, "reconcile-zip-dask", "zip", ZIP_STUDENTS, on_cluster)


def killed(run: Run) -> dict[str, list]:
    """What became of ``zip_run``'s killed worker: the tasks it ran, its processes alive 10 s after, what its tasks left."""
    return json.loads((run[1].parent / KILLED).read_text())
