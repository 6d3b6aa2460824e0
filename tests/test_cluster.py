"""Grading across machines (``grade --scheduler``): the task's bytes, its refusals, and the one-line errors.

The run on a real cluster, one worker SIGKILLed mid-run, is ``tests/test_grading.py``'s ``zip_run``
(its grades compared with ``folder_run``'s ``--jobs 2`` rows, which ``tests/test_regrade.py`` compares
with a ``--jobs 1`` run); the cluster is ``tests/dask_cluster.py``.
"""

from __future__ import annotations

import io
import tarfile

import pytest

from resumable_core.__main__ import main as cli_main
from resumable_core.course.grading.errors import GradingError
from resumable_core.course.grading.steps import cluster

distributed = pytest.importorskip("distributed", reason="Dask distributed is in the class extra (make setup)")


def test_a_bad_scheduler_address_is_one_line_naming_the_form():
    """An address that is not tcp://HOST:PORT is refused before anything runs, naming the form."""
    for bad in ("localhost:8786", "tcp://", "http://x:1"):
        with pytest.raises(GradingError, match="give tcp://HOST:PORT"):
            cluster.scheduler_address(bad)
    assert cluster.scheduler_address("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"


@pytest.mark.slow
def test_an_unreachable_scheduler_is_refused_before_the_release(tmp_path, capsys, monkeypatch):
    """grade --scheduler at a port nobody listens on exits 2 with one line saying how to start one; no work folder."""
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", "1s")
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ann.ipynb").write_text("{}")  # an empty class is refused before the scheduler is asked
    args = ["grade", str(tmp_path / "class"), "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "out")]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the Dask scheduler" in err and "dask scheduler" in err
    assert not (tmp_path / "out").exists()


def test_jobs_and_scheduler_do_not_go_together(tmp_path, capsys):
    """--jobs 2 with --scheduler is a one-line error: the cluster's workers set the parallelism."""
    assert cli_main(["grade", str(tmp_path), "--scheduler", "tcp://127.0.0.1:9", "--jobs", "2"]) == 2
    assert "do not go together" in capsys.readouterr().err


def test_bundles_carry_only_the_release_and_one_students_files(tmp_path):
    """The bytes a task gets: source, release and gradebook, and that one student's submission; nothing else."""
    for name in ("source/a/n.ipynb", "release/a/n.ipynb", "gradebook.db", "submitted/s1/a/n.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    (tmp_path / "submitted/s2/a").mkdir(parents=True)
    (tmp_path / "submitted/s2/a/n.ipynb").write_text("another student")
    (tmp_path / "nbgrader_config.py").write_text("the instructor's config")

    def names(data: bytes) -> set[str]:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            return {m.name for m in tar.getmembers() if m.isfile()}

    assert names(cluster.release_bundle(tmp_path, "a")) == {"source/a/n.ipynb", "release/a/n.ipynb", "gradebook.db"}
    assert names(cluster.submission_bundle(tmp_path, "s1")) == {"submitted/s1/a/n.ipynb"}


def test_a_result_that_escapes_its_folder_is_refused(tmp_path):
    """Unpacking a task's bytes refuses a '..' member and puts an absolute one inside (tarfile's data filter)."""

    def one_file(name: str) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        return buffer.getvalue()

    with pytest.raises(tarfile.FilterError):
        cluster.unpack(one_file("../outside.txt"), tmp_path / "dest")
    assert not (tmp_path / "outside.txt").exists()
    cluster.unpack(one_file("/tmp/evil"), tmp_path / "dest")
    assert (tmp_path / "dest" / "tmp" / "evil").is_file()


def test_a_worker_with_another_library_refuses_the_task():
    """A task made with another library's digest fails at once, saying to install the same version everywhere."""
    with pytest.raises(GradingError, match="install the same version on every worker"):
        cluster.grade_student_task(b"", b"", "reconcile", "s", 10, None, "0" * 64, None)


def test_the_library_digest_is_stable_and_changes_with_a_source(tmp_path, monkeypatch):
    """Two digests of one install agree; a changed source file gives another."""
    import resumable_core

    assert cluster.library_digest() == cluster.library_digest()
    fake = tmp_path / "resumable_core"
    fake.mkdir()
    (fake / "__init__.py").write_text("x = 1\n")
    monkeypatch.setattr(resumable_core, "__file__", str(fake / "__init__.py"))
    first = cluster.library_digest()
    (fake / "__init__.py").write_text("x = 2\n")
    assert cluster.library_digest() != first
