"""The course is a standard nbgrader course: its config, its notebooks' metadata, its release."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from traitlets.config import Config

from resumable_core.course import notebooks
from resumable_core.course import release as course

ROOT = course.COURSE_ROOT


def _config(path: Path) -> Config:
    cfg = Config()
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: cfg, "__file__": str(path)})
    return cfg


def _cells(folder: str, assignment: str) -> list[dict]:
    return json.loads(course.notebook_path(assignment, ROOT, folder).read_text())["cells"]


_src = notebooks.source


def test_the_exchange_carries_the_translations_and_generate_assignment_does_not(tmp_path):
    """The course ignores ko/ (generate_assignment reads solutions/), and names the kit's exchange steps that carry it."""
    cfg = _config(ROOT / "nbgrader_config.py")
    assert set(course.TRANSLATIONS) <= set(cfg.CourseDirectory.ignore)
    assert cfg.ExchangeFactory.release_assignment == "resumable_core.course.exchange.ReleaseAssignment"
    assert cfg.ExchangeFactory.collect == "resumable_core.course.exchange.Collect"


def test_config_root_is_the_folder_of_the_config_file(tmp_path, monkeypatch):
    """nbgrader_config.py sets the course root from __file__ (not the cwd), solutions/ as source, exercises/ as release."""
    monkeypatch.chdir(tmp_path)
    cfg = _config(ROOT / "nbgrader_config.py")
    assert cfg.CourseDirectory.root == str(ROOT)
    assert cfg.CourseDirectory.source_directory == "solutions"
    assert cfg.CourseDirectory.release_directory == "exercises"
    assert 10 <= cfg.ExecutePreprocessor.timeout <= 300
    copy = tmp_path / "elsewhere" / "nbgrader_config.py"
    copy.parent.mkdir()
    copy.write_text((ROOT / "nbgrader_config.py").read_text())
    assert _config(copy).CourseDirectory.root == str(copy.parent)


def test_nbgrader_working_files_are_git_ignored():
    """gradebook.db, submitted/, autograded/ and feedback/ at the course root are ignored by git."""
    paths = ["gradebook.db", "submitted/s/reconcile/reconcile.ipynb", "autograded/s/x", "feedback/s/x"]
    proc = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.split() == paths


@pytest.mark.parametrize("assignment", course.ASSIGNMENTS)
def test_graded_cells_have_ids_points_and_regions(assignment):
    """Every graded cell has a unique grade_id and points; solutions and hidden tests are delimited."""
    cells = _cells("solutions", assignment)
    ids = [c["metadata"]["nbgrader"]["grade_id"] for c in cells if "nbgrader" in c["metadata"]]
    assert len(ids) == len(set(ids)) == len(cells), "every cell carries nbgrader metadata with a unique grade_id"
    for cell in cells:
        meta, src = cell["metadata"]["nbgrader"], _src(cell)
        assert not cell.get("outputs"), f"{meta['grade_id']}: no committed outputs"
        if meta["grade"]:
            assert meta["points"] > 0, meta["grade_id"]
        if meta["solution"] and cell["cell_type"] == "code":
            assert "### BEGIN SOLUTION" in src and "### END SOLUTION" in src, meta["grade_id"]
        if meta["grade"] and not meta["solution"]:
            assert meta["locked"] and cell["cell_type"] == "code", meta["grade_id"]
            assert src.count("### BEGIN HIDDEN TESTS") == src.count("### END HIDDEN TESTS") <= 1


def test_point_structure_is_what_the_grading_command_expects():
    """The grade_ids and points per assignment are the documented ones (the grade command relies on them)."""
    table = {a: {c["grade_id"]: (c["points"], c["kind"]) for c in cells} for a, cells in course.points_table().items()}
    assert sum(p for p, _ in table["reconcile"].values()) == 29
    assert sum(p for gid, (p, _) in table["reconcile"].items() if gid.startswith("test_turn_")) == 15  # Level 3
    assert table["reconcile"]["level1_why"] == (3, "manual")
    assert table["postmortem"]["root_cause"] == (2, "manual")
    assert table["postmortem"]["refund_root_cause"] == (3, "manual")
    assert table["postmortem"]["bonus_ledger"] == (2, "auto")
    assert sum(p for p, _ in table["resume_skeleton"].values()) == 22
    assert sum(p for p, _ in table["resume"].values()) == 34
    assert all(kind == "auto" for _, kind in table["resume"].values())


def test_first_code_cell_imports_what_the_notebook_needs():
    """The setup cell of each notebook imports from resumable_core; no cell depends on the working directory."""
    for assignment in course.ASSIGNMENTS:
        cells = [c for c in _cells("solutions", assignment) if c["cell_type"] == "code"]
        assert "import resumable_core" in _src(cells[0]) or "from resumable_core" in _src(cells[0])
        for cell in cells:
            assert not re.search(r"os\.getcwd|Path\.cwd|chdir|open\(['\"]", _src(cell)), _src(cell)


@pytest.mark.parametrize("assignment", course.ASSIGNMENTS)
def test_release_has_no_solutions_or_hidden_tests(assignment):
    """The released notebook keeps the tests' visible part and drops every solution and hidden test."""
    source = "".join(_src(c) for c in _cells("solutions", assignment))
    release = _cells("exercises", assignment)
    text = "".join(_src(c) for c in release)
    assert "### BEGIN" not in text and "### END" not in text
    assert "raise NotImplementedError()" in text
    hidden = re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", source, re.S)
    for block in hidden:
        for line in block.strip().splitlines():
            if line.strip() and not line.strip().startswith("#"):
                assert line not in text, line
    if assignment == "reconcile":
        assert "finished_no_call" not in text  # the level-1 answers stay hidden


@pytest.mark.slow
@pytest.mark.parametrize("assignment", course.ASSIGNMENTS)
def test_solution_notebook_runs_clean_on_a_fresh_kernel(assignment, tmp_path):
    """The instructor's notebook runs top to bottom in a fresh kernel with no error and nothing on stderr."""
    nb = nbformat.read(course.notebook_path(assignment), as_version=4)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            gid = cell.metadata["nbgrader"]["grade_id"]
            assert out["output_type"] != "error", f"{gid}: {out.get('ename')}: {out.get('evalue')}"
            assert not (out["output_type"] == "stream" and out["name"] == "stderr"), (
                f"{gid} wrote to stderr: {out['text']}"
            )


@pytest.mark.slow
@pytest.mark.nbgrader
def test_exercises_match_a_fresh_generation():
    """exercises/ is exactly what nbgrader generate_assignment makes of solutions/ (run `make release` if not)."""
    assert course.check(ROOT) == []


def test_check_notices_a_hand_edit(tmp_path):
    """The comparison reports a changed cell source and a changed nbgrader checksum in a released notebook."""
    released = course.notebook_path("reconcile", ROOT, "exercises")
    nb = json.loads(released.read_text())
    edited = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_reconcile_B")
    edited["source"] = "pass"
    other = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_reconcile_C")
    other["metadata"]["nbgrader"]["points"] = 20
    (tmp_path / "r.ipynb").write_text(json.dumps(nb))
    problems = course._notebook_differences("r", tmp_path / "r.ipynb", released)
    assert any("test_reconcile_B differs in source" in p for p in problems)
    assert any("test_reconcile_C differs in metadata" in p for p in problems)
    assert course._notebook_differences("r", released, released) == []


@pytest.mark.slow
def test_course_cli_lists_points_and_rejects_unknown_commands():
    """`python -m resumable_core.course points` prints every grade_id; an unknown command is an error."""
    out = subprocess.run(
        [sys.executable, "-m", "resumable_core.course.release", "points"], capture_output=True, text=True, cwd="/"
    )
    assert out.returncode == 0 and "test_reconcile_B" in out.stdout and "bonus_ledger" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "resumable_core.course.release", "nope"], capture_output=True, text=True
    )
    assert bad.returncode == 2


def test_release_of_named_assignments_releases_those_only(monkeypatch, tmp_path):
    """`release --assignment A` (what the class on JupyterHub runs per assignment) releases A only; without it, all."""
    asked: list[list[str]] = []

    def release(root, assignments):
        asked.append(list(assignments))
        return []

    monkeypatch.setattr(course, "release", release)
    assert course.main(["release", "--root", str(tmp_path), "--assignment", "postmortem"]) == 0
    assert course.main(["release", "--root", str(tmp_path)]) == 0
    assert asked == [["postmortem"], list(course.ASSIGNMENTS)]
    with pytest.raises(SystemExit):
        course.main(["release", "--assignment", "nope"])


def test_fill_in_replaces_cells_by_grade_id():
    """fill_in puts a student's source into the named cells and refuses an unknown grade_id."""
    nb = course.fill_in(
        course.notebook_path("reconcile", ROOT, "exercises"),
        {"reconcile": "def reconcile(cp, tools):\n    return cp\n"},
    )
    cell = next(c for c in nb["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "reconcile")
    assert cell["source"].startswith("def reconcile")
    with pytest.raises(KeyError):
        course.fill_in(nb, {"no_such_cell": ""})


def test_describe_checkpoint_speaks_korean_in_korean(monkeypatch: pytest.MonkeyPatch) -> None:
    """In Korean, describe_checkpoint's labels come from the catalog: no line of it is English alone."""
    from english_prose import english_lines

    from resumable_core import lab
    from resumable_core.lab.render import describe_checkpoint

    monkeypatch.setenv("RESUMABLE_LANG", "ko")
    said = {name: describe_checkpoint(lab.load_exercise_checkpoint(name)) for name in "ABCDEF"}
    assert {name: lines for name, text in said.items() if (lines := english_lines(text))} == {}
    assert "마지막 메시지: role=assistant, 블록: text, tool_use read_file" in said["B"]


def test_describe_shows_the_pending_call():
    """describe_checkpoint() names the last message's blocks and the pending call of a checkpoint."""
    from resumable_core import lab
    from resumable_core.lab.render import describe_checkpoint

    text = describe_checkpoint(lab.load_exercise_checkpoint("B"))
    assert "read_file" in text and "pending_tool_use: read_file" in text
    assert "pending_tool_use: None" in describe_checkpoint(lab.load_exercise_checkpoint("A"))
