"""Shared fixtures: a fresh run folder per test, and the scripted Claude with its request log."""

from __future__ import annotations

import signal
from collections import defaultdict

import pytest

import resumable_core as rc
from resumable_core._scripted import ScriptedClaude

SPLIT_ACROSS_WORKERS = (
    "tests/test_no_answers.py",
    "tests/test_journal_exercise.py",
    "tests/test_recheck.py",
    "tests/test_recheck_attacks.py",
)
"""Long files whose module fixtures cost a second (a library copy): each test may go to any worker."""
HALVED = {"tests/test_grading.py": "dask"}
"""Files whose tests naming a word are a unit apart from the others: the halves cost alike, so two workers share them
(the graded classes both read come from ``graded_classes``, once per session)."""
LONGEST_FIRST = (
    "tests/test_grading.py",
    *SPLIT_ACROSS_WORKERS,
    "tests/test_self_study_kit.py",
    "tests/test_report_exercise.py",
    "tests/test_attacks.py",
    "tests/test_lessons.py",
    "tests/test_checks.py",
    "tests/test_term.py",
    "tests/test_regrade.py",
    "tests/test_student_kit.py",
)
"""The files that take longest (measured one file at a time, a graded class of ``graded_classes`` counted only in
test_grading.py, which asks for both first), handed out first so that no worker is left alone with one at the end;
the others follow in xdist's order (most tests first). A stale order costs time, never a result. The other readers
of a graded class (test_grading_reasons.py, test_korean_grading.py, test_postgres_gradebook.py) come late: they would
wait on its grading."""


def xdist_scope(nodeid: str) -> str:
    """The unit `-n 2 --dist loadfile` hands a worker: a test's file (its module fixtures are paid once), the test
    itself in a file of ``SPLIT_ACROSS_WORKERS``, or a half of a file of ``HALVED``."""
    file, _, test = nodeid.partition("::")
    if file in SPLIT_ACROSS_WORKERS:
        return nodeid
    word = HALVED.get(file)
    return f"{file}::{word}" if word and word in test else file


def xdist_rank(scope: str) -> int:
    """Where a unit goes in the queue: its file's place in ``LONGEST_FIRST``, the others after them."""
    file = scope.split("::", 1)[0]
    return LONGEST_FIRST.index(file) if file in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.hookimpl(optionalhook=True)  # the core suite on 3.12/3.13 runs without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``, scoped by ``xdist_scope`` and ordered by ``xdist_rank``: the controller groups node ids
    itself. (Groups a worker writes into node ids, as ``--dist loadgroup`` does, are lost under pytest 9.2:
    pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByScope(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            first = min(self.workqueue, key=xdist_rank)  # the first of the lowest rank: xdist's order among equals
            self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return ByScope(config, log)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """With ``--durations``, the ten files that took longest, their tests' phases summed: the figures
    CONTRIBUTING.md gives, and the order ``LONGEST_FIRST`` should follow."""
    if not config.getoption("durations"):
        return
    seconds: dict[str, float] = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                seconds[report.nodeid.split("::", 1)[0]] += report.duration
    terminalreporter.write_sep("=", "slowest 10 files")
    for file, total in sorted(seconds.items(), key=lambda item: -item[1])[:10]:
        terminalreporter.write_line(f"{total:8.1f}s {file}")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Every test runs offline against the scripted Claude, in English, whatever the caller's environment.

    English by the locale's lowest setting (LANGUAGE), so a notebook in a `ko/` folder still speaks
    Korean, and a test that wants Korean sets RESUMABLE_LANG.
    """
    monkeypatch.delenv("RESUMABLE_LIVE", raising=False)
    monkeypatch.delenv("RESUMABLE_MODEL", raising=False)
    monkeypatch.delenv("RESUMABLE_LANG", raising=False)
    monkeypatch.setenv("LANGUAGE", "en")


@pytest.fixture
def run_folder(tmp_path):
    """A fresh world, toolbox and checkpoint path."""
    return rc.RunFolder.create(tmp_path)


@pytest.fixture
def scripted():
    """A scripted Claude whose ``requests`` list records every request it got."""
    return ScriptedClaude()


@pytest.fixture
def client(scripted):
    """A real anthropic client with the scripted Claude behind its transport."""
    return rc.make_client(scripted=scripted)


@pytest.fixture(scope="session")
def folder_run(tmp_path_factory):
    """Every sample of ``grading_samples`` as a ``submitted/`` folder, graded once per session (read-only)."""
    import graded_classes

    return graded_classes.folder_run(tmp_path_factory)


@pytest.fixture(scope="session")
def zip_run(tmp_path_factory, request):
    """One sample of each way a notebook ends, as a zip, graded once per session on the Dask cluster (read-only)."""
    import graded_classes

    return graded_classes.zip_run(tmp_path_factory, lambda: request.getfixturevalue("dask"))


@pytest.fixture(scope="session")
def dask(tmp_path_factory):
    """A real Dask cluster (``tests/dask_cluster.py``), started once per session by the first test that needs it."""
    pytest.importorskip("distributed", reason="Dask distributed is in the class extra (make setup)")
    from dask_cluster import running_cluster

    with running_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches what the tests start, as a terminal's would, however the suite itself was started.

    A shell without job control (``cmd &`` in a script, ``nohup``) starts the suite with SIGINT ignored, and an
    ignored signal stays ignored across exec: `grade` would then never see the tests' Ctrl-C.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
