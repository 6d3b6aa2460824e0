"""Every sentence grading writes about a submission (``grades.csv``'s reasons, the summary, the feedback pages),
defined once so it reads the same wherever it is given: a table of sentences, each ``{}`` filled by the step
that found it. No I/O and no nbgrader. Code is left only where a sentence is chosen or translated."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` a learner's code wrote as one printable line of valid UTF-8: a control character or lone surrogate
    as its escape (an escape sequence in ``grades.csv`` would act on the instructor's terminal), a break as a space."""
    return _CONTROL.sub(lambda m: " " if m[0] in "\n\r\t" else m[0].encode("unicode_escape").decode(), text)


def N_(message: str) -> str:
    """Mark a sentence for the ``grading`` catalog: the step that knows the learner's language translates it."""
    return message


def _listing(head: str) -> Callable[[Iterable[str]], str]:
    """A sentence ending in a list of cells or flags."""
    return lambda items: head + ", ".join(items)


def _sized(sentence: str) -> Callable[..., str]:
    """A sentence of sizes in bytes, shown as ``1.5 MB``."""
    return lambda *sizes: sentence.format(*(f"{n / 2**20:.1f} MB" for n in sizes))


# --- the policies: a submission refused (scores 0), or a cell left for a human ----------------------
NOT_GRADED, NOT_A_NOTEBOOK, NEEDS_REVIEW = "not graded: ", "not a notebook: ", "needs review: "
not_graded = (NOT_GRADED + "{}").format
needs_review = (NEEDS_REVIEW + "{}").format

# --- finding the submissions (collect) ------------------------------------------------------------
no_assignment_folder = "no {}/ folder in {}/".format
no_notebook_for = "no notebook for {}".format
renamed_notebook = "renamed notebook {!r} graded as {}.ipynb".format
ignored_file = "ignored another file {!r}".format
flat_file_graded_as = "flat file graded as {}.ipynb only".format
same_student_id = (NOT_GRADED + "{} give the same student id {!r} (case aside); rename all but one").format
a_link = (NOT_GRADED + "{!r} is a link, not a submitted file; put the file itself in the class folder").format


def no_notebook_file(kinds: Iterable[str], count: int) -> str:
    """Files were submitted, but none of them is a notebook; ``kinds``: their suffixes."""
    return f"{NOT_A_NOTEBOOK}{' and '.join(kinds)} file{'s' if count > 1 else ''}, no .ipynb"


# --- checking the notebooks (prepare) -------------------------------------------------------------
TRANSLATIONS_EDITED = N_(
    "more than one of {files} was edited: keep your work in one of them, delete the others and submit again"
)
NOT_UTF8 = N_("{file} is not UTF-8 text: open it in Jupyter and save it again, as UTF-8")
OTHER_ASSIGNMENT = N_("{file} is the {other} assignment's notebook: submit {notebook}.ipynb")


def refused(sentence: str, translate: Callable[[str], str] = str, **fields: str) -> str:
    """A submission refused in the learner's language (``translate``): ``sentence``, a catalog id, with ``fields``."""
    return NOT_GRADED + translate(sentence).format(**fields)


not_json = ("{} is " + NOT_A_NOTEBOOK + "not JSON").format
NO_CELLS = NOT_A_NOTEBOOK + "JSON without a cells list"
EMPTY_NOTEBOOK = "empty notebook: no code in it"
fails_validation = (NOT_A_NOTEBOOK + "fails nbformat validation ({})").format
file_too_large = _sized(NOT_GRADED + "the file is {}, over the {} a notebook may be")
content_too_large = _sized(NOT_GRADED + "its code and text are {}, over the {} a notebook may hold")
outputs_stripped = _sized("outputs stripped ({}; grading runs every cell again)")
metadata_dropped = _listing("nbgrader metadata with an unknown or repeated grade_id dropped (run as plain cells): ")
metadata_put_back = _listing("edited nbgrader metadata put back as released: ")
cells_restored = _listing("restored deleted cells: ")
cells_put_back = _listing("edited test cells graded as released: ")
flagged_for_review = _listing("flagged for review: ")

# --- autograding and the cells' points (report, course_grades) ------------------------------------
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


# a written answer left empty or as released scores 0 with no human, as nbgrader scores one left as released
written_answer_blank = "{0} 0/{1:g} (written answer {0} left blank)".format
needs_manual_grading = "{} ?/{:g} (needs manual grading)".format
manual_override = "manual score, from a grader or the isolated re-check; the autograder gave {:g}".format
GRADED_BY_HAND = "graded by hand"
NO_SUBMISSION = "no submission"


def feedback_not_written(error: BaseException) -> str:
    """A student's feedback page could not be written (the row says so; the run goes on)."""
    return f"feedback HTML could not be written ({type(error).__name__})"


# --- the isolated re-check ------------------------------------------------------------------------
UNREPORTED = "the isolated re-check did not report this cell"
RECHECK_FAILED = "failed"
"""Why a cell failed the re-check when the re-check gave no why."""
raised_only_here = "{} raised {} here but not in the kernel".format
AFTER_RESTART = "after a fresh start, "
"""How the re-check's why begins for a visible check that failed on a call a freshly started process served."""
failed_after_restart = (AFTER_RESTART + "{}").format
# all a hidden check hands back (``hidden.i18n.fails_with``), never its inputs or the learner's text
hidden_check_failed = "a hidden check failed: {}".format


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


recheck_comment = "{} scored 0 in the isolated re-check: {}".format
kept_for_review = (NEEDS_REVIEW + "could not re-check in isolation ({}); cells {} score 0 until a human looks").format
page_kept_for_review = (NEEDS_REVIEW + "could not be re-checked in isolation ({})").format

# --- the feedback page's points -------------------------------------------------------------------
CELL_NOT_GRADED = "not graded"
NO_POINTS = "no points (the check did not pass)"
SOME_POINTS_WAIT = "some points wait for manual grading"
waits_for_manual_grading = "?/{:g} (waits for manual grading)".format

# --- the LMS's import files (lms) -----------------------------------------------------------------
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


# a worker's report the grading side cannot vouch for, ignored (logged)
unknown_report = "ignored a grading report for unknown student {!r} (from {!r})".format
