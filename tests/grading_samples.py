"""A sample class for the grading tests and the bench: honest, wrong and hostile submissions.

``write_tiny_source(folder)`` writes a small stand-in ``reconcile`` assignment (one solution cell
``my_reconcile``, a visible test on checkpoint B worth 2 and a test with hidden checks on
checkpoint C worth 3). ``write_class(source_nb, out, layout)`` writes the class's submissions,
built from any source notebook whose solution cell defines ``my_reconcile(cp, tools)``.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import nbformat

NOTEBOOK = "reconcile"
SOLUTION_ID = "my_reconcile"

SETUP = """import sys
import tempfile
import resumable_core as rc
from resumable_core.lab.exercise_checkpoints import exercise_run_folder"""

TEST_READ_ONLY = """# a read-only call is run again and its real result recorded
with tempfile.TemporaryDirectory() as d:
    cp, tools = exercise_run_folder("B", d)
    pending_id = cp.pending_tool_use.id
    out = my_reconcile(cp, tools)
assert out.pending_tool_use is None, "the pending call must be cleared"
block = out.messages[-1]["content"][0]
assert block["type"] == "tool_result" and block["tool_use_id"] == pending_id
assert not block.get("is_error"), "a read-only call can simply run again"
print("read-only call reconciled")"""

TEST_SIDE_EFFECT = """# a side-effecting call that already happened must not happen again
with tempfile.TemporaryDirectory() as d:
    cp, tools = exercise_run_folder("C", d)
    out = my_reconcile(cp, tools)
assert out.pending_tool_use is None, "the pending call must be cleared"
### BEGIN HIDDEN TESTS
# fresh copies of the world, the toolbox and the checker: a learner's monkeypatch cannot reach them
import importlib
import resumable_core.world, resumable_core.tools, resumable_core.loop, resumable_core.lab.matrix
for _m in (resumable_core.world, resumable_core.tools, resumable_core.loop, resumable_core.lab.matrix):
    importlib.reload(_m)
_cell = resumable_core.lab.matrix.run_cell("after_tool", "send_email", my_reconcile)
assert _cell.row.effects == 1, f"the email was sent {_cell.row.effects} times"
assert _cell.row.completed and not _cell.row.api_error
### END HIDDEN TESTS
print("side-effecting call reconciled")"""


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False, points: int = 0) -> dict:
    m = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if grade:
        m["points"] = points
    return {"nbgrader": m}


def tiny_source_notebook() -> nbformat.NotebookNode:
    """The stand-in assignment's source notebook (with its solution and hidden tests)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    body = REAL_CORRECT.split("\n", 1)[1]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Reconcile the dangling call", metadata=_meta("intro", locked=True)),
        nbformat.v4.new_code_cell(SETUP, metadata=_meta("setup", locked=True)),
        nbformat.v4.new_code_cell(
            "def my_reconcile(cp, tools):\n    ### BEGIN SOLUTION\n" + body + "\n    ### END SOLUTION",
            metadata=_meta(SOLUTION_ID, solution=True),
        ),
        nbformat.v4.new_code_cell(TEST_READ_ONLY, metadata=_meta("test_read_only", grade=True, locked=True, points=2)),
        nbformat.v4.new_code_cell(
            TEST_SIDE_EFFECT, metadata=_meta("test_side_effect", grade=True, locked=True, points=3)
        ),
    ]
    return nb


def write_tiny_source(folder: str | Path) -> Path:
    """Write the stand-in assignment into ``folder``; return the notebook's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NOTEBOOK}.ipynb"
    nbformat.write(tiny_source_notebook(), path)
    return path


# --- the learners' answers for the course's real ``reconcile`` assignment ------------------------
# (solution cells: ``level1_actions``, ``level1_why`` (manually graded) and ``reconcile``)

LEVEL1 = 'RESUME_ACTION = {"A": "finished_no_call", "B": "rerun_tool", "C": "is_error_fallback"}'
WHY = "A finished; B read-only so run it again; C may have been sent, so say the status is unknown."

REAL_CORRECT = """def reconcile(cp, tools):
    p = cp.pending_tool_use
    if p is None:
        return cp
    if tools.is_read_only(p.name):
        content, err = tools.execute(p.name, p.input), False
    else:
        content, err = rc.STATUS_UNKNOWN, True
    cp.messages.append({"role": "user", "content": [rc.tool_result(p.id, content, is_error=err)]})
    cp.pending_tool_use = None
    return cp"""

REAL_READ_ONLY_SET = """READ_ONLY_TOOLS = frozenset({"read_file", "grep", "list_dir", "list_sent_emails"})


def reconcile(cp, tools):
    p = cp.pending_tool_use
    if p is None:
        return cp
    if p.name in READ_ONLY_TOOLS or tools.is_read_only(p.name):
        content, err = tools.execute(p.name, p.input), False
    else:
        content, err = rc.STATUS_UNKNOWN, True
    cp.messages.append({"role": "user", "content": [rc.tool_result(p.id, content, is_error=err)]})
    cp.pending_tool_use = None
    return cp"""
"""Honest: a module-level set of tool names, as the source course's own fix writes it."""

REAL_RERUN = """def reconcile(cp, tools):
    p = cp.pending_tool_use
    if p is None:
        return cp
    cp.messages.append({"role": "user", "content": [rc.tool_result(p.id, tools.execute(p.name, p.input))]})
    cp.pending_tool_use = None
    return cp"""

REAL_DELETE = """def reconcile(cp, tools):
    if cp.pending_tool_use is not None:
        cp.messages.pop()
        cp.pending_tool_use = None
    return cp"""

REAL_IS_ERROR_ALL = """def reconcile(cp, tools):
    p = cp.pending_tool_use
    if p is None:
        return cp
    cp.messages.append({"role": "user", "content": [rc.tool_result(p.id, rc.STATUS_UNKNOWN, is_error=True)]})
    cp.pending_tool_use = None
    return cp"""

REAL_FORGOT_PENDING = REAL_CORRECT.replace("    cp.pending_tool_use = None\n", "")

REAL_INFINITE_LOOP = "import time\n\nSTUCK = []\n\n\n" + REAL_CORRECT.replace(
    "        content, err = tools.execute(p.name, p.input), False",
    "        if STUCK:\n            raise RuntimeError('still stuck')\n        STUCK.append(p.id)\n"
    "        while True:\n            time.sleep(1)",
)
"""Never returns from its first read-only call, and raises on every later one: the same cells fail as if each call
looped, but the grading waits out one timeout (of Level 2's first test), not one per call (four, 30 s each).
It waits instead of spinning: the timeout cuts both alike (tests/test_self_check.py cuts a spinning cell),
and a spin would take a core of the test machine for every cut."""

REAL_STDERR = REAL_READ_ONLY_SET.replace(
    "        content, err = rc.STATUS_UNKNOWN, True",
    "        import sys\n        print('not sending again', file=sys.stderr)\n        content, err = rc.STATUS_UNKNOWN, True",
)
"""Honest twice over, one sample for two things that must cost nothing: the source course's module-level set, and a
print to stderr."""

REAL_MONKEYPATCH = (
    REAL_RERUN
    + """

# make the rerun look harmless: a toolbox that never sends, checkers that always pass
_real_execute = rc.Toolbox.execute
def _fake_execute(self, name, input, idempotency_key=None):
    if name == "send_email":
        return "sent"
    return _real_execute(self, name, input, idempotency_key=idempotency_key)
rc.Toolbox.execute = _fake_execute
from resumable_core.course.hidden import reconcile as _hidden  # there on the grading machine
for _module in (checks, _hidden):
    for _name in dir(_module):
        if _name.startswith("check_"):
            setattr(_module, _name, lambda *a, **kw: None)
checks.CountingToolbox.count = lambda self, name=None: 1 if name else 0"""
)

REAL_OS_EXIT = "import os\nos._exit(1)"

REAL_PATCH_VISIBLE = (
    REAL_RERUN
    + """

# the visible checks the kernel runs, made to pass (the hidden ones are not in the kernel to patch)
for _name in dir(checks):
    if _name.startswith("check_"):
        setattr(checks, _name, lambda *a, **kw: None)"""
)

FLOOD = "for _ in range(21 * 1024):\n    print('x' * 1023)  # a debugging print left in: 21 MiB"

BLANK_WHY = "YOUR ANSWER HERE"
"""The written answer as released."""

NOT_JSON = b"%PDF-1.4 my homework, printed to PDF and renamed\n"


def _solution_cell(grade_id: str) -> str:
    """The source notebook's own answer in cell ``grade_id``, its solution markers dropped."""
    source = Path(__file__).resolve().parents[1] / "solutions" / NOTEBOOK / f"{NOTEBOOK}.ipynb"
    cell = next(c for c in nbformat.read(str(source), as_version=4).cells if c.get("id") == grade_id)
    return re.sub(r"(?m)^[ \t]*### (BEGIN|END) SOLUTION\n", "", cell.source)


REAL_TURN = _solution_cell("reconcile_turn")
"""Level 3's answer, the same in every sample: the samples differ in their Level 2 ``reconcile``."""


def answers(reconcile: str, level1: str = LEVEL1) -> dict[str, str]:
    """The four solution cells of a submission."""
    return {"level1_actions": level1, "level1_why": WHY, "reconcile": reconcile, "reconcile_turn": REAL_TURN}


# student -> (answers by cell id, options, expected autograded score; max 29 = 26 autograded + 3 manual;
# Level 3's 15 points are every sample's but os_exit's, whose kernel dies before Level 3's tests, and monkeypatch's)
SAMPLES: dict[str, tuple[dict[str, str], dict, float]] = {
    "correct": (answers(REAL_CORRECT), {}, 26),
    "rerun_everything": (answers(REAL_RERUN), {}, 23),
    "delete_move": (answers(REAL_DELETE), {}, 19),
    "is_error_all": (answers(REAL_IS_ERROR_ALL), {}, 24),
    "forgot_pending": (answers(REAL_FORGOT_PENDING), {}, 19),
    "infinite_loop": (answers(REAL_INFINITE_LOOP), {}, 22),
    "os_exit": (answers(REAL_CORRECT), {"extra_cell": REAL_OS_EXIT}, 11),  # levels 1 and 2 ran before the kill
    "edited_tests": (answers(REAL_RERUN), {"edit_tests": True}, 23),
    "monkeypatch": (answers(REAL_MONKEYPATCH), {}, 18),  # its fake execute also breaks Level 3's real kills
    "stderr_writer": (answers(REAL_STDERR), {}, 26),  # stderr and a module-level set cost nothing
    # renamed, its tests deleted and its written answer left as released (graded by hand: the score holds)
    "renamed": (
        {**answers(REAL_CORRECT), "level1_why": BLANK_WHY},
        {"rename": "reconcile-final (1).ipynb", "delete_tests": True},
        26,
    ),
    "patched": (answers(REAL_PATCH_VISIBLE), {}, 23),  # patches the visible checks only: rerun_everything's score
    # a flood after Level 2, before Level 3 (os_exit's cells), its written answer emptied
    "flood": ({**answers(REAL_CORRECT), "level1_why": ""}, {"extra_cell": FLOOD}, 11),
    "not_json": ({}, {"raw": NOT_JSON}, 0),  # a PDF renamed reconcile.ipynb
}
"""The honest and hostile submissions; ``not_a_notebook`` and ``empty`` are written apart.
The expected scores are what the course's tests should give; the grading tests assert them."""

BLANK_WRITTEN = ("renamed", "flood")
"""The samples whose written answer is left as released, and emptied."""

EXPECTED_STATUS = {"not_a_notebook": "invalid", "empty": "empty", "not_json": "invalid", "both-edited": "invalid"}


# --- one class, two languages: the released notebook and its Korean edition, as nbgrader's exchange hands them out ----

SAY_LANGUAGE = 'import os\nprint("kernel speaks", os.environ.get("RESUMABLE_LANG"))'
"""A cell the Korean class's learners add after their first answer: it shows the language their kernel was given."""

BOTH_FETCHED: dict[str, dict[str, str]] = {
    "english": {"reconcile.ipynb": "answered"},
    "korean": {"reconcile.ipynb": "korean answered"},
    "korean-beside-english": {"reconcile.ipynb": "release", "ko/reconcile.ipynb": "korean answered"},
    "both-edited": {"reconcile.ipynb": "answered", "ko/reconcile.ipynb": "korean answered"},
}
"""The Korean class, each file as a student left it ("answered", "korean answered" or the "release"):
``rerun_everything``'s answers in the English release, in the Korean one, in the Korean one beside the untouched
English one (graded in Korean), and in both (refused)."""


def hand_in(folder: Path, files: Mapping[str, dict | Path]) -> None:
    """``folder/reconcile/<name>`` for each file: a notebook's JSON, or a release copied as fetched."""
    for name, content in files.items():
        path = folder / "reconcile" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            path.write_bytes(content.read_bytes())
        else:
            path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")


def write_korean_class(submitted: Path) -> dict[str, float]:
    """``BOTH_FETCHED`` handed in under ``submitted/``; every student's expected score (none without a Korean release)."""
    from resumable_core.course import release as course

    english = course.notebook_path(NOTEBOOK, course.COURSE_ROOT, course.RELEASE_DIR)
    korean = course.translated_path(NOTEBOOK, "ko", course.COURSE_ROOT, course.RELEASE_DIR)
    if not korean.exists():  # tests/test_korean_grading.py skips and says why
        return {}

    def answered(release: Path) -> dict:
        nb = course.fill_in(release, answers(REAL_RERUN))
        at = next(i for i, c in enumerate(nb["cells"]) if c.get("id") == "level1_actions") + 1
        nb["cells"].insert(at, {**nbformat.v4.new_code_cell(SAY_LANGUAGE), "id": "learner-added"})
        return nb

    made: dict[str, dict | Path] = {
        "answered": answered(english),
        "korean answered": answered(korean),
        "release": english,
    }
    for student, files in BOTH_FETCHED.items():
        hand_in(submitted / student, {name: made[what] for name, what in files.items()})
    return {s: 0.0 if s in EXPECTED_STATUS else SAMPLES["rerun_everything"][2] for s in BOTH_FETCHED}


def _strip_solution_and_hidden(source: str) -> str:
    source = re.sub(  # as nbgrader does, at the markers' indentation
        r"(?m)^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION",
        r"\1# YOUR CODE HERE\n\1raise NotImplementedError()",
        source,
        flags=re.S,
    )
    return re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", source, flags=re.S)


def submission(
    source_nb: nbformat.NotebookNode,
    answer: str | dict[str, str],
    *,
    extra_cell: str | None = None,
    delete_tests: bool = False,
    edit_tests: bool = False,
    **_: object,
) -> nbformat.NotebookNode:
    """A learner's notebook: the released cells, ``answer`` in the solution cell, outputs empty."""
    nb = nbformat.reads(nbformat.writes(source_nb), as_version=4)
    cells = []
    last_solution = [
        c.metadata.get("nbgrader", {}).get("grade_id")
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"
    ][-1]
    for cell in nb.cells:
        info = cell.metadata.get("nbgrader", {})
        cell.source = _strip_solution_and_hidden(cell.source)
        gid = info.get("grade_id")
        if info.get("solution"):
            if isinstance(answer, dict):
                cell.source = answer.get(gid, cell.source)
            elif cell.cell_type == "code":
                cell.source = answer
            if extra_cell and gid == last_solution:
                cells.append(cell)
                cell = nbformat.v4.new_code_cell(extra_cell)
        elif info.get("grade") and cell.cell_type == "code":
            if delete_tests:
                continue
            if edit_tests:
                cell.source = "# the tests are too strict\npass"
        cells.append(cell)
    nb.cells = cells
    return nb


def write_class(
    source_nb_path: str | Path,
    out: str | Path,
    *,
    layout: str,
    assignment: str = "reconcile",
    copies: int = 1,
    students: Iterable[str] | None = None,
) -> dict[str, float]:
    """Write the sample class into ``out`` as a ``zip`` of flat files or a ``submitted`` folder.

    Returns the expected score of every student (``copies`` > 1 repeats the honest samples under
    numbered names, for the bench). ``students`` picks some of ``SAMPLES`` (default all);
    ``not_a_notebook`` and ``empty`` are always written. The notebook name is the source notebook's.
    """
    source_nb = nbformat.read(str(source_nb_path), as_version=4)
    nb_name = Path(source_nb_path).name
    files: dict[str, bytes] = {}
    expected: dict[str, float] = {}

    def put(student: str, data: bytes, name: str | None = None) -> None:
        if layout == "zip":
            suffix = Path(name).suffix if name else ".ipynb"
            files[f"{student}{suffix}"] = data
        else:
            files[f"submitted/{student}/{assignment}/{name or nb_name}"] = data

    chosen = SAMPLES if students is None else {s: SAMPLES[s] for s in students}
    for student, (answer, opts, score) in chosen.items():
        for i in range(copies):
            sid = student if copies == 1 else f"{student}_{i:02d}"
            data = opts.get("raw") or nbformat.writes(submission(source_nb, answer, **opts)).encode()
            put(sid, data, opts.get("rename"))
            expected[sid] = score
    put("not_a_notebook", b"%PDF-1.4 this is my homework, printed to PDF\n", "reconcile.pdf")
    expected["not_a_notebook"] = 0
    empty = nbformat.v4.new_notebook()
    empty.metadata["kernelspec"] = source_nb.metadata.get("kernelspec", {})
    put("empty", nbformat.writes(empty).encode())
    expected["empty"] = 0

    out = Path(out)
    if layout == "zip":
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w") as z:
            for name, data in sorted(files.items()):
                z.writestr(name, data)
    else:
        for name, data in files.items():
            p = out / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    return expected
