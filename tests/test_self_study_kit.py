"""The self-study kit: every check and every solution, the glossary, and its own ``make test`` passes.

The student kit's tests (``tests/test_student_kit.py``) prove that kit holds no answer; these
prove the self-study edition holds all of them: every visible and hidden check module, every
nbgrader source notebook (where ``check --all`` reads the whole test cells), and each solution
cell's code folded after its answer cell in the exercise, in a ``<details>`` that never runs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from test_student_kit import (
    SOLUTION_MARKERS,
    SOLUTIONS,
    answered_in_place,
    blocks,
    kit_make,
    kit_make_test,
    meaningful_lines,
)

from resumable_core.course import self_check, student_kit

ROOT = Path(__file__).resolve().parents[1]
KIT = student_kit.SELF_STUDY.name


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The self-study kit built into a temp folder: the zip, and its contents unpacked into an empty folder."""
    _, archive = student_kit.build(tmp_path_factory.mktemp("dist"), edition=student_kit.SELF_STUDY)
    empty = tmp_path_factory.mktemp("unzipped")
    with zipfile.ZipFile(archive) as z:
        z.extractall(empty)
    return archive, empty / KIT


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_kit_holds_every_check(built: tuple[Path, Path]) -> None:
    """Every visible and hidden check module and every source notebook ships, byte for byte."""
    _, kit = built
    course = ROOT / "resumable_core" / "course"
    modules = [*course.glob("checks/*.py"), *course.glob("hidden/*.py")]
    assert any(p.parent.name == "hidden" for p in modules)
    for path in [*modules, *SOLUTIONS]:
        relative = path.relative_to(ROOT)
        assert (kit / relative).read_bytes() == path.read_bytes(), relative
    assert not (kit / "resumable_core" / "course" / "grading").exists(), "the grading pipeline is the instructor's"


def test_kit_holds_every_solution_folded_after_its_answer(built: tuple[Path, Path]) -> None:
    """After each answer cell of each exercise, a markdown <details> holds that cell's solution region."""
    _, kit = built
    for source in SOLUTIONS:
        exercise = _cells(kit / "exercises" / source.parent.name / source.name)
        by_id = {cell["id"]: i for i, cell in enumerate(exercise)}
        for cell in _cells(source):
            grade = cell["metadata"].get("nbgrader", {})
            if not grade.get("solution"):
                continue
            at = by_id[cell["id"]]
            worked = exercise[at + 1]
            assert worked["id"] == cell["id"] + student_kit.WORKED_SUFFIX and worked["cell_type"] == "markdown"
            text = "".join(worked["source"])
            assert text.startswith("<details>\n<summary>") and text.rstrip().endswith("</details>")
            regions = list(blocks("".join(cell["source"]), SOLUTION_MARKERS)) or ["".join(cell["source"])]
            for region in regions:
                lines = meaningful_lines(region)
                assert lines and all(line in " ".join(text.split()) for line in lines), (source.name, cell["id"])


def test_the_exercises_stay_answerable(built: tuple[Path, Path]) -> None:
    """The answer cells are still nbgrader's stubs and the worked cells carry no nbgrader metadata."""
    _, kit = built
    for source in SOLUTIONS:
        cells = _cells(kit / "exercises" / source.parent.name / source.name)
        answers = [c for c in cells if c["metadata"].get("nbgrader", {}).get("solution")]
        assert answers and all(any(s in "".join(c["source"]) for s in self_check.ANSWER_STUBS) for c in answers)
        worked = [c for c in cells if c["id"].endswith(student_kit.WORKED_SUFFIX)]
        assert len(worked) == len(answers) and not any("nbgrader" in c["metadata"] for c in worked)


def test_both_kits_hold_the_glossary_and_link_it(built: tuple[Path, Path], tmp_path: Path) -> None:
    """lessons/GLOSSARY.md ships in both kits; both READMEs and the lessons' README link it; it defines the brief's terms."""
    student, _ = student_kit.build(tmp_path)
    for kit in (student, built[1]):
        assert (kit / "lessons" / "GLOSSARY.md").read_bytes() == (ROOT / "lessons" / "GLOSSARY.md").read_bytes()
        assert "(lessons/GLOSSARY.md)" in (kit / "README.md").read_text(encoding="utf-8")
    assert "(GLOSSARY.md)" in (ROOT / "lessons" / "README.md").read_text(encoding="utf-8")
    terms = re.findall(r"^\*\*(.+?)\.\*\*", (ROOT / "lessons" / "GLOSSARY.md").read_text(encoding="utf-8"), re.M)
    for term in (
        "Dangling call",
        "Save points A and B",
        "Reconcile",
        "Receipt",
        "Idempotency key",
        "Lease",
        "Fencing token",
        "Journal (append-only event log)",
    ):
        assert term in terms, term
    assert terms == sorted(terms, key=lambda t: t.strip("`").lower()), "terms in alphabetical order"


def test_zip_is_deterministic_under_its_own_top_folder(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Two builds write the same bytes, every entry under self-study-kit/ and dated the source's date."""
    archive, _ = built
    _, again = student_kit.build(tmp_path, edition=student_kit.SELF_STUDY)
    assert again.read_bytes() == archive.read_bytes()
    with zipfile.ZipFile(archive) as z:
        infos = z.infolist()
    assert all(i.filename.startswith(f"{KIT}/") for i in infos)
    assert {i.date_time for i in infos} == {student_kit.zip_date(student_kit.source_epoch())}


def test_check_all_in_the_student_kit_says_where_the_hidden_tests_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no source notebooks are (the student kit), --all refuses in one sentence naming the self-study kit."""
    monkeypatch.setattr(self_check, "SOURCE_NOTEBOOKS", tmp_path / "solutions")
    monkeypatch.setattr(self_check, "LIBRARY_ROOT", tmp_path)
    with pytest.raises(self_check.SelfCheckError, match="self-study kit"):
        self_check.every_test(ROOT / "exercises" / "reconcile" / "reconcile.ipynb")


def test_the_kits_make_check_takes_all(built: tuple[Path, Path]) -> None:
    """`make check NB=... ALL=1` runs `check --all` and names itself as the command to run again."""
    _, kit = built
    venv = Path(sys.executable).parent.parent
    nb = "exercises/reconcile/reconcile.ipynb"
    done = subprocess.run(
        ["make", "-n", "check", f"NB={nb}", "ALL=1", f"VENV={venv}"],
        cwd=kit,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"-m resumable_core check --all {nb}" in done.stdout and "ALL=1'" in done.stdout
    plain = subprocess.run(["make", "-n", "check", f"NB={nb}", f"VENV={venv}"], cwd=kit, capture_output=True, text=True)
    assert "--all" not in plain.stdout


LESSON_RUNS = "tests/test_kit_lessons.py::test_lesson_runs_clean"
"""The kit test that runs each lesson on a kernel: the student kit's `make test` runs it on the same files."""


def shared_with_the_student_kit(student: Path, self_study: Path) -> list[str]:
    """The student kit's files that differ in the self-study kit, but for its README and exercises (worked solutions)."""
    return [
        path.relative_to(student).as_posix()
        for path in sorted(student.rglob("*"))
        if path.is_file()
        and path.relative_to(student).parts[0] not in ("README.md", "exercises")
        and (self_study / path.relative_to(student)).read_bytes() != path.read_bytes()
    ]


def test_the_lessons_run_on_the_student_kits_files(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Every file of the student kit but its README and exercises is the self-study kit's, byte for byte: its lessons,
    library and kit tests; a lesson that differed would be found."""
    student, _ = student_kit.build(tmp_path / "dist")
    assert (student / LESSON_RUNS.split("::")[0]).is_file() and list((student / "lessons").glob("0*.ipynb"))
    assert shared_with_the_student_kit(student, built[1]) == []
    lesson = student / "lessons" / "01_skeleton_resume.ipynb"
    lesson.write_bytes(lesson.read_bytes() + b"\n")
    assert shared_with_the_student_kit(student, built[1]) == ["lessons/01_skeleton_resume.ipynb"]


@pytest.mark.slow
def test_kit_make_test_passes(built: tuple[Path, Path]) -> None:
    """The unpacked self-study kit's own `make test` passes (visible checks, every check, worked solutions); its lessons
    run in the student kit's `make test` (``test_the_lessons_run_on_the_student_kits_files``: the same files)."""
    kit_make_test(built[1], "self-study kit", f"PYTEST_ARGS=--deselect {LESSON_RUNS}")


CHROMIUM = Path(os.environ.get("RESUMABLE_TEST_CHROMIUM", "/usr/bin/chromium"))


@pytest.mark.slow
@pytest.mark.browser
def test_jupyterlab_renders_the_worked_solution_folded(built: tuple[Path, Path], tmp_path: Path) -> None:
    """In JupyterLab 4 (headless Chromium), a worked solution shows only its summary until clicked, then its code."""
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM}: install it with `apt-get install -y chromium`")
    from playwright.sync_api import expect, sync_playwright

    firsts = {  # each exercise's first worked solution
        path: next(c for c in _cells(path) if c["id"].endswith(student_kit.WORKED_SUFFIX))
        for path in sorted((built[1] / "exercises").glob("*/*.ipynb"))
    }
    exercise, first = next((p, c) for p, c in firsts.items() if "```python" in "".join(c["source"]))
    body = "".join(first["source"]).split("</summary>", 1)[1]
    line = next(ln for ln in body.splitlines() if ln.strip() and not ln.startswith(("`", "<")))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
    }
    args = ["--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--allow-root"]
    with (tmp_path / "lab.log").open("wb") as log:
        lab = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", *args, f"--notebook-dir={built[1]}"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                url = f"http://127.0.0.1:{port}/lab/tree/{exercise.relative_to(built[1]).as_posix()}"
                for _ in range(120):  # the server takes a few seconds to listen
                    try:
                        page.goto(url, timeout=90_000)
                        break
                    except Exception:  # noqa: BLE001 - connection refused until it listens
                        time.sleep(0.5)
                details = page.locator(".jp-RenderedMarkdown details").first
                expect(details).to_be_attached(timeout=90_000)
                summary, code = details.locator("summary"), details.locator("pre").first
                expect(summary).to_contain_text(student_kit.WORKED_SUMMARY)
                assert details.evaluate("d => d.open") is False and not code.is_visible()
                summary.click()
                expect(code).to_be_visible()
                expect(code).to_contain_text(line.strip())
            finally:
                browser.close()
    finally:
        lab.terminate()
        lab.wait(timeout=30)


@pytest.mark.parametrize("source", SOLUTIONS, ids=lambda p: p.stem)
def test_a_released_answer_is_rebuilt_from_the_source_as_the_release_left_it(source: Path) -> None:
    """``self_check.released_answer`` gives each answer cell of the source notebook exactly as ``exercises/`` holds it."""
    released = {c.id: c.source for c in nbformat.read(ROOT / "exercises" / source.parent.name / source.name, 4).cells}
    answers = [c for c in nbformat.read(source, as_version=4).cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers
    for cell in answers:
        assert self_check.released_answer(cell) == released[cell.id], cell.id


@pytest.mark.slow
def test_the_kits_blank_exercise_test_passes_with_answers_written_in_place(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    """The reader writes the answers in exercises/ itself, as the README says: the kit's every-check blank test still passes."""
    kit = answered_in_place(built[1], tmp_path / "kit")
    exercise = kit / "exercises" / "reconcile" / "reconcile.ipynb"
    assert "NotImplementedError" not in exercise.read_text(encoding="utf-8")
    blank = "tests/test_kit_every_check.py::test_a_blank_exercise_fails_every_test_hidden_ones_too[reconcile]"
    tested = kit_make(kit, "test", f"PYTEST_ARGS={blank}")
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-4000:]
    assert re.search(r"\b1 passed", tested.stdout), tested.stdout[-2000:]
