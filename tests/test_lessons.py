"""The lesson notebooks: each executes on a fresh kernel, cleanly, and is committed without outputs.

Run as a script to time each lesson or to strip outputs before committing:

    .venv/bin/python tests/test_lessons.py            # execute every lesson, print its time
    .venv/bin/python tests/test_lessons.py --strip    # strip outputs from the committed notebooks
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

# One notebook runner for the repository and the student kit (which ships it as its own tests).
from resumable_core.course.kit.tests.run_notebook import CELL_TIMEOUT, kernel_env, problems, warm_matplotlib_cache

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
NOTEBOOKS = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
EXERCISES = {
    "01_skeleton_resume.ipynb": "../exercises/resume_skeleton/resume_skeleton.ipynb",
    "02_dangling_calls.ipynb": "../exercises/reconcile/reconcile.ipynb",
    "03_send_email_postmortem.ipynb": "../exercises/postmortem/postmortem.ipynb",
}


def execute(notebook: Path, workdir: Path) -> tuple[nbformat.NotebookNode, float]:
    """Execute a copy of ``notebook`` in ``workdir`` on a fresh python3 kernel; return it and the seconds taken."""
    from nbclient import NotebookClient

    copy = workdir / notebook.name
    shutil.copy(notebook, copy)
    nb = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(workdir)}},
    )
    start = time.perf_counter()
    client.execute(env=kernel_env(workdir), cwd=str(workdir))
    return nb, time.perf_counter() - start


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[nbformat.NotebookNode, float]]:
    """Each lesson executed once (in its own fresh temp folder), shared by the tests below."""
    warm_matplotlib_cache()
    results = {}
    for nb_path in NOTEBOOKS:
        results[nb_path.name] = execute(nb_path, tmp_path_factory.mktemp(nb_path.stem))
    return results


def test_lessons_exist() -> None:
    """The kit ships the three core lessons and the optional fourth."""
    names = [p.name for p in NOTEBOOKS]
    assert names[:3] == ["01_skeleton_resume.ipynb", "02_dangling_calls.ipynb", "03_send_email_postmortem.ipynb"]
    assert "04_production_resume.ipynb" in names


@pytest.mark.slow
@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS])
def test_lesson_runs_clean(executed: dict, name: str) -> None:
    """A lesson executes top to bottom on a fresh kernel with no error and nothing on stderr."""
    nb, seconds = executed[name]
    print(f"{name}: {seconds:.1f} s")
    assert problems(nb) == []
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert all(c.execution_count is not None for c in code), "some code cells did not run"


@pytest.mark.slow
@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS])
def test_checks_passed(executed: dict, name: str) -> None:
    """Every check cell ran its asserts and printed that it passed."""
    nb, _ = executed[name]
    checks = [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("# Check")]
    assert len(checks) >= 4, "each lesson ends its sections with check cells"
    for c in checks:
        assert "assert " in c.source
        text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        assert "check passed" in text, c.source.splitlines()[0]


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


def test_readme_indexes_every_lesson() -> None:
    """lessons/README.md links every lesson notebook, and every link in it points at a lesson that exists."""
    readme = (LESSONS / "README.md").read_text()
    links = set(re.findall(r"\]\(([^)#]+\.ipynb)\)", readme))
    lesson_links = {link for link in links if not link.startswith("../")}
    assert lesson_links == {p.name for p in NOTEBOOKS}


def test_relative_links_resolve() -> None:
    """Every relative link in the lessons and their README points at a file that exists."""
    sources = {LESSONS / "README.md": (LESSONS / "README.md").read_text()}
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        sources[p] = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    broken = []
    for where, text in sources.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (where.parent / target.split("#")[0]).exists():
                broken.append(f"{where.name}: {target}")
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
