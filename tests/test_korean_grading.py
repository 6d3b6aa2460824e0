"""One class, two languages: the same answers in the Korean and the English release get the same scores through `grade`.

Two students hand in the released ``reconcile`` notebook with the same answers (those of
``grading_samples``' ``rerun_everything``, which pass some checks and fail others): one in the
English release, one in the Korean release (``exercises/reconcile/ko/``). nbgrader restores every
locked cell from the gradebook, which holds the English source: the Korean notebook's code cells
are the English ones but for their Korean comments, so nothing is reported as edited, and only the
Korean markdown is put back.

nbgrader's exchange hands out both notebooks (``reconcile.ipynb`` and ``ko/reconcile.ipynb``) and a
submission holds both: the one the learner edited is graded, and a submission with both edited is
refused. A third student hands in both, the Korean one answered; a fourth, both answered.

The class is graded in ``folder_run``'s run (``tests/graded_classes.py``, once per session, ``--jobs 2``): its students
(``grading_samples.BOTH_FETCHED``) beside the samples, so the class costs no run of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest

from resumable_core.course import notebooks
from resumable_core.course import release as course
from resumable_core.course.grading.steps import prepare as prep
from resumable_core.course.grading.steps.collect import collect
from resumable_core.course.grading.steps.execute import SandboxedExecute
from resumable_core.lab.editions import same_code

ENGLISH = course.notebook_path("reconcile", course.COURSE_ROOT, course.RELEASE_DIR)
KOREAN = course.translated_path("reconcile", "ko", course.COURSE_ROOT, course.RELEASE_DIR)
ANSWERS = samples.answers(samples.REAL_RERUN)
EXPECTED = samples.SAMPLES["rerun_everything"][2]

needs_korean = pytest.mark.skipif(not KOREAN.exists(), reason="no Korean release of reconcile: run make release")


def test_the_notebook_metadata_chooses_the_learner_kernels_language() -> None:
    """`resumable.lang` of a known language goes to the kernel's backend as RESUMABLE_LANG; anything else is English."""
    assert notebooks.language({"metadata": {"resumable": {"lang": "ko"}}}) == "ko"
    for meta in ({}, {"resumable": {"lang": "xx"}}, {"resumable": "ko"}, {"resumable": {"lang": ["ko"]}}):
        assert notebooks.language({"metadata": meta}) == "en", meta
    backend = SandboxedExecute(isolation="plain").backend("ko")
    assert backend.env == {"RESUMABLE_LANG": "ko"}


@pytest.fixture
def graded(folder_run) -> tuple[Path, dict[str, dict[str, str]]]:
    """The class graded in ``folder_run``: the out folder and grades.csv's rows by student."""
    _, out, rows = folder_run
    return out, rows


@needs_korean
def test_the_korean_submission_is_the_english_one_but_for_markdown() -> None:
    """The two submissions differ in markdown cells, code comments and the notebook's language only."""
    english, korean = course.fill_in(ENGLISH, ANSWERS), course.fill_in(KOREAN, ANSWERS)
    assert korean["metadata"]["resumable"] == {"lang": "ko"}
    pairs = list(zip(english["cells"], korean["cells"], strict=True))
    assert any(e != k for e, k in pairs)
    for e, k in pairs:
        if e["cell_type"] == "code":
            assert same_code(notebooks.source(e), notebooks.source(k)) and {**e, "source": ""} == {**k, "source": ""}


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
def test_the_korean_notebook_answered_beside_the_english_one_scores_as_in_english(
    graded: tuple[Path, dict[str, dict[str, str]]],
) -> None:
    """Handed in beside the untouched English notebook (as the exchange hands both out), the answered Korean one is
    graded, in Korean: every column as the Korean-only student's; the submission with both answered is refused."""
    out, rows = graded
    alone, beside = rows["korean"], rows["korean-beside-english"]
    assert {k: v for k, v in beside.items() if k != "student_id"} == {
        k: v for k, v in alone.items() if k != "student_id"
    }
    assert float(beside["score"]) == float(rows["english"]["score"]) == EXPECTED
    page = (out / "feedback-html" / "korean-beside-english.html").read_text(encoding="utf-8")
    assert '<html lang="ko">' in page
    refused = rows["both-edited"]
    assert (refused["status"], float(refused["score"])) == ("invalid", 0.0)
    assert refused["reason"] == (
        "not graded: reconcile.ipynb, ko/reconcile.ipynb 가운데 둘 이상을 고쳤습니다. "
        "작업은 한 노트북에만 남기고 나머지는 지운 뒤 다시 제출하세요"
    )


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


# -- which of the two notebooks a submission holds is graded (collect and prepare, no nbgrader) ----------


def _prepared(tmp_path: Path, files: Mapping[str, dict | Path]) -> tuple[dict, dict]:
    """One student's folder handed in, collected and prepared: (the Submission's fields, the notebook written)."""
    samples.hand_in(tmp_path / "class" / "kim", files)
    (sub,) = collect(tmp_path / "class", "reconcile", ["reconcile"])
    (sub,) = prep.prepare(
        [sub], tmp_path / "out", "reconcile", {"reconcile": nbformat.read(str(ENGLISH), as_version=4)}
    )
    written = tmp_path / "out" / "submitted" / "kim" / "reconcile" / "reconcile.ipynb"
    nb = json.loads(written.read_text(encoding="utf-8")) if written.exists() else {}
    return {"status": sub.status, "reason": sub.reason}, nb


def _ran(release: Path) -> dict:
    """The release as Jupyter saves it once its cells ran unedited: outputs, counts, execution metadata."""
    nb = json.loads(release.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            cell["execution_count"] = i
            cell["outputs"] = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
            cell["metadata"]["execution"] = {"iopub.status.idle": "2025-01-01T00:00:00Z"}
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2"}
    return nb


@needs_korean
def test_collect_keeps_the_korean_notebook_beside_the_english_one(tmp_path: Path) -> None:
    """`ko/reconcile.ipynb` is the translation of the assignment's notebook, not a second or renamed notebook."""
    samples.hand_in(tmp_path / "kim", {"reconcile.ipynb": ENGLISH, "ko/reconcile.ipynb": KOREAN})
    (sub,) = collect(tmp_path, "reconcile", ["reconcile"])
    folder = tmp_path / "kim" / "reconcile"
    assert sub.files == {"reconcile": folder / "reconcile.ipynb"}
    assert sub.translations == {"reconcile": {"ko": folder / "ko" / "reconcile.ipynb"}}
    assert (sub.status, sub.reason) == ("graded", "")


@needs_korean
def test_only_the_korean_notebook_edited_is_graded_in_korean(tmp_path: Path) -> None:
    """Both handed in, the English one only run: the answered Korean notebook is graded, as it would be alone."""
    korean = course.fill_in(KOREAN, ANSWERS)
    beside = _prepared(tmp_path / "beside", {"reconcile.ipynb": _ran(ENGLISH), "ko/reconcile.ipynb": korean})
    alone = _prepared(tmp_path / "alone", {"reconcile.ipynb": korean})
    assert beside == alone
    status, nb = beside
    assert status == {"status": "graded", "reason": ""} and notebooks.language(nb) == "ko"


@needs_korean
def test_both_notebooks_edited_are_refused_in_one_line(tmp_path: Path) -> None:
    """Both answered: refused before grading, in one line naming both files and the fix, in the translation's words."""
    files = {"reconcile.ipynb": course.fill_in(ENGLISH, ANSWERS), "ko/reconcile.ipynb": course.fill_in(KOREAN, {})}
    files["ko/reconcile.ipynb"]["cells"].append(nbformat.v4.new_code_cell("print('mine')"))  # a cell of the learner's
    status, nb = _prepared(tmp_path, files)
    assert status["status"] == "invalid" and nb == {}
    assert status["reason"] == (
        "not graded: reconcile.ipynb, ko/reconcile.ipynb 가운데 둘 이상을 고쳤습니다. "
        "작업은 한 노트북에만 남기고 나머지는 지운 뒤 다시 제출하세요"
    )


@needs_korean
@pytest.mark.parametrize("english", ["release", "answered"])
def test_the_korean_notebook_left_alone_changes_nothing(tmp_path: Path, english: str) -> None:
    """With the Korean notebook as fetched (or run unedited), the English one is graded just as if it were alone."""
    handed = ENGLISH if english == "release" else course.fill_in(ENGLISH, ANSWERS)
    beside = _prepared(tmp_path / "beside", {"reconcile.ipynb": handed, "ko/reconcile.ipynb": _ran(KOREAN)})
    alone = _prepared(tmp_path / "alone", {"reconcile.ipynb": handed})
    assert beside == alone and notebooks.language(beside[1]) == "en"


@needs_korean
def test_the_korean_notebook_handed_in_alone_in_its_folder_is_graded(tmp_path: Path) -> None:
    """Only `ko/reconcile.ipynb` handed in (the English one deleted): graded in Korean, without a renamed-file note."""
    status, nb = _prepared(tmp_path, {"ko/reconcile.ipynb": course.fill_in(KOREAN, ANSWERS)})
    assert status == {"status": "graded", "reason": ""} and notebooks.language(nb) == "ko"


@needs_korean
def test_editing_the_instructors_text_is_no_edit_but_a_cell_of_ones_own_is() -> None:
    """A reworded markdown cell of the release does not count as work; an added cell or a changed answer does."""
    release = notebooks.read(ENGLISH)
    reworded = notebooks.read(KOREAN)  # every markdown cell of the release in other words
    assert prep.learner_part(reworded, release) == prep.learner_part(release, release)
    added = notebooks.read(KOREAN)
    added.cells.append(nbformat.v4.new_markdown_cell("my notes"))
    answered = nbformat.from_dict(course.fill_in(KOREAN, {"level1_why": "because"}))
    for nb in (added, answered):
        assert prep.learner_part(nb, release) != prep.learner_part(release, release)


@needs_korean
def test_a_notebook_saved_without_cell_ids_is_no_edit_by_itself() -> None:
    """Saved as nbformat 4.4 (no cell ids), the Korean release is still unedited; answered, it is edited."""
    release = notebooks.read(ENGLISH)

    def without_ids(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
        nb.nbformat_minor = 4
        for cell in nb.cells:
            cell.pop("id", None)
        return nb

    untouched = without_ids(notebooks.read(KOREAN))
    assert prep.learner_part(untouched, release) == prep.learner_part(release, release)
    answered = without_ids(nbformat.from_dict(course.fill_in(KOREAN, {"level1_why": "because"})))
    assert prep.learner_part(answered, release) != prep.learner_part(release, release)
