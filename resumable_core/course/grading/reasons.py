"""Every sentence grading writes about a submission (``grades.csv``'s reasons, the summary, the feedback pages),
defined once so it reads the same wherever it is given. No I/O and no nbgrader: the steps pass in what they found."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# --- the learner's words -------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` a learner's code wrote as one printable line of valid UTF-8: a control character or lone surrogate
    as its escape (an escape sequence in ``grades.csv`` would act on the instructor's terminal), a break as a space."""
    return _CONTROL.sub(lambda m: " " if m[0] in "\n\r\t" else m[0].encode("unicode_escape").decode(), text)


# --- the policies --------------------------------------------------------------------------------


def not_graded(why: str) -> str:
    """A submission refused before nbgrader runs it (it scores 0)."""
    return f"not graded: {why}"


def not_a_notebook(why: str) -> str:
    """A submitted file that is no notebook (refused, scores 0)."""
    return f"not a notebook: {why}"


def needs_review(why: str) -> str:
    """A cell scored 0 until a human looks, because the isolated re-check could not confirm it: the one wording."""
    return f"needs review: {why}"


def N_(message: str) -> str:
    """Mark a sentence for the ``grading`` catalog: the step that knows the learner's language translates it."""
    return message


def megabytes(n: int) -> str:
    """A size in a reason: ``1.5 MB``."""
    return f"{n / 2**20:.1f} MB"


# --- finding the submissions (collect) -----------------------------------------------------------


def no_notebook_file(kinds: Iterable[str], count: int) -> str:
    """Files were submitted, but none of them is a notebook; ``kinds``: their suffixes."""
    return not_a_notebook(f"{' and '.join(kinds)} file{'s' if count > 1 else ''}, no .ipynb")


def no_assignment_folder(assignment: str, folder: str) -> str:
    """A student's folder in nbgrader's layout without the assignment's folder."""
    return f"no {assignment}/ folder in {folder}/"


def no_notebook_for(assignment: str) -> str:
    """A student's assignment folder holds no file at all."""
    return f"no notebook for {assignment}"


def renamed_notebook(file_name: str, notebook: str) -> str:
    """The student's one notebook, under another name, graded as the assignment's."""
    return f"renamed notebook {file_name!r} graded as {notebook}.ipynb"


def ignored_file(file_name: str) -> str:
    """A flat file beside the student's notebook, not graded."""
    return f"ignored another file {file_name!r}"


def flat_file_graded_as(notebook: str) -> str:
    """A flat ``<student>.ipynb`` of an assignment with several notebooks: graded as the first only."""
    return f"flat file graded as {notebook}.ipynb only"


def same_student_id(labels: str, student: str) -> str:
    """Two or more folders or files whose names give one student id: all refused."""
    return not_graded(f"{labels} give the same student id {student!r} (case aside); rename all but one")


# --- checking the notebooks (prepare) ------------------------------------------------------------


TRANSLATIONS_EDITED = N_(
    "more than one of {files} was edited: keep your work in one of them, delete the others and submit again"
)


def translations_edited(files: Iterable[str], translate: Callable[[str], str] = str) -> str:
    """A submission holding a notebook and its translation, both edited: refused, in the learner's language."""
    return not_graded(translate(TRANSLATIONS_EDITED).format(files=", ".join(files)))


def a_link(name: str) -> str:
    """A link in the class folder: never followed, since it could name any file the grader may read."""
    return not_graded(f"{name!r} is a link, not a submitted file; put the file itself in the class folder")


NOT_UTF8 = N_("{file} is not UTF-8 text: open it in Jupyter and save it again, as UTF-8")
OTHER_ASSIGNMENT = N_("{file} is the {other} assignment's notebook: submit {notebook}.ipynb")


def not_utf8(file_name: str, translate: Callable[[str], str] = str) -> str:
    """A submitted file whose bytes are no UTF-8 (a notebook saved as Latin-1, say): refused, scores 0."""
    return not_graded(translate(NOT_UTF8).format(file=file_name))


def other_assignment(file_name: str, other: str, notebook: str, translate: Callable[[str], str] = str) -> str:
    """A notebook of another assignment of the course, by its cells: refused with the file to submit (it scores 0)."""
    return not_graded(translate(OTHER_ASSIGNMENT).format(file=file_name, other=other, notebook=notebook))


def not_json(file_name: str) -> str:
    """A submitted file that is no JSON at all (a PDF, a text file under the notebook's name): refused, scores 0."""
    return f"{file_name} is {not_a_notebook('not JSON')}"


NO_CELLS = not_a_notebook("JSON without a cells list")
EMPTY_NOTEBOOK = "empty notebook: no code in it"


def file_too_large(size: int, cap: int) -> str:
    """A submitted file over the cap, refused unread."""
    return not_graded(f"the file is {megabytes(size)}, over the {megabytes(cap)} a notebook may be")


def fails_validation(error: str) -> str:
    """JSON with cells that nbformat refuses; ``error``: the exception's class name."""
    return not_a_notebook(f"fails nbformat validation ({error})")


def content_too_large(size: int, cap: int) -> str:
    """A notebook whose code and text (outputs stripped) are over the cap."""
    return not_graded(f"its code and text are {megabytes(size)}, over the {megabytes(cap)} a notebook may hold")


def metadata_dropped(cells: Iterable[str]) -> str:
    """Cells whose nbgrader metadata names no released (or a repeated) grade_id, run as plain cells."""
    return "nbgrader metadata with an unknown or repeated grade_id dropped (run as plain cells): " + ", ".join(cells)


def metadata_put_back(grade_ids: Iterable[str]) -> str:
    """Cells whose grading metadata the learner edited, given the release's again."""
    return "edited nbgrader metadata put back as released: " + ", ".join(grade_ids)


def outputs_stripped(size: int) -> str:
    """Large outputs cleared before grading."""
    return f"outputs stripped ({megabytes(size)}; grading runs every cell again)"


def cells_restored(grade_ids: Iterable[str]) -> str:
    """The instructor's cells the learner deleted, put back."""
    return "restored deleted cells: " + ", ".join(grade_ids)


def cells_put_back(grade_ids: Iterable[str]) -> str:
    """The instructor's locked cells (tests) the learner edited: graded as released (nbgrader overwrites them)."""
    return "edited test cells graded as released: " + ", ".join(grade_ids)


def flagged_for_review(flags: Iterable[str]) -> str:
    """What the learner's code does that a reviewer should look at (the score is the tests')."""
    return "flagged for review: " + ", ".join(flags)


# --- autograding and the cells' points (report, course_grades) -----------------------------------


RECHECK_CRASHED = "the isolated re-check could not run"
GRADING_STOPPED = "grading stopped"
GRADER_FAILURES = (RECHECK_CRASHED, GRADING_STOPPED)
"""How a worker's report begins its error when a step of the kit's own failed for one student (:mod:`.workers`)."""


def classify_failure(text: str, timeout: int) -> str:
    """Why nbgrader could not finish a notebook, from its log and error."""
    if "DeadKernelError" in text or "Kernel died" in text:
        return (
            "the kernel died while running the notebook (os._exit, a crash or out of memory); no cell could be graded"
        )
    if "UnresponsiveKernel" in text or "became unresponsive" in text:
        return f"the kernel stayed unresponsive after the {timeout} s timeout and could not be interrupted"
    if "CellTimeoutError" in text or "TimeoutError" in text:
        return f"a cell ran past the {timeout} s timeout and the notebook could not go on"
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    ours = [ln.strip() for ln in lines if ln.strip().startswith(GRADER_FAILURES)]
    if ours:  # the kit's own step failed, not nbgrader: no score of this student was kept
        return f"{ours[-1]}; no score is kept (nothing was re-checked)"
    errs = [ln for ln in lines if re.match(r"^\w*(Error|Exception)\b", ln.strip())]
    return "nbgrader autograde failed: " + printable(
        errs[-1].strip() if errs else (lines[-1].strip() if lines else "unknown error")
    )


def cell_loss(cell: Mapping[str, Any], timeout: int) -> str:
    """What a graded test cell's outputs show went wrong."""
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            ename = o.get("ename", "Error")
            if ename in ("CellTimeoutError", "KeyboardInterrupt"):
                return f"interrupted at the {timeout} s timeout"
            evalue = str(o.get("evalue", "")).strip().splitlines()
            return printable(f"{ename}: {evalue[0][:120]}" if evalue else str(ename))
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name") == "stderr":
            return "wrote to stderr"
    return "partial credit"


def cell_lost(grade_id: str, score: float, max_score: float, why: str | None = None) -> str:
    """One cell short of full marks: ``test_x 0/3 (why)`` (no parenthesis without a why)."""
    head = f"{grade_id} {score:g}/{max_score:g}"
    return f"{head} ({why})" if why else head


def written_answer_blank(grade_id: str, max_score: float) -> str:
    """A written answer left empty or as released: it scores 0 with no human (as nbgrader scores one left as released)."""
    return f"{grade_id} 0/{max_score:g} (written answer {grade_id} left blank)"


def needs_manual_grading(grade_id: str, max_score: float) -> str:
    """A cell that waits for a human's score."""
    return f"{grade_id} ?/{max_score:g} (needs manual grading)"


def manual_override(auto_score: float) -> str:
    """Why a cell's score is not the autograder's: a grader's, or the re-check's zero."""
    return f"manual score, from a grader or the isolated re-check; the autograder gave {auto_score:g}"


GRADED_BY_HAND = "graded by hand"
NO_SUBMISSION = "no submission"


def feedback_not_written(error: BaseException) -> str:
    """A student's feedback page could not be written (the row says so; the run goes on)."""
    return f"feedback HTML could not be written ({type(error).__name__})"


# --- the isolated re-check -----------------------------------------------------------------------

UNREPORTED = "the isolated re-check did not report this cell"
"""Why a cell that scored in the kernel but is missing from the re-check's report needs review."""
RECHECK_FAILED = "failed"
"""Why a cell failed the re-check when the re-check gave no why."""


def raised_only_here(cell: str, error: str) -> str:
    """Why a re-check is inconclusive: a learner cell raised in the isolated process but not in the kernel."""
    return f"{cell} raised {error} here but not in the kernel"


AFTER_RESTART = "after a fresh start, "
"""How the re-check's why begins for a visible check that failed on a call a freshly started process served."""


def failed_after_restart(why: str) -> str:
    """The re-check's why for a visible check that failed on a call in a freshly started learner's process."""
    return f"{AFTER_RESTART}{why}"


def hidden_check_failed(sentence: str) -> str:
    """A cell that scored in the kernel and failed a hidden check (only the re-check runs those): no suspicion.
    ``sentence`` is all the check hands back (``hidden.i18n.fails_with``), never its inputs or the learner's text."""
    return f"a hidden check failed: {sentence}"


def visible_check_disagreed(why: str) -> str:
    """A visible check that passed in the kernel and failed in the re-check: the one real disagreement, 0 until a
    human looks. A call served by a freshly started process (``AFTER_RESTART``) is none: the kernel can only fork."""
    if why.startswith(AFTER_RESTART):
        return (
            "a visible check failed in the isolated re-check, where a restarted call runs in a freshly started "
            f"process as after a real restart (the notebook's kernel can only fork a copy of itself): "
            f"{why[len(AFTER_RESTART) :]}"
        )
    return needs_review(
        f"a visible check passed in the notebook's kernel but failed when re-checked in isolation: {why} "
        "(the submission may patch the checks)"
    )


def recheck_comment(grade_id: str, why: str) -> str:
    """Formgrader's comment on an answer cell, one line per test cell below it that the isolated re-check zeroed."""
    return f"{grade_id} scored 0 in the isolated re-check: {why}"


def kept_for_review(why: str, cells: str) -> str:
    """``grades.csv``: the cells an inconclusive re-check left at 0 for review; ``cells``: ``"test_a, test_b"``."""
    return needs_review(f"could not re-check in isolation ({why}); cells {cells} score 0 until a human looks")


def page_kept_for_review(why: str) -> str:
    """The feedback page: a cell the re-check could not confirm."""
    return needs_review(f"could not be re-checked in isolation ({why})")


# --- the feedback page's points ------------------------------------------------------------------

CELL_NOT_GRADED = "not graded"
NO_POINTS = "no points (the check did not pass)"
SOME_POINTS_WAIT = "some points wait for manual grading"


def waits_for_manual_grading(max_score: float) -> str:
    """A cell's points on the feedback page while a human has not graded it."""
    return f"?/{max_score:g} (waits for manual grading)"


# --- the LMS's import files (lms) ----------------------------------------------------------------
# The feedback column is the learner's: one of these sentences, never a reason of grades.csv (grade
# ids, ``?/3``, "needs manual grading" are the instructor's words).

LMS_GRADED = N_("Graded: your feedback page gives each check's points and message.")
LMS_PROVISIONAL = N_("Some of your answers still wait for your instructor's grading: this score may change.")
LMS_WAITING = N_(
    "Some of your answers still wait for your instructor's grading: your score comes when they are graded."
)
LMS_NOT_GRADED = N_("Your notebook could not be graded: your instructor will tell you why.")
LMS_NO_SUBMISSION = N_("No notebook of yours was received for this assignment.")


def import_left_blank(waiting: int, not_graded: int) -> str:
    """The end of a run: the students an LMS import file leaves blank, and why."""
    why = []
    if waiting:
        why.append(
            f"{waiting} wait for manual grading (grade them in formgrader, then run grades; "
            "or pass --provisional to send their scores now, marked provisional)"
        )
    if not_graded:
        why.append(f"{not_graded} could not be graded (grades.csv says why)")
    return f"{waiting + not_graded} student(s) left blank: " + "; ".join(why)


# --- the workers' reports ------------------------------------------------------------------------


def unknown_report(student: str, worker: str) -> str:
    """A worker's report the grading side cannot vouch for, ignored (logged)."""
    return f"ignored a grading report for unknown student {student!r} (from {worker!r})"
