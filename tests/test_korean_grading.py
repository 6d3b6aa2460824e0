"""One class, two languages: the same answers in the Korean and the English release get the same scores through `grade`.

Two students hand in the released ``reconcile`` notebook with the same answers (those of
``grading_samples``' ``rerun_everything``, which pass some checks and fail others): one in the
English release, one in the Korean release (``exercises/reconcile/ko/``). nbgrader restores every
locked cell from the gradebook, which holds the English source: the Korean notebook's code cells
are the English ones, so nothing is reported as edited, and only the Korean markdown is put back.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest

from resumable_core.__main__ import main as cli_main
from resumable_core.course import notebooks
from resumable_core.course import release as course
from resumable_core.course.grading.execute import SandboxedExecute
from resumable_core.course.grading.isolation import BwrapBackend

ENGLISH = course.notebook_path("reconcile", course.COURSE_ROOT, course.RELEASE_DIR)
KOREAN = course.translated_path("reconcile", "ko", course.COURSE_ROOT, course.RELEASE_DIR)
TIMEOUT = 30  # per cell, as tests/test_grading.py
ANSWERS = samples.answers(samples.REAL_RERUN)
EXPECTED = samples.SAMPLES["rerun_everything"][2]
SAY_LANGUAGE = 'import os\nprint("kernel speaks", os.environ.get("RESUMABLE_LANG"))'
"""A cell both learners add after their first answer: it shows the language the learner's kernel was given."""

needs_korean = pytest.mark.skipif(not KOREAN.exists(), reason="no Korean release of reconcile: run make release")


def test_the_notebook_metadata_chooses_the_learner_kernels_language() -> None:
    """`resumable.lang` of a known language goes to the kernel's backend as RESUMABLE_LANG; anything else is English."""
    assert notebooks.language({"metadata": {"resumable": {"lang": "ko"}}}) == "ko"
    for meta in ({}, {"resumable": {"lang": "xx"}}, {"resumable": "ko"}, {"resumable": {"lang": ["ko"]}}):
        assert notebooks.language({"metadata": meta}) == "en", meta
    backend = SandboxedExecute(isolation="plain").backend("ko")
    assert backend.env == {"RESUMABLE_LANG": "ko"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, str]]]:
    """The class graded with --jobs 2: the out folder and grades.csv's rows by student."""
    root = tmp_path_factory.mktemp("class-two-languages")
    for student, release in (("english", ENGLISH), ("korean", KOREAN)):
        path = root / "submitted" / student / "reconcile" / "reconcile.ipynb"
        path.parent.mkdir(parents=True)
        nb = course.fill_in(release, ANSWERS)
        at = next(i for i, c in enumerate(nb["cells"]) if c.get("id") == "level1_actions") + 1
        nb["cells"].insert(at, {**nbformat.v4.new_code_cell(SAY_LANGUAGE), "id": "learner-added"})
        path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    out = root / "out"
    args = ["grade", str(root / "submitted"), "--assignment", "reconcile", "--jobs", "2", "--out", str(out)]
    args += ["--timeout", str(TIMEOUT), *([] if BwrapBackend().available() is None else ["--no-sandbox"])]
    assert cli_main(args) == 0
    with open(out / "grades.csv", newline="") as f:
        return out, {row["student_id"]: row for row in csv.DictReader(f)}


@needs_korean
def test_the_korean_submission_is_the_english_one_but_for_markdown() -> None:
    """The two submissions differ in markdown cells and the notebook's language only."""
    english, korean = course.fill_in(ENGLISH, ANSWERS), course.fill_in(KOREAN, ANSWERS)
    assert korean["metadata"]["resumable"] == {"lang": "ko"}
    differ = [e["id"] for e, k in zip(english["cells"], korean["cells"], strict=True) if e != k]
    assert differ and all(e["cell_type"] == "markdown" for e in english["cells"] if e["id"] in differ)


@pytest.mark.slow
@pytest.mark.nbgrader
@needs_korean
def test_same_answers_same_scores_in_both_languages(graded: tuple[Path, dict[str, dict[str, str]]]) -> None:
    """Every column of grades.csv is the same for the two (score, status, per-cell marks) but the student's id and
    the reason's words: the same cells lost the same points, each said in its learner's language."""
    _, rows = graded
    english, korean = rows["english"], rows["korean"]
    assert float(english["score"]) == float(korean["score"]) == EXPECTED, (english, korean)
    same = {k: v for k, v in english.items() if k not in ("student_id", "reason")}
    assert {k: v for k, v in korean.items() if k not in ("student_id", "reason")} == same
    lost = re.compile(r"(?:^|; )(\w+) (\??[\d.]*/[\d.]+)")
    assert lost.findall(korean["reason"]) == lost.findall(english["reason"]) != []
    assert "부수 효과" in korean["reason"] and "side effect" in english["reason"]  # each in its learner's language


@pytest.mark.slow
@pytest.mark.nbgrader
@needs_korean
def test_the_korean_notebook_is_not_reported_as_edited(graded: tuple[Path, dict[str, dict[str, str]]]) -> None:
    """No reason speaks of edited, restored or dropped cells or metadata for the Korean submission."""
    _, rows = graded
    reasons = " ".join(v for k, v in rows["korean"].items() if k != "student_id").lower()
    for word in ("edited", "put back", "restored", "dropped", "deleted", "renamed"):
        assert word not in reasons, rows["korean"]


@pytest.mark.slow
@pytest.mark.nbgrader
@needs_korean
def test_each_learner_kernel_speaks_its_notebooks_language(graded: tuple[Path, dict[str, dict[str, str]]]) -> None:
    """The Korean notebook ran with RESUMABLE_LANG=ko, the English one with en (its feedback's messages follow)."""
    out, _ = graded
    for student, lang in (("english", "en"), ("korean", "ko")):
        nb = json.loads((out / "autograded" / student / "reconcile" / "reconcile.ipynb").read_text(encoding="utf-8"))
        cell = next(c for c in nb["cells"] if c.get("id") == "learner-added")
        text = "".join("".join(o.get("text", "")) for o in cell["outputs"])
        assert f"kernel speaks {lang}" in text, (student, cell["outputs"])
