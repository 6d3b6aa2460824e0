"""The lesson notebooks: each executes on a fresh kernel, cleanly, and is committed without outputs.

Run as a script to time each lesson or to strip outputs before committing:

    .venv/bin/python tests/test_lessons.py            # execute every lesson, print its time
    .venv/bin/python tests/test_lessons.py --strip    # strip outputs from the committed notebooks
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from english_prose import english_runs

# One notebook runner for the repository and the student kit (which ships it as its own tests).
from resumable_core.course.kit.tests import run_notebook
from resumable_core.course.kit.tests.run_notebook import problems, warm_matplotlib_cache
from resumable_core.lab import i18n

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
NOTEBOOKS = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
KOREAN = sorted((LESSONS / "ko").glob("[0-9][0-9]_*.ipynb"))
"""The Korean edition (its drift from the English is tests/test_editions.py's); it runs with RESUMABLE_LANG=ko."""
EVERY_EDITION = [p.relative_to(LESSONS).as_posix() for p in NOTEBOOKS + KOREAN]
EXERCISES = {
    "01_skeleton_resume.ipynb": "../exercises/resume_skeleton/resume_skeleton.ipynb",
    "02_dangling_calls.ipynb": "../exercises/reconcile/reconcile.ipynb",
    "03_send_email_postmortem.ipynb": "../exercises/postmortem/postmortem.ipynb",
}


def execute(notebook: Path, workdir: Path) -> tuple[nbformat.NotebookNode, float]:
    """Execute a copy of ``notebook`` in ``workdir`` with the shared runner; return it and the seconds taken."""
    start = time.perf_counter()
    nb = run_notebook.execute(notebook, workdir)
    return nb, time.perf_counter() - start


Executed = Callable[[str], tuple[nbformat.NotebookNode, float]]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Executed:
    """Runs a lesson on first use (in its own fresh temp folder) and shares the result with the tests below.

    Lazy, so ``-k 01_skeleton`` executes lesson 1 alone.
    """
    warm_matplotlib_cache()
    results: dict[str, tuple[nbformat.NotebookNode, float]] = {}

    def run(name: str) -> tuple[nbformat.NotebookNode, float]:
        if name not in results:
            lang = "ko" if name.startswith("ko/") else "en"
            before = os.environ.get("RESUMABLE_LANG")
            os.environ["RESUMABLE_LANG"] = lang  # the kernel inherits it
            try:
                results[name] = execute(LESSONS / name, tmp_path_factory.mktemp(f"{lang}-{Path(name).stem}"))
            finally:
                if before is None:
                    del os.environ["RESUMABLE_LANG"]
                else:
                    os.environ["RESUMABLE_LANG"] = before
        return results[name]

    return run


def test_lessons_exist() -> None:
    """The kit ships the three core lessons and the optional fourth."""
    names = [p.name for p in NOTEBOOKS]
    assert names[:3] == ["01_skeleton_resume.ipynb", "02_dangling_calls.ipynb", "03_send_email_postmortem.ipynb"]
    assert "04_production_resume.ipynb" in names


@pytest.mark.slow
@pytest.mark.parametrize("name", EVERY_EDITION)
def test_lesson_runs_clean(executed: Executed, name: str) -> None:
    """A lesson, English or Korean, executes top to bottom on a fresh kernel with no error and nothing on stderr."""
    nb, seconds = executed(name)
    print(f"{name}: {seconds:.1f} s")
    assert problems(nb) == []
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert all(c.execution_count is not None for c in code), "some code cells did not run"


@pytest.mark.slow
@pytest.mark.parametrize("name", EVERY_EDITION)
def test_checks_passed(executed: Executed, name: str) -> None:
    """Every check cell (the English edition's "# Check" cells, by id) ran its asserts and said, in its language, that it passed."""
    nb, _ = executed(name)
    english = nbformat.read(LESSONS / Path(name).name, as_version=4)
    ids = {c.id for c in english.cells if c.cell_type == "code" and c.source.lstrip().startswith("# Check")}
    checks = [c for c in nb.cells if c.get("id") in ids]
    assert len(checks) >= 4, "each lesson ends its sections with check cells"
    passed = i18n.LESSONS.gettext("check passed", "ko" if name.startswith("ko/") else "en")
    for c in checks:
        assert "assert " in c.source
        text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        assert passed in text, c.source.splitlines()[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path: Path) -> None:
    """Committed notebooks carry no outputs and no execution counts."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_objectives_and_exercise_link(path: Path) -> None:
    """A lesson states its learning objectives first and links to the exercise that grades it."""
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and "Learning objectives" in first.source
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    if path.name in EXERCISES:
        assert f"]({EXERCISES[path.name]})" in text
    assert "RESUMABLE_LIVE=1" in text and "ANTHROPIC_API_KEY" in text


def unexplained_asserts(nb: nbformat.NotebookNode) -> list[str]:
    """The first line of every ``assert`` without a message in a notebook's code cells (magics skipped)."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assert) and node.msg is None:
                found.append(ast.get_source_segment(source, node) or f"line {node.lineno}")
    return [a.splitlines()[0] for a in found]


def test_the_assert_finder_sees_a_bare_assert() -> None:
    """unexplained_asserts flags an assert with no message and passes one that has a message."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("%matplotlib inline\nassert x == 1\nassert y, 'y is missing: see the cell above'")
        ]
    )
    assert unexplained_asserts(nb) == ["assert x == 1"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_assert_says_what_went_wrong(path: Path) -> None:
    """Every assert in a lesson carries a message saying what went wrong and where to look."""
    assert unexplained_asserts(nbformat.read(path, as_version=4)) == []


def markdown_of(path: Path) -> list[str]:
    """The sources of a notebook's markdown cells, in order."""
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_section_has_a_time_estimate(path: Path) -> None:
    """Each numbered section's heading says how long it takes ("## 3. … *(about 15 minutes)*")."""
    headings = [line for text in markdown_of(path) for line in text.splitlines() if re.match(r"## \d+\.", line)]
    assert headings, "a lesson is made of numbered sections"
    assert [h for h in headings if not re.search(r"\d+ ?min", h)] == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_lesson_ends_with_five_review_questions(path: Path) -> None:
    """A "Review questions" cell holds five numbered questions, and their answers fold away in <details>."""
    review = [text for text in markdown_of(path) if re.search(r"^#+ Review questions", text, re.M)]
    assert len(review) == 1, "one review-questions cell per lesson"
    questions, _, answers = review[0].partition("<details>")
    assert len(re.findall(r"^\d\. ", questions, re.M)) == 5, "five numbered questions before the answers"
    assert "</details>" in answers and len(re.findall(r"^\d\. ", answers, re.M)) == 5, "five answers, folded"


def checked_in(name: str, source: str) -> bool:
    """``source`` passes the variable ``name`` to ``lab.reveal`` or ``lab.formative_check``."""
    call = re.search(r"lab\.(reveal|formative_check)\(", source)
    return call is not None and re.search(rf"\b{name}\b", source[call.end() :]) is not None


def predictions(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(variable, problem or "") for each ``MY_… = None`` prediction cell of a notebook.

    A later code cell must check the variable with ``lab.reveal`` (or ``lab.formative_check``),
    and a folded hint and answer must sit in the markdown between the question and that check.
    """
    cells = nb.cells
    found = []
    for i, cell in enumerate(cells):
        match = re.search(r"^(MY_\w+) = None", cell.source, re.M) if cell.cell_type == "code" else None
        if match is None:
            continue
        name = match.group(1)
        check = next((j for j in range(i, len(cells)) if checked_in(name, cells[j].source)), None)
        if check is None:
            found.append((name, "never checked with lab.reveal or lab.formative_check"))
            continue
        if "formative_check" in cells[check].source:
            found.append((name, ""))  # a formative check explains itself
            continue
        start = max((j for j in range(i) if cells[j].cell_type == "code"), default=-1) + 1
        notes = "".join(c.source for c in cells[start:check] if c.cell_type == "markdown")
        folded = all(k in notes for k in ("<summary>Hint</summary>", "<summary>Answer</summary>"))
        found.append((name, "" if folded else "no folded hint and answer before its check"))
    return found


def test_core_lessons_ask_for_predictions_before_crashes() -> None:
    """Lessons 1-3 ask for at least six predictions, each checked by the next cell, with a folded hint and answer."""
    total = 0
    for path in NOTEBOOKS[:3]:
        found = predictions(nbformat.read(path, as_version=4))
        assert [f for f in found if f[1]] == [], path.name
        assert len(found) >= 2, f"{path.name}: at least two predictions"
        total += len(found)
    assert total >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_kit_speaks_of_the_source_course(path: Path) -> None:
    """No lesson text calls the course it adapts "the seed course": the kit speaks of "the source course"."""
    text = "\n".join(markdown_of(path))
    assert re.findall(r".{0,40}\bseed\b.{0,40}", text, re.I) == []


def test_readme_indexes_every_lesson() -> None:
    """lessons/README.md links every lesson notebook, and every link in it points at a lesson that exists."""
    readme = (LESSONS / "README.md").read_text()
    links = set(re.findall(r"\]\(([^)#]+\.ipynb)\)", readme))
    lesson_links = {link for link in links if not link.startswith("../")}
    assert lesson_links == {p.name for p in NOTEBOOKS}


def test_the_korean_readme_indexes_every_korean_lesson() -> None:
    """lessons/ko/README.md links every Korean lesson, as the English README does the English ones."""
    readme = (LESSONS / "ko" / "README.md").read_text(encoding="utf-8")
    links = set(re.findall(r"\]\(([^)#]+\.ipynb)\)", readme))
    assert {link for link in links if not link.startswith("../")} == {p.name for p in KOREAN}


def test_relative_links_resolve() -> None:
    """Every relative link in the lessons, English and Korean, their READMEs and glossaries points at a file that exists."""
    sources = {
        path: path.read_text(encoding="utf-8")
        for path in (
            LESSONS / "README.md",
            LESSONS / "ko" / "README.md",
            LESSONS / "GLOSSARY.md",
            LESSONS / "ko" / "GLOSSARY.md",
        )
    }
    for p in NOTEBOOKS + KOREAN:
        nb = nbformat.read(p, as_version=4)
        sources[p] = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    broken = []
    for where, text in sources.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (where.parent / target.split("#")[0]).exists():
                broken.append(f"{where.relative_to(LESSONS)}: {target}")
    assert broken == []


def strip_outputs(path: Path) -> bool:
    """Remove outputs, execution counts and run metadata from a notebook; True if it changed."""
    before = path.read_text()
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    after = nbformat.writes(nb) + "\n"
    path.write_text(after)
    return after != before


def main(argv: list[str]) -> int:
    """Time each lesson (default) or strip outputs (--strip)."""
    if "--strip" in argv:
        for p in NOTEBOOKS:
            print(f"{p.name}: {'stripped' if strip_outputs(p) else 'already clean'}")
        return 0
    warm_matplotlib_cache()
    status = 0
    for p in NOTEBOOKS:
        with tempfile.TemporaryDirectory(prefix=f"{p.stem}-") as tmp:
            nb, seconds = execute(p, Path(tmp))
        bad = problems(nb)
        print(f"{p.name:34} {seconds:6.1f} s  {'ok' if not bad else 'PROBLEMS'}")
        for line in bad:
            print("   ", line)
        status |= bool(bad)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def test_every_readme_lesson_link_and_check_pointer_follows_the_registrys_lesson_order() -> None:
    """Each assignment comes after the lesson ``REGISTRY`` says (``after_lesson``): so say the READMEs (both
    languages, the kits' too) and that lesson's links, and no check of it points to a later lesson."""
    from resumable_core.course.assignments import REGISTRY

    after = {a.name: a.after_lesson for a in REGISTRY.values()}
    lessons = range(1, len(NOTEBOOKS) + 1)
    due = {n: {name for name, k in after.items() if k == n} for n in lessons}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"Work through lessons 1–{len(NOTEBOOKS)} in order;" in readme
    assert {name: int(n) for name, n in re.findall(r"^\| \d `(\w+)` \| lesson (\d) \|", readme, re.M)} == after
    kit = ROOT / "resumable_core" / "course" / "kit"
    tables = [LESSONS / "README.md", LESSONS / "ko" / "README.md", *kit.glob("README*.md"), *kit.glob("*/README*.md")]
    for path in tables:
        rows = dict(re.findall(r"^\| (\d) \| .* \| ([^|]*) \|$", path.read_text(encoding="utf-8"), re.M))
        assert {n: set(re.findall(r"exercises/(\w+)/", rows[str(n)])) for n in lessons} == due, path
    for path in NOTEBOOKS + KOREAN:
        first = nbformat.read(path, as_version=4).cells[0].source
        n = int(path.name[:2])
        edition = "ko/" if path in KOREAN else ""  # a Korean lesson links the Korean exercise
        assert all(f"exercises/{name}/{edition}{name}.ipynb)" in first for name in due[n]), path
    course = ROOT / "resumable_core" / "course"
    for name, n in after.items():
        for module in (course / "checks" / f"{name}.py", course / "hidden" / f"{name}.py"):
            later = [int(k) for k in re.findall(r"\blesson (\d)", module.read_text(encoding="utf-8")) if int(k) > n]
            assert later == [], f"{module.relative_to(ROOT)} points to lesson {later}, after which {name} comes"


@pytest.mark.slow
@pytest.mark.parametrize("name", [p.relative_to(LESSONS).as_posix() for p in KOREAN])
def test_a_korean_lessons_outputs_hold_no_english_prose(executed: Executed, name: str) -> None:
    """What a Korean lesson prints and show (text outputs) holds no run of English prose: source, the model's
    and the API's words are shown as code or quoted data (``lab.verbatim``, ``repr``)."""
    nb, _ = executed(name)
    shown = [
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    ]
    assert [run for text in shown for run in english_runs(text)] == []
