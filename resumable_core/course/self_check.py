"""``python -m resumable_core check NOTEBOOK``: an exercise's visible tests, run as grading runs them.

The notebook runs whole, top to bottom, as a copy in a temporary folder (the learner's file is
not changed), on a fresh python3 kernel: offline (the scripted Claude answers), each cell under
grading's timeout, going on after an error as nbgrader does. Then every graded test cell is
reported with its name, its points and its whole error message (``nbgrader validate`` cuts them
to about 80 characters), and the report ends with what to do next. Exit code: 0 when every
visible test passes, 1 when one fails, 2 when the argument is not an exercise notebook.

It needs nbformat, nbclient and a python3 Jupyter kernel (the ``[lab]`` extra), not nbgrader,
so it ships in the student kit; the kit's ``make check NB=...`` runs it, and the kit's own tests
execute notebooks with :func:`execute`.

``check --all NOTEBOOK`` (the self-study kit's ``make check NB=... ALL=1``) runs every test cell
whole, the hidden tests included, as grading does: it takes each test cell's source from the
exercise's nbgrader source notebook (``solutions/<name>/<name>.ipynb``, next to the library: the
instructor's repository or the self-study kit; the student kit has neither), matched by grade_id
as ``nbgrader autograde`` matches them, and reports every cell.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resumable_core.course.errors import CourseError
from resumable_core.course.i18n import _
from resumable_core.lab.columns import pad
from resumable_core.lab.commandline import Formatter
from resumable_core.lab.editions import carry_comments
from resumable_core.lab.i18n import N_, SETTING

# nbformat and nbclient are imported where they are used: importing nbformat takes seconds (its
# JSON schema validators), and `python -m resumable_core --help` builds this command's parser.

CELL_TIMEOUT = 60
"""Seconds a cell may run: grading's default (``grade --timeout``; a test keeps the two equal)."""

MEMORY_CAP = 1 << 30
"""Bytes of memory the kernel may hold: grading's default (``Limits.memory``; a test keeps the two equal). Set as
the kernel's ``RLIMIT_DATA`` (its heap and private mappings), not its address space: a kernel maps ~700 MB it
never uses. A cell that passes it gets a MemoryError, and the run ends there, so the kernel's memory is freed."""
OUTPUT_CAP = 16 << 20
"""Bytes of outputs grading keeps of a notebook (``SandboxedExecute.result_cap``; a test keeps the two equal): the
cell whose outputs pass it, and every cell after it, score 0, as after a dead kernel."""
OUTPUT_NEAR = 0.5
"""The share of :data:`OUTPUT_CAP` from which the check warns that the notebook's outputs approach it."""
OUTPUT_MARGIN = 1 << 20
"""Bytes of the cap grading leaves for the notebook's own text (so a notebook is over a little before the cap)."""

EXAMPLE = "exercises/reconcile/reconcile.ipynb"
"""An exercise notebook's path, for the messages that ask for one."""

HIDDEN_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
CODE_STUB, TEXT_STUB = "# YOUR CODE HERE\nraise NotImplementedError()", "YOUR ANSWER HERE"
"""What nbgrader's release (``ClearSolutions``) puts in place of a code and a written solution."""
ANSWER_STUBS = (CODE_STUB.splitlines()[-1], TEXT_STUB)
"""What nbgrader's release leaves in an answer cell; an answer cell still holding one is not written."""

PASSED, FAILED, HIDDEN, OPTIONAL = N_("passed"), N_("FAILED"), N_("hidden"), N_("optional")
STATUS_COLUMNS = 7
"""Terminal columns of the report's status column (a translated status is padded by its display width)."""
OPTIONAL_PREFIX = "bonus_"
"""A test cell whose grade_id starts with this is an optional bonus; its answers are the answer cells
since the test cell before it. Left as released, it is "optional, not attempted", never a failure."""
KERNEL_DIED = N_(
    "{path}: the kernel died while running the notebook (os._exit, a crash or out of memory),\n"
    "so no test after that point ran; grading would score them 0.\n"
    "Next: find the cell that ends the process, fix it, and run\n  {command}\nagain."
)
MEMORY_OVER = N_(
    "{path}: cell {index} ({label}) used more than {megabytes} MB, the memory grading gives a notebook:\n"
    "{error}\n"
    "so the run ended there and no test after it ran; grading would score them 0.\n"
    "Next: keep less in memory in that cell (a loop that appends without end?), and run\n  {command}\nagain."
)

# The library this command runs from: the kernel imports the same one (the student kit's own copy).
LIBRARY_ROOT = Path(__file__).resolve().parents[2]
SOURCE_NOTEBOOKS = LIBRARY_ROOT / "solutions"
"""Where ``--all`` finds each exercise's nbgrader source, whose test cells hold the hidden tests."""
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class MemoryCapHit(CourseError):
    """A cell passed :data:`MEMORY_CAP` (it raised MemoryError): the run ends. Carries the ``cell`` and its ``index``."""

    def __init__(self, cell: Any, index: int) -> None:
        self.cell = cell
        self.index = index
        super().__init__(f"cell {index} passed the memory cap")


def _stop_at_memory_error(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
    """nbclient's ``on_cell_error`` hook: end the run at a cell that ran out of memory."""
    if execute_reply["content"].get("ename") == "MemoryError":
        raise MemoryCapHit(cell, cell_index)


class SelfCheckError(CourseError):
    """The argument is not an exercise notebook. Carries the ``path`` and a one-line ``reason`` naming the fix."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


# -- running a notebook --------------------------------------------------------------------


def kernel_env(home: Path) -> dict[str, str]:
    """The kernel's environment: offline (the scripted Claude), quiet, no user profile, this library first."""
    # The language setting goes through: the checks' messages are in the learner's language.
    env = {k: v for k, v in os.environ.items() if k == SETTING or not k.startswith(("RESUMABLE_", "ANTHROPIC_"))}
    env.update(
        JUPYTER_PLATFORM_DIRS="1",  # jupyter_core's own deprecation warning otherwise
        PYDEVD_DISABLE_FILE_VALIDATION="1",  # the debugger's "frozen modules" note otherwise
        IPYTHONDIR=str(home / "ipython"),  # no user profile, no startup files
        PYTHONPATH=os.pathsep.join(p for p in (str(LIBRARY_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    env.pop("MPLBACKEND", None)  # the kernel's inline backend, as in JupyterLab
    return env


def warm_matplotlib_cache() -> None:
    """Build matplotlib's font cache here, so a notebook's first plot does not log about it on stderr."""
    import matplotlib.font_manager  # noqa: F401  (importing it builds the cache)


def execute(
    notebook: Path,
    workdir: Path,
    *,
    timeout: int = CELL_TIMEOUT,
    allow_errors: bool = False,
    tests: dict[str, str] | None = None,
    memory: int | None = None,
) -> Any:
    """Execute a copy of ``notebook`` in ``workdir`` on a fresh python3 kernel; return the executed notebook.

    With ``allow_errors`` the run goes on after a cell's error, and a cell past ``timeout`` is
    interrupted and the run goes on, as nbgrader's autograde does. ``tests`` (grade_id -> source)
    replaces the source of those test cells first, as autograde puts the hidden tests back. With
    ``memory`` (bytes) the kernel may hold no more (:data:`MEMORY_CAP`), and the first cell that raises
    MemoryError ends the run with :class:`MemoryCapHit`.
    """
    import nbformat
    from nbclient import NotebookClient

    copy = workdir / notebook.name
    shutil.copy(notebook, copy)
    nb = nbformat.read(copy, as_version=4)
    for cell in graded_cells(nb):
        whole = (tests or {}).get(_nbgrader(cell).get("grade_id", ""))
        if whole is not None:  # the released cell's comments kept: they are in the notebook's language
            cell.source = carry_comments(whole, cell.source)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=timeout,
        allow_errors=allow_errors,
        interrupt_on_timeout=allow_errors,
        resources={"metadata": {"path": str(workdir)}},
        on_cell_error=_stop_at_memory_error if memory else None,
    )
    # The kernel process's own stderr (ipykernel's startup notes) is not a cell's: cells' stderr
    # comes back in their outputs, where the tests look for it.
    # The kernel learns its notebook's own path, as Jupyter tells it: a notebook in a ko/ folder speaks Korean.
    env = {**kernel_env(workdir), "JPY_SESSION_NAME": str(notebook.resolve())}
    limit = {"preexec_fn": functools.partial(_cap_memory, memory)} if memory else {}
    client.execute(env=env, cwd=str(workdir), stderr=subprocess.DEVNULL, **limit)
    return nb


def _cap_memory(memory: int) -> None:
    """In the kernel's process, before it starts: cap its memory at ``memory`` bytes."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))


# -- reading an executed notebook ----------------------------------------------------------


def _nbgrader(cell: Any) -> dict[str, Any]:
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def graded_cells(nb: Any) -> list[Any]:
    """The exercise's test cells (nbgrader's ``grade`` cells that are not answers)."""
    return [
        cell
        for cell in nb.cells
        if cell.cell_type == "code" and _nbgrader(cell).get("grade") and not _nbgrader(cell).get("solution")
    ]


def written_answers(nb: Any) -> list[Any]:
    """The answers graded by hand: nbgrader's graded answer cells in markdown."""
    return [
        cell
        for cell in nb.cells
        if cell.cell_type == "markdown" and _nbgrader(cell).get("grade") and _nbgrader(cell).get("solution")
    ]


def has_code(cell: Any) -> bool:
    """Whether a cell holds more than comments (a hidden test's cell is only its comment here)."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in cell.source.splitlines())


def error_of(cell: Any) -> Any | None:
    """The cell's error output, or None if it ran clean."""
    return next((out for out in cell.get("outputs", []) if out.output_type == "error"), None)


def stderr_of(cell: Any) -> str:
    """What the cell wrote to stderr (nbgrader scores a test cell that writes there 0)."""
    return "".join(out.text for out in cell.get("outputs", []) if out.output_type == "stream" and out.name == "stderr")


def is_answer(cell: Any) -> bool:
    """An answer cell: nbgrader's solution cell, where the learner writes."""
    return bool(_nbgrader(cell).get("solution"))


def released_answer(cell: Any) -> str:
    """An answer cell of the source notebook as the release leaves it, as nbgrader's ``ClearSolutions`` does:
    each ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` region becomes the stub, indented as its first line,
    and a cell with no region becomes the stub whole."""
    stub = (CODE_STUB if cell.cell_type == "code" else TEXT_STUB).split("\n")
    lines: list[str] = []
    inside = replaced = False
    for line in cell.source.split("\n"):
        if "BEGIN SOLUTION" in line:
            inside = replaced = True
            indent = line[: len(line) - len(line.lstrip())]
            lines += [indent + s for s in stub]
        elif "END SOLUTION" in line:
            inside = False
        elif not inside:
            lines.append(line)
    return "\n".join(lines) if replaced else "\n".join(stub)


def is_blank(cell: Any) -> bool:
    """An answer cell still as released: it holds nbgrader's stub."""
    return any(stub in cell.source for stub in ANSWER_STUBS)


def _what_it_checks(cell: Any) -> str:
    """The test cell's opening comment, which says what it checks."""
    lines = []
    for line in cell.source.splitlines():
        if not line.lstrip().startswith("#"):
            break
        lines.append(line.lstrip("# ").strip())
    return " ".join(lines)


def _where(error: Any) -> list[str]:
    """The last frame of an error's traceback that is a notebook cell: where the learner's code raised."""
    frames = [ANSI.sub("", entry) for entry in error.get("traceback", [])]
    cell_frames = [f for f in frames if f.lstrip().startswith("Cell In[")]
    return cell_frames[-1].rstrip().splitlines() if cell_frames else []


def _message(error: Any) -> list[str]:
    """An error output as lines: ``Name: the whole message``, then where it was raised unless it is a check's."""
    if error.ename in ("CellTimeoutError", "KeyboardInterrupt"):
        return [_("interrupted: the cell ran past the timeout, as grading would stop it (an endless loop?)")]
    text = f"{error.ename}: {error.evalue}".rstrip(": ") if error.evalue else error.ename
    lines = text.splitlines()
    if error.ename == "NotImplementedError":
        lines.append(_("(an answer cell still raises NotImplementedError: write your code there)"))
    if error.ename not in ("CheckFailed", "FailedAfterRestart", "AssertionError"):
        lines += _where(error)
    return lines


@dataclass(frozen=True)
class TestResult:
    """One graded test cell as the check saw it."""

    name: str
    """Its nbgrader grade_id."""
    points: float
    status: str
    """``passed``, ``FAILED`` or ``hidden`` (its tests are added at grading)."""
    checks: str
    """What it checks: its opening comment."""
    message: tuple[str, ...] = ()
    """Why it failed: the whole error message, one item a line."""


def untried_bonuses(nb: Any) -> set[str]:
    """The grade_ids of the optional test cells whose own answer cells all still hold nbgrader's stub."""
    untried: set[str] = set()
    answers: list[Any] = []
    tests = {id(cell) for cell in graded_cells(nb)}
    for cell in nb.cells:
        if id(cell) in tests:
            grade_id = str(_nbgrader(cell).get("grade_id", ""))
            if grade_id.startswith(OPTIONAL_PREFIX) and answers and all(is_blank(a) for a in answers):
                untried.add(grade_id)
            answers = []
        elif cell.cell_type == "code" and is_answer(cell):
            answers.append(cell)
    return untried


def result_of(cell: Any) -> TestResult:
    """The test cell's result: hidden when it holds only comments, failed on an error or stderr."""
    grade = _nbgrader(cell)
    name, points, checks = grade.get("grade_id", "?"), grade.get("points", 0), _what_it_checks(cell)
    if not has_code(cell):
        return TestResult(name, points, HIDDEN, checks)
    error, stderr = error_of(cell), stderr_of(cell)
    if error is not None:
        return TestResult(name, points, FAILED, checks, tuple(_message(error)))
    if stderr:
        lines = [_("wrote to stderr, and grading scores a test cell that does 0:"), *stderr.rstrip().splitlines()]
        return TestResult(name, points, FAILED, checks, tuple(lines))
    return TestResult(name, points, PASSED, checks)


SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
"""Errors Python raises before a cell runs at all: whatever the cell defines is missing for every test after it."""


def syntax_errors(nb: Any) -> list[str]:
    """The answer cells (and cells the learner added) that do not parse, each with where and why."""
    out = []
    tests = {id(cell) for cell in graded_cells(nb)}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or id(cell) in tests:
            continue
        error = error_of(cell)
        if error is not None and error.ename in SYNTAX_ERRORS:
            out.append(
                _("cell {index} ({label}): ").format(index=index, label=_label(cell)) + "\n      ".join(_message(error))
            )
    return out


def other_errors(nb: Any) -> Iterator[str]:
    """Errors in cells that are not tests (answers, setup, cells the learner added): a test after them may fail for them."""
    tests = {id(cell) for cell in graded_cells(nb)}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or id(cell) in tests:
            continue
        error = error_of(cell)
        if error is not None:
            yield _("cell {index} ({label}): ").format(index=index, label=_label(cell)) + "\n      ".join(
                _message(error)
            )


def _label(cell: Any) -> str:
    """How the report names a cell: an answer, a cell the learner added, or its grade_id."""
    grade_id = _nbgrader(cell).get("grade_id")
    if grade_id is None:
        return _("a cell you added")
    return _("answer {grade_id}").format(grade_id=grade_id) if is_answer(cell) else str(grade_id)


# -- the report ----------------------------------------------------------------------------


def _points(value: float) -> str:
    return _("{value:g} pt").format(value=value)


def _result_lines(result: TestResult) -> list[str]:
    head = f"  {pad(_(result.status), STATUS_COLUMNS)} {result.name} ({_points(result.points)})"
    if result.status == HIDDEN:
        return [_("{head}: added and run when your instructor grades").format(head=head)]
    if result.status == OPTIONAL:
        return [
            _("{head}: optional, not attempted; answering it can add {points}: {checks}").format(
                head=head, points=_points(result.points), checks=result.checks
            )
        ]
    lines = [f"{head}: {result.checks}" if result.checks else head]
    return lines + [" " * (STATUS_COLUMNS + 3) + line for line in result.message]  # under the test's name


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def output_warning(nb: Any, command: str) -> tuple[list[str], bool]:
    """Lines warning that the executed notebook's outputs approach or pass grading's cap ([] when far under it),
    and whether they pass it.

    Counted as grading counts them: each code cell's outputs as JSON, in order; the first cell that
    takes the total past the cap is named, since grading scores it and every cell after it 0.
    """
    import json

    total, over_at = 0, None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        total += len(json.dumps(cell.get("outputs", [])))
        if over_at is None and total > OUTPUT_CAP - OUTPUT_MARGIN:
            over_at = index
    cap = f"{OUTPUT_CAP / 2**20:g} MiB"
    if over_at is not None:
        over = _(
            "Output: the cells print {size}, over the {cap} of output grading keeps. Grading stops at\n"
            "cell {index}, the one that passes it: that cell and every cell after it would score 0.\n"
            "Next: print less (a loop's progress every few steps, not every step), or clear a cell's output as it\n"
            "goes (IPython.display.clear_output), and run\n  {command}\nagain."
        )
        return over.format(size=_mib(total), cap=cap, index=over_at, command=command).splitlines(), True
    if total >= OUTPUT_CAP * OUTPUT_NEAR:
        near = _(
            "Output: the cells print {size}, near the {cap} of output grading keeps (the cell that passes\n"
            "it and every cell after it score 0): print less before you submit."
        )
        return near.format(size=_mib(total), cap=cap).splitlines(), False
    return [], False


def report(path: Path, nb: Any, command: str, *, every: bool = False) -> tuple[str, bool]:
    """The report of an executed exercise, and whether every visible test passed (``every``: every test, hidden too).

    Outputs over grading's cap (:func:`output_warning`) count as a failure: grading would score the
    cells from the one that passes it 0.
    """
    untried = untried_bonuses(nb)
    results = [
        TestResult(r.name, r.points, OPTIONAL, r.checks) if r.name in untried else r
        for r in map(result_of, graded_cells(nb))
    ]
    visible = [r for r in results if r.status not in (HIDDEN, OPTIONAL)]
    failed = [r for r in visible if r.status == FAILED]
    if every:
        title = _(
            "{path}: every test, the hidden ones included, run top to bottom on a fresh kernel as grading runs them"
        )
    else:
        title = _("{path}: the visible tests, run top to bottom on a fresh kernel as grading runs them")
    lines = [title.format(path=path), ""]
    broken = syntax_errors(nb)
    if broken:  # first: every test after such a cell fails with a NameError that says nothing of why
        lines += [_("Fix this first: Python cannot read this cell, so nothing it defines exists for the tests:")]
        lines += [f"  {error}" for error in broken] + [""]
    for result in results:
        lines += _result_lines(result)
    errors = list(other_errors(nb))
    if errors:
        lines += ["", _("Cells that raised outside the tests (grading runs them too; fix these first):")]
        lines += [f"  {error}" for error in errors]
    passed_points = sum(r.points for r in visible if r.status == PASSED)
    tally = (
        _("{passed} of {count} tests (hidden ones included) pass ({points} of {total}).")
        if every
        else _("{passed} of {count} visible tests pass ({points} of {total}).")
    )
    total = _points(sum(r.points for r in visible))
    lines += [
        "",
        tally.format(passed=len(visible) - len(failed), count=len(visible), points=_points(passed_points), total=total),
    ]
    flood, over = output_warning(nb, command)
    if over:  # graded, the tests after the flood score 0: no "submit"
        return "\n".join([*lines, "", *flood]), False
    lines += next_steps(path, nb, results, command, every=every)
    if flood:
        lines += ["", *flood]
    return "\n".join(lines), not failed


def next_steps(path: Path, nb: Any, results: list[TestResult], command: str, *, every: bool = False) -> list[str]:
    """What to do now: fix and re-run, or submit; which answers are graded by hand; what runs at grading."""
    failed = any(r.status == FAILED for r in results)
    if failed:
        steps = (
            _(
                "Next: fix the answer cells the FAILED tests above check, save the notebook, and run\n"
                "  {command}\n"
                "again. Each message above is whole, as the grader's feedback will show it."
            )
            .format(command=command)
            .splitlines()
        )
    elif every:
        steps = [_("Next: every test passes, the hidden ones too; compare your answers with the worked solutions.")]
    else:
        steps = [_("Next: every visible test passes; submit {path} as your instructor asks.").format(path=path)]
    hidden = [r for r in results if r.status == HIDDEN]
    if hidden:
        hidden_points = _points(sum(r.points for r in hidden))
        steps.append(
            _("Hidden tests ({points}) run only at grading: passing the visible ones is not enough.").format(
                points=hidden_points
            )
        )
    for cell in written_answers(nb):
        grade = _nbgrader(cell)
        points = _points(grade.get("points", 0))
        written = (
            _("Written answer {grade_id} (NOT WRITTEN YET, {points}): graded by hand.")
            if is_blank(cell)
            else _("Written answer {grade_id} ({points}): graded by hand.")
        )
        steps.append(written.format(grade_id=grade.get("grade_id"), points=points))
    return steps


# -- the command ---------------------------------------------------------------------------


def read_exercise(path: Path) -> Any:
    """The notebook at ``path``, if it is an exercise; else a :class:`SelfCheckError` naming the fix."""
    import nbformat

    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.ipynb"))
        hint = (
            _("give the notebook in it: {notebook}").format(notebook=path / inside[0])
            if inside
            else _("give an exercise notebook, e.g. {example}").format(example=EXAMPLE)
        )
        raise SelfCheckError(path, _("is a folder; {hint}").format(hint=hint))
    if not path.exists():
        raise SelfCheckError(
            path, _("no such file; give the path of an exercise notebook, e.g. {example}").format(example=EXAMPLE)
        )
    try:
        nb = nbformat.read(path, as_version=4)
    # nbformat's errors on what is not a notebook: ValueError (not JSON, not UTF-8), ValidationError,
    # and TypeError, KeyError or AttributeError from converting JSON of another shape
    except (ValueError, TypeError, KeyError, AttributeError, nbformat.ValidationError, OSError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0][:120]
        raise SelfCheckError(
            path,
            _("is not a Jupyter notebook ({error}); give an .ipynb file, e.g. {example}").format(
                error=first, example=EXAMPLE
            ),
        ) from None
    if not graded_cells(nb):
        raise SelfCheckError(
            path,
            _("has no graded test cells, so nothing to check; give an exercise, e.g. {example}").format(
                example=EXAMPLE
            ),
        )
    return nb


COMMAND_VARIABLE = "RESUMABLE_CHECK_COMMAND"
"""Set by the kit's ``make check`` to the command it was run as (``{path}`` stands for the notebook)."""


def source_notebook(path: Path) -> Path:
    """The exercise's nbgrader source, for ``--all``; a :class:`SelfCheckError` when this library has none.

    A translated exercise's own source (``solutions/<a>/<lang>/``) where there is one: its comments are the learner's language.
    """
    import json

    source = SOURCE_NOTEBOOKS / path.stem / path.name
    lang = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("resumable", {}).get("lang")
    if isinstance(lang, str) and lang.isalpha() and (source.parent / lang / path.name).exists():
        return source.parent / lang / path.name
    if not source.exists():
        raise SelfCheckError(
            path,
            _(
                "--all runs the hidden tests, and this kit does not hold them (no {source}); "
                "they are in the self-study kit (make self-study-kit in the course's repository)"
            ).format(source=source.relative_to(LIBRARY_ROOT)),
        )
    return source


def every_test(path: Path) -> dict[str, str]:
    """Each test cell's whole source (hidden tests included) from the exercise's source notebook, by grade_id."""
    import nbformat

    source = nbformat.read(source_notebook(path), as_version=4)
    return {_nbgrader(cell)["grade_id"]: _without_markers(cell.source) for cell in graded_cells(source)}


def _without_markers(source: str) -> str:
    """A test cell's source without nbgrader's hidden-test marker lines, which are nbgrader's, not the learner's."""
    return "".join(line for line in source.splitlines(keepends=True) if line.strip() not in HIDDEN_MARKERS)


def check_command(path: Path, *, every: bool = False) -> str:
    """The command that runs this check again, as the learner can type it here.

    ``make check NB=...`` when that is how it was run; else this interpreter as a path from the
    current folder (``.venv/bin/python``), or ``python`` when it is not under it.
    """
    given = os.environ.get(COMMAND_VARIABLE)
    if given:
        return given.replace("{path}", str(path))
    python = Path(sys.executable)
    try:
        shown = str(python.relative_to(Path.cwd()))
    except ValueError:
        shown = "python"
    return f"{shown} -m resumable_core check {'--all ' if every else ''}{path}"


def run_check(
    path: Path,
    *,
    timeout: int = CELL_TIMEOUT,
    command: str | None = None,
    every: bool = False,
    memory: int = MEMORY_CAP,
) -> tuple[str, bool]:
    """Run the exercise at ``path`` whole on a fresh kernel; its report and whether every visible test passed.

    ``every`` (``--all``): every test cell whole, the hidden tests included, and whether every one passed.
    ``memory``: bytes the kernel may hold; the cell that passes it is named and the run ends there.
    """
    read_exercise(path)
    tests = every_test(path) if every else None
    command = command or check_command(path, every=every)
    from nbclient.exceptions import DeadKernelError

    warm_matplotlib_cache()
    with tempfile.TemporaryDirectory(prefix="resumable-check-") as tmp:
        try:
            nb = execute(path.resolve(), Path(tmp), timeout=timeout, allow_errors=True, tests=tests, memory=memory)
        except DeadKernelError:
            return _(KERNEL_DIED).format(path=path, command=command), False
        except MemoryCapHit as hit:
            error = "\n".join("  " + line for line in _message(error_of(hit.cell)))
            over = _(MEMORY_OVER).format(
                path=path, index=hit.index, label=_label(hit.cell), megabytes=memory >> 20, error=error, command=command
            )
            return over, False
    return report(path, nb, command, every=every)


def main(args: argparse.Namespace) -> int:
    """Run ``check``: 0 when every visible test passes (``--all``: every test), 1 when one fails, 2 on a bad argument."""
    try:
        text, passed = run_check(args.notebook, timeout=args.timeout, every=args.all)
    except SelfCheckError as e:
        print(f"check: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0 if passed else 1


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``check`` to ``python -m resumable_core``'s subcommands (``subparsers`` from ``add_subparsers``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help=_("run an exercise's visible tests on a fresh kernel, as grading will, with whole messages"),
        description=_(
            "Run an exercise notebook top to bottom on a fresh kernel, as grading will (offline, each\n"
            "cell under a timeout; your file is not changed). Print every test cell's name, points and\n"
            "whole error message, then what to do next. Exit code: 0 when every visible test passes,\n"
            "1 when one fails, 2 when NOTEBOOK is not an exercise notebook."
        ),
        formatter_class=Formatter,
    )
    p.add_argument(
        "notebook",
        type=Path,
        metavar="NOTEBOOK",
        help=_("the exercise, e.g. {example}").format(example=EXAMPLE),
    )
    p.add_argument(
        "--all",
        action="store_true",
        help=_("run the hidden tests too, every cell whole as grading runs it (needs the self-study kit)"),
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=CELL_TIMEOUT,
        help=_("seconds a cell may run before it is interrupted, as at grading (default: {default})").format(
            default=CELL_TIMEOUT
        ),
    )
    p.set_defaults(func=main)
    return p
