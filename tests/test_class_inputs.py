"""A bad class input gets one line naming the fix, before any slow start; a browser's copy of a file is a resubmission."""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from resumable_core.__main__ import main as cli_main
from resumable_core.course.grading.model import StudentReport, Submission
from resumable_core.course.grading.steps.collect import collect
from resumable_core.course.grading.steps.lms import Names
from resumable_core.course.grading.steps.prepare import prepare, read_notebook
from resumable_core.course.grading.steps.report import explain

REPO = Path(__file__).resolve().parent.parent
RELEASE = REPO / "exercises" / "reconcile" / "reconcile.ipynb"
NB = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def _empty_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("class/", "")
        z.writestr("__MACOSX/._x.ipynb", "debris")
    return path


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda tmp: tmp / "no-such-class", "does not exist; pass the class's folder or zip"),
        (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "holds no submitted file"),
        (lambda tmp: _empty_zip(tmp / "class.zip"), "a zip with no submitted file in it"),
        (lambda tmp: (tmp / "grades.txt").write_text("x") and tmp / "grades.txt", "neither a folder nor a zip"),
    ],
    ids=["missing", "empty-folder", "empty-zip", "not-a-zip"],
)
def test_a_missing_or_empty_class_is_one_line_before_nbgrader_loads(tmp_path, monkeypatch, capsys, make, said):
    """grade exits 2 with one line naming the fix, never importing the pipeline (nbgrader) nor making a folder."""
    path = make(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "resumable_core.course.grading.pipeline", None)  # importing it now fails
    assert cli_main(["grade", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "grading-reconcile").exists()


def test_a_notebook_that_is_not_utf8_is_named_so_in_its_editions_language(tmp_path):
    """A notebook saved as Latin-1 or UTF-16 is "not UTF-8 text", not "not JSON" (a PDF still is); a ko/ edition's
    reason is Korean."""
    text = RELEASE.read_text(encoding="utf-8").replace("Exercise", "Exercíse")
    (tmp_path / "ko").mkdir()
    (tmp_path / "ko" / "reconcile.ipynb").write_bytes(text.encode("latin-1", "replace"))
    for encoding in ("latin-1", "utf-16"):
        (tmp_path / "reconcile.ipynb").write_bytes(text.encode(encoding, "replace"))
        assert read_notebook(tmp_path / "reconcile.ipynb") == (
            None,
            "not graded: reconcile.ipynb is not UTF-8 text: open it in Jupyter and save it again, as UTF-8",
        )
    assert "UTF-8 텍스트가 아닙니다" in str(read_notebook(tmp_path / "ko" / "reconcile.ipynb")[1])
    (tmp_path / "a.ipynb").write_bytes(b"%PDF-1.4\xff")
    assert read_notebook(tmp_path / "a.ipynb")[1] == "a.ipynb is not a notebook: not JSON"


@pytest.mark.parametrize(
    ("other", "said"),
    [
        ("postmortem.ipynb", "postmortem.ipynb is the postmortem assignment's notebook: submit reconcile.ipynb"),
        ("ko/postmortem.ipynb", "postmortem.ipynb은 postmortem 과제의 노트북입니다. reconcile.ipynb를 제출하세요"),
    ],
)
def test_another_assignments_notebook_is_refused_naming_it_and_the_file_to_submit(tmp_path, other, said):
    """A notebook whose cells are another assignment's is refused with both names, in its language, not graded blank."""
    path = tmp_path / "ann" / "postmortem.ipynb"
    path.parent.mkdir()
    shutil.copy(REPO / "exercises" / "postmortem" / other, path)
    sub = Submission("ann", files={"reconcile": path})
    (sub,) = prepare([sub], tmp_path / "work", "reconcile", {"reconcile": nbformat.read(str(RELEASE), as_version=4)})
    assert sub.status == "invalid" and sub.problems == [f"not graded: {said}"], sub.problems


def test_the_steps_give_their_findings_as_values_and_leave_the_submission_handed_in_alone(tmp_path):
    """prepare and explain return the submission as they found it; the one they were given is unchanged."""
    path = tmp_path / "ann" / "reconcile.ipynb"
    path.parent.mkdir()
    path.write_bytes(b"%PDF-1.4 my homework")
    sub = Submission("ann", files={"reconcile": path})
    (checked,) = prepare(
        [sub], tmp_path / "work", "reconcile", {"reconcile": nbformat.read(str(RELEASE), as_version=4)}
    )
    assert (checked.status, sub.status, sub.problems) == ("invalid", "graded", [])
    failed = explain(sub, StudentReport("ann", "w", success=False, error="grading stopped: boom"), tmp_path, "x", 60)
    assert (failed.status, sub.status, sub.problems) == ("failed", "graded", []) and failed.problems


def _files(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(NB)
    return root


def test_a_browsers_copy_suffix_is_read_as_a_resubmission_the_highest_the_latest(tmp_path):
    """`ann (1).ipynb` and `ann(2).ipynb` are ann's, the (2) graded; in a student's folder or an LMS's, likewise."""
    flat = collect(
        _files(tmp_path / "flat", ["ann.ipynb", "ann (1).ipynb", "ann(2).ipynb", "bo (1).ipynb"]), "x", ["x"]
    )
    assert {s.student: (s.status, s.files["x"].name) for s in flat} == {
        "ann": ("graded", "ann(2).ipynb"),
        "bo": ("graded", "bo (1).ipynb"),
    }
    folders = _files(tmp_path / "nb", ["cy/x/x.ipynb", "cy/x/x (3).ipynb", "cy/x/x (1).ipynb", "dee/x/x (1).ipynb"])
    subs = {s.student: s for s in collect(folders, "x", ["x"])}
    assert subs["cy"].files["x"].name == "x (3).ipynb" and subs["dee"].files["x"].name == "x (1).ipynb"
    assert subs["cy"].reason == subs["dee"].reason == ""  # no "renamed notebook": it is the same file, again
    moodle = _files(
        tmp_path / "m",
        ["Ann Smith_234567_assignsubmission_file_/x.ipynb", "Ann Smith_234567_assignsubmission_file_/x (1).ipynb"],
    )
    ((sub,),) = [collect(moodle, "x", ["x"], Names("moodle"))]
    assert sub.files["x"].name == "x (1).ipynb"


def test_a_class_zip_cannot_write_outside_its_unpacked_folder(tmp_path):
    """A zip entry named with '..' or an absolute path unpacks inside the class's folder, never beside it."""
    from resumable_core.course.grading.steps.collect import unpacked

    archive = tmp_path / "in" / "class.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../../escaped.ipynb", NB)
        z.writestr("/abs-escaped.ipynb", NB)
        z.writestr("ann.ipynb", NB)
    with unpacked(archive) as root:
        found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.ipynb"))
        beside = [root.parent / "escaped.ipynb", root.parent.parent / "escaped.ipynb", Path("/abs-escaped.ipynb")]
        assert not any(p.exists() for p in beside)
    assert found == ["abs-escaped.ipynb", "ann.ipynb", "escaped.ipynb"]
