"""An LMS's download: Canvas's, Moodle's and Gradescope's file names, a roster to course ids, and the grade import files."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from resumable_core.__main__ import main as cli_main
from resumable_core.course.grading import reasons
from resumable_core.course.grading.errors import GradingError
from resumable_core.course.grading.i18n import GRADING
from resumable_core.course.grading.model import Submission
from resumable_core.course.grading.steps.collect import collect
from resumable_core.course.grading.steps.lms import Names, Roster, write_imports

NB = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def _files(root: Path, names: list[str], data: bytes = NB) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def _roster(path: Path, rows: list[tuple[str, str]], header: str = "lms_id,student_id") -> Path:
    path.write_text(header + "\n" + "".join(f"{a},{b}\n" for a, b in rows))
    return path


def _by_id(subs):
    return {s.student: s for s in subs}


def test_canvas_names_give_the_user_id_late_and_resubmitted_ones_too(tmp_path):
    """Canvas's name_userid_submissionid_file: the user id is the student id; 'late_' and '-1' change nothing."""
    root = _files(
        tmp_path,
        [
            "doejohn_12345_6789012_reconcile.ipynb",
            "smithann_late_23456_6789013_reconcile-1.ipynb",
            "leekim_34567_6789014_my homework.pdf",
        ],
    )
    subs = _by_id(collect(root, "reconcile", ["reconcile"], Names("canvas")))
    assert set(subs) == {"12345", "23456", "34567"}
    assert subs["12345"].files["reconcile"].name == "doejohn_12345_6789012_reconcile.ipynb"
    assert subs["23456"].lms_id == "23456" and subs["23456"].lms_name == "smithann" and subs["23456"].to_grade
    assert subs["34567"].status == "invalid" and ".pdf file, no .ipynb" in subs["34567"].reason


def test_a_canvas_roster_maps_ids_and_refuses_an_unmapped_file_by_name(tmp_path):
    """With a roster the course id is used; a file whose user id is missing is refused, naming the file and the fix."""
    root = _files(tmp_path / "class", ["doejohn_12345_6789012_reconcile.ipynb", "ghost_99999_6789019_reconcile.ipynb"])
    roster = Roster.read(_roster(tmp_path / "roster.csv", [("12345", "jdoe")]))
    subs = _by_id(collect(root, "reconcile", ["reconcile"], Names("canvas", roster)))
    assert subs["jdoe"].to_grade and subs["jdoe"].lms_id == "12345"
    (refused,) = [s for s in subs.values() if s.student != "jdoe"]
    assert refused.status == "invalid"
    assert "ghost_99999_6789019_reconcile.ipynb" in refused.reason and "not in the roster" in refused.reason
    assert "--roster" in refused.reason


def test_a_name_that_is_not_the_lms_form_is_refused_with_the_form(tmp_path):
    """A file renamed by hand in a Canvas download is refused, saying the form Canvas uses; the others are graded."""
    root = _files(tmp_path, ["doejohn_12345_6789012_reconcile.ipynb", "reconcile (final).ipynb"])
    subs = collect(root, "reconcile", ["reconcile"], Names("canvas"))
    bad = [s for s in subs if s.status == "invalid"]
    assert len(bad) == 1 and "not a Canvas download name (name_userid_submissionid_file.ipynb)" in bad[0].reason
    assert [s.student for s in subs if s.to_grade] == ["12345"]


def test_moodle_folders_and_flat_prefixes_give_the_participant_id(tmp_path):
    """Moodle's 'Full Name_123456_assignsubmission_file_' folder or prefix: the participant id; the name is kept."""
    root = _files(
        tmp_path,
        [
            "José Núñez_123456_assignsubmission_file_/reconcile.ipynb",
            "Ann Smith_234567_assignsubmission_file_reconcile.ipynb",
        ],
    )
    subs = _by_id(collect(root, "reconcile", ["reconcile"], Names("moodle")))
    assert set(subs) == {"123456", "234567"}
    assert subs["123456"].lms_name == "José Núñez" and subs["123456"].to_grade


def test_gradescope_folders_take_the_sid_from_the_metadata(tmp_path):
    """Gradescope's submission_<id>/ folders: the SID of the one submitter submission_metadata.yml names."""
    root = _files(tmp_path, ["submission_111/reconcile.ipynb", "submission_222/reconcile.ipynb"])
    (root / "submission_metadata.yml").write_text(
        "submission_111:\n  :submitters:\n  - :name: Ann Smith\n    :sid: s1001\n"
        "submission_222:\n  :submitters:\n  - :name: Bo Kim\n    :sid: s1002\n"
    )
    subs = _by_id(collect(root, "reconcile", ["reconcile"], Names("gradescope")))
    assert set(subs) == {"s1001", "s1002"} and subs["s1002"].lms_name == "Bo Kim"


def test_gradescope_without_its_metadata_says_to_unzip_the_whole_export(tmp_path):
    """A Gradescope folder with no submission_metadata.yml is a one-line error naming the file."""
    root = _files(tmp_path, ["submission_111/reconcile.ipynb"])
    with pytest.raises(GradingError, match=r"no submission_metadata\.yml"):
        collect(root, "reconcile", ["reconcile"], Names("gradescope"))


@pytest.mark.parametrize(
    ("rows", "header", "says"),
    [
        ([("1", "a")], "id,name", "needs the columns lms_id, student_id"),
        ([("1", "a"), ("1", "b")], "lms_id,student_id", "line 3: lms_id '1' is empty or given twice"),
        ([("1", "a"), ("2", "A")], "lms_id,student_id", "line 3: student_id 'A' is also lms_id '1'"),
        ([("1", "../x")], "lms_id,student_id", "line 2: student_id '../x'"),
    ],
)
def test_a_bad_roster_is_one_line_naming_the_row(tmp_path, rows, header, says):
    """A roster without the columns, with a repeated LMS id, two ids for one student or an unsafe id says which row."""
    with pytest.raises(GradingError, match=says.replace("(", r"\(").replace(".", r"\.")):
        Roster.read(_roster(tmp_path / "r.csv", rows, header))


def test_a_roster_without_an_lms_and_an_unknown_lms_are_refused(tmp_path, capsys):
    """--roster alone, and --lms of an LMS the kit does not read, are one-line errors before any work."""
    with pytest.raises(GradingError, match="with --lms canvas"):
        Names.of(None, tmp_path / "r.csv")
    assert cli_main(["grade", str(tmp_path), "--roster", str(tmp_path / "r.csv")]) == 2
    assert "--roster maps an LMS's ids" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["grade", str(tmp_path), "--lms", "blackboard"])


def test_the_import_files_are_canvas_and_moodle_gradebook_csvs(tmp_path):
    """Canvas: its export's columns, Points Possible, a row per user id; Moodle: the offline grading worksheet."""
    root = _files(tmp_path / "class", ["doejohn_12345_6789012_reconcile.ipynb"])
    (sub,) = collect(root, "reconcile", ["reconcile"], Names("canvas"))
    sub.score, sub.max_score = 21.5, 29
    (path,) = write_imports(tmp_path, "reconcile", [sub]).paths
    rows = list(csv.reader(path.open()))
    assert rows == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "reconcile"],
        ["Points Possible", "", "", "", "", "29"],
        ["doejohn", "12345", "12345", "", "", "21.5"],
    ]
    root = _files(tmp_path / "m", ["Ann Smith_234567_assignsubmission_file_/reconcile.ipynb"])
    (sub,) = collect(root, "reconcile", ["reconcile"], Names("moodle"))
    sub.score, sub.max_score = 10, 29
    (path,) = write_imports(tmp_path, "reconcile", [sub]).paths
    moodle = list(csv.DictReader(path.open()))
    assert moodle[0]["Identifier"] == "Participant 234567" and moodle[0]["Grade"] == "10"
    assert moodle[0]["Full name"] == "Ann Smith" and moodle[0]["Maximum Grade"] == "29"
    sub.lms = None  # files that came from no LMS
    assert write_imports(tmp_path, "reconcile", [sub]).paths == []


def _sub(student: str, lms: str = "canvas", **kw) -> Submission:
    """A graded student of ``lms``'s download (29 points), as collect and grading leave them."""
    return Submission(student, lms=lms, lms_id=f"{len(student)}{student}", lms_name=student.title(), max_score=29, **kw)


def _column(imports, name: str) -> dict[str, str]:
    """{the LMS's name of each student: their cell of column ``name``} of the one import file written."""
    (path,) = imports.paths
    if path.name.startswith("canvas"):
        return {r["Student"]: r[name] for r in csv.DictReader(path.open()) if r["Student"] != "Points Possible"}
    return {r["Full name"]: r[name] for r in csv.DictReader(path.open())}


def test_a_student_who_could_not_be_graded_is_blank_not_0(tmp_path):
    """A refused, failed or missing notebook leaves its cell blank; a graded 0 stays 0; the count says so."""
    subs = [
        _sub("ann", score=0),
        _sub("bo", status="invalid", problems=["not a notebook: not JSON"]),
        _sub("cy", status="failed", problems=["the kernel died"]),
        _sub("dee", status="missing", problems=["no submission"]),
    ]
    imports = write_imports(tmp_path, "reconcile", subs)
    assert _column(imports, "reconcile") == {"Ann": "0", "Bo": "", "Cy": "", "Dee": ""}
    assert (imports.waiting, imports.not_graded) == (0, 3)


def test_scores_waiting_for_manual_grading_go_out_only_when_marked_provisional(tmp_path):
    """Without the flag a score some of whose points wait for a human is blank; with it the score goes, saying so."""
    subs = [_sub("ann", lms="moodle", score=20, provisional=True), _sub("bo", lms="moodle", score=26)]
    held = write_imports(tmp_path, "reconcile", subs)
    assert _column(held, "Grade") == {"Ann": "", "Bo": "26"} and (held.waiting, held.not_graded) == (1, 0)
    assert _column(held, "Feedback comments")["Ann"] == reasons.LMS_WAITING
    sent = write_imports(tmp_path, "reconcile", subs, provisional=True)
    assert _column(sent, "Grade") == {"Ann": "20", "Bo": "26"} and sent.waiting == 0
    assert _column(sent, "Feedback comments") == {"Ann": reasons.LMS_PROVISIONAL, "Bo": reasons.LMS_GRADED}


def test_moodle_feedback_is_a_sentence_for_the_learner_in_their_language(tmp_path):
    """No grade id, ``?/3`` or "needs manual grading" reaches Moodle's feedback column; a Korean notebook's is Korean."""
    problems = ["level1_why ?/3 (needs manual grading)", "flagged for review: assigns j.dumps"]
    subs = [_sub("ann", lms="moodle", score=20, problems=problems), _sub("bo", lms="moodle", score=3)]
    feedback = _column(write_imports(tmp_path, "reconcile", subs, languages={"bo": "ko"}), "Feedback comments")
    assert feedback["Ann"] == reasons.LMS_GRADED
    assert feedback["Bo"] == GRADING.gettext(reasons.LMS_GRADED, "ko") != reasons.LMS_GRADED
    assert not any(word in text for text in feedback.values() for word in ("level1_why", "?/", "manual", "flagged"))
