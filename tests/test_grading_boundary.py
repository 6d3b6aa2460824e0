"""What crosses the grading boundary: feedback pages, student ids, reports, scratch folders, notebook size and metadata.

Unit-level on purpose (the grading run itself is tests/test_grading.py's): one small real
grading run at the end checks that the pieces are wired into ``grade``.
"""

from __future__ import annotations

import base64
import copy
import html
import logging
import os
import subprocess
import sys
import textwrap
import types
import zlib
from html.parser import HTMLParser
from pathlib import Path

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest

from resumable_core.course import notebooks
from resumable_core.course.grading.errors import StudentIdError, check_id
from resumable_core.course.grading.model import CellGrade, StudentReport, Submission
from resumable_core.course.grading.steps import prepare as prep
from resumable_core.course.grading.steps import report, workers
from resumable_core.course.grading.steps.collect import collect, student_id
from resumable_core.course.grading.steps.feedback import CSP, page_path, render_feedback, write_feedback, write_page
from resumable_core.course.grading.steps.merge import trusted_reports

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
SCRIPT = '<script>alert("owned")</script>'


def _png() -> str:
    """A real 1x1 PNG, base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    ihdr = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0\0\0\0")) + chunk(b"IEND", b"")
    return base64.b64encode(raw).decode()


class _Tags(HTMLParser):
    """Every start tag and its attributes, as a browser would parse the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def _meta(gid: str, **flags: object) -> dict:
    return {"nbgrader": {"grade_id": gid, "schema_version": 3, **flags}}


def _hostile_notebook() -> nbformat.NotebookNode:
    """A graded notebook whose learner cells carry scripts in markdown, source and every kind of output."""
    nb = nbformat.v4.new_notebook()
    why = nbformat.v4.new_markdown_cell(
        f"My answer {SCRIPT} <img src=x onerror=alert(1)>", metadata=_meta("why", grade=True, solution=True, points=3)
    )
    code = nbformat.v4.new_code_cell(f"print('{SCRIPT}')", metadata=_meta("answer", solution=True))
    code.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=SCRIPT),
        nbformat.v4.new_output("execute_result", data={"text/html": SCRIPT, "text/plain": "<b>plain</b>"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(2)"}),
        nbformat.v4.new_output("display_data", data={"image/png": 'iVBORw0KGgo="><script>alert(3)</script>'}),
        nbformat.v4.new_output("display_data", data={"image/png": _png()}),
        nbformat.v4.new_output("error", ename="ValueError", evalue=SCRIPT, traceback=[SCRIPT]),
    ]
    nb.cells = [why, code]
    return nb


def test_feedback_escapes_learner_markdown_and_outputs_and_forbids_scripts():
    """A <script> in an answer or an output is text on the page: no script tag, no handler, only data: PNGs, a CSP."""
    page = render_feedback(_hostile_notebook(), {"why": CellGrade(None, 3)}, f"reconcile {SCRIPT}")
    tags = _tags(page)
    assert {t for t, _ in tags} <= {"html", "head", "meta", "title", "style", "body", "h1", "p", "b", "table"} | {
        "tr",
        "th",
        "td",
        "div",
        "pre",
        "img",
    }
    assert not [a for _, attrs in tags for a in attrs if a.startswith("on")]
    images = [attrs["src"] for t, attrs in tags if t == "img"]
    assert images == [f"data:image/png;base64,{_png()}"]  # the forged PNG is not shown
    assert ("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}) in tags
    assert "default-src 'none'" in CSP and "script" not in CSP
    assert html.escape(SCRIPT) in page and "&lt;b&gt;plain&lt;/b&gt;" in page
    assert "<script" not in page.lower()


def _as_graded(source: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, dict[str, CellGrade]]:
    """The source notebook as nbgrader leaves a wrong submission: learner answers, hidden tests back, failures."""
    nb = copy.deepcopy(source)
    grades = {}
    for cell in nb.cells:
        info = cell.metadata.get("nbgrader", {})
        gid = info.get("grade_id")
        if info.get("solution"):
            cell.source = "my answer, wrong" if cell.cell_type == "markdown" else "RESUME_ACTION = {}\nreconcile = None"
        if info.get("grade") and not info.get("solution"):
            lines = notebooks.source(cell).splitlines()
            cell.outputs = [
                nbformat.v4.new_output(
                    "error", ename="CheckFailed", evalue=f"{gid} is wrong", traceback=[*lines, f"CheckFailed: {gid}"]
                )
            ]
        if info.get("grade"):
            grades[gid] = CellGrade(0.0, float(info["points"]))
    return nb, grades


@pytest.mark.skipif(not SOURCE.exists(), reason="the course's reconcile assignment is not there")
def test_feedback_never_shows_test_code_or_the_answer_key():
    """Test cells show name, points and message: no line of their code, hidden or visible, and no answer key."""
    from resumable_core.course.hidden.reconcile import ANSWER_KEY

    source = nbformat.read(str(SOURCE), as_version=4)
    nb, grades = _as_graded(source)
    page = html.unescape(render_feedback(nb, grades, "reconcile"))
    tests = [c for c in source.cells if notebooks.is_grade(c) and not notebooks.is_solution(c)]
    code_lines = {ln.strip() for c in tests for ln in notebooks.source(c).splitlines() if len(ln.strip()) > 10}
    assert any("hidden.check_" in ln for ln in code_lines)  # the test really has hidden code to leak
    assert [ln for ln in code_lines if ln in page] == []
    assert "### BEGIN HIDDEN TESTS" not in page
    assert [k for k, v in ANSWER_KEY.items() if f"{k!r}: {v!r}" in page or f'"{k}": "{v}"' in page] == []
    for c in tests:
        gid = notebooks.grade_id(c) or ""
        assert f"{gid}</b> 0/{grades[gid].max_score:g} failed" in page and f"CheckFailed: {gid} is wrong" in page


def test_feedback_goes_to_the_trusted_id_only(tmp_path):
    """The page is named by the id collect gave; ids that could leave the folder, or a linked page, are refused."""
    folder = tmp_path / "feedback-html"
    assert page_path(folder, "eve", "reconcile", several=False) == folder / "eve.html"
    assert page_path(folder, "eve", "journal", several=True) == folder / "eve-journal.html"
    for bad in ("../bob", "a/b", "..", "", "bob/../../x"):
        with pytest.raises(StudentIdError):
            page_path(folder, bad, "reconcile", several=False)
    with pytest.raises(StudentIdError):
        page_path(folder, "eve", "../x", several=True)
    folder.mkdir()
    (folder / "mallory.html").symlink_to(tmp_path / "elsewhere.html")
    with pytest.raises(StudentIdError, match="leaves"):
        page_path(folder, "mallory", "reconcile", several=False)


def test_a_notebook_cannot_name_whose_feedback_it_is(tmp_path):
    """A notebook whose metadata and outputs claim to be bob's is eve's page, written straight to feedback-html/."""
    out = tmp_path / "out"
    nb = _hostile_notebook()
    nb.metadata["nbgrader"] = {"student": "bob", "feedback_path": "../bob.html"}
    autograded = out / "autograded" / "eve" / "reconcile" / "reconcile.ipynb"
    autograded.parent.mkdir(parents=True)
    nbformat.write(nb, str(autograded))
    bob = out / "feedback-html" / "bob.html"
    bob.parent.mkdir(parents=True)
    bob.write_text("bob's page")
    source = out / "source" / "reconcile" / "reconcile.ipynb"
    why = write_page(out / "feedback-html", autograded, source, "eve", "reconcile", False, {})  # the path is tested
    assert bob.read_text() == "bob's page"
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert pages == ["feedback-html/bob.html", "feedback-html/eve.html"]
    assert why is None


def test_write_feedback_shows_the_recheck_message_and_manual_comment(tmp_path):
    """A cell zeroed by the re-check says why; the instructor's comment on a manual cell is shown, escaped."""
    nb = _hostile_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("check()", metadata=_meta("test_x", grade=True, locked=True, points=2)))
    nbformat.write(nb, str(tmp_path / "nb.ipynb"))
    grades = {"why": CellGrade(2, 3, "good <i>but</i>"), "test_x": CellGrade(0, 2)}
    why = "a hidden check failed: patched"
    page = write_feedback(tmp_path / "nb.ipynb", grades, tmp_path / "p.html", title="t", messages={"test_x": why})
    text = page.read_text()
    assert f"test_x</b> 0/2 failed</p><pre>{why}</pre>" in text and "check()" not in text
    assert "good &lt;i&gt;but&lt;/i&gt;" in text and "Score: 2 / 5" in text


def test_feedback_renders_markdown_sanitized_and_puts_each_message_beside_its_row():
    """Markdown becomes HTML (headings, emphasis, lists, code, tables, safe links); scripts, images, handlers and
    javascript: links do not survive; a failed check's message sits in its row of the score table."""
    md = (
        "## My answer\n\nA **timeout** is *not* a failure:\n\n- one key per refund\n- `reuse` it\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n[docs](https://stripe.com/docs) [x](javascript:alert(1)) "
        "![t](http://evil.example/t.png) <script>alert(1)</script> <b onclick=alert(2)>b</b>"
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(md, metadata=_meta("why", grade=True, solution=True, points=3)),
        nbformat.v4.new_code_cell("check()", metadata=_meta("test_x", grade=True, locked=True, points=2)),
    ]
    grades = {"why": CellGrade(3, 3), "test_x": CellGrade(0, 2)}
    page = render_feedback(nb, grades, "t", {"test_x": "a hidden check failed: the refund was paid twice"})
    for rendered in ("<h2>My answer</h2>", "<strong>timeout</strong>", "<em>not</em>", "<li>one key per refund</li>"):
        assert rendered in page
    assert "<code>reuse</code>" in page and "<td>1</td>" in page
    assert '<a href="https://stripe.com/docs" rel="noopener noreferrer nofollow">docs</a>' in page
    assert 'href="javascript' not in page and "<img" not in page  # an image would fetch: it stays text
    assert "<script" not in page.lower() and "<b onclick" not in page
    assert not [a for _, attrs in _tags(page) for a in attrs if a.startswith("on")]
    assert "<tr><td>test_x</td><td>0/2</td><td>a hidden check failed: the refund was paid twice</td></tr>" in page
    assert "<tr><td>why</td><td>3/3</td><td></td></tr>" in page


def test_a_korean_notebooks_page_speaks_korean_with_the_korean_releases_text(tmp_path):
    """A notebook whose metadata says ko gets a Korean page: its words, and its locked text from the source's ko/
    edition (nbgrader put the gradebook's English back); the learner's written answer stays the learner's."""
    nb = nbformat.v4.new_notebook(metadata={"resumable": {"lang": "ko"}})
    nb.cells = [
        nbformat.v4.new_markdown_cell("## Exercise 2", id="intro", metadata=_meta("intro", locked=True)),
        nbformat.v4.new_markdown_cell(
            "my own answer", id="why", metadata=_meta("why", grade=True, solution=True, points=3)
        ),
        nbformat.v4.new_code_cell("check()", id="t", metadata=_meta("test_x", grade=True, locked=True, points=2)),
    ]
    nbformat.write(nb, str(tmp_path / "nb.ipynb"))
    source = tmp_path / "source" / "nb.ipynb"
    (source.parent / "ko").mkdir(parents=True)
    korean = nbformat.v4.new_notebook()
    korean.cells = [
        nbformat.v4.new_markdown_cell("## 연습 2", id="intro", metadata=_meta("intro", locked=True)),
        nbformat.v4.new_markdown_cell(
            "강사의 모범 답안", id="why", metadata=_meta("why", grade=True, solution=True, points=3)
        ),
    ]
    nbformat.write(korean, str(source.parent / "ko" / "nb.ipynb"))
    grades = {"why": CellGrade(2, 3, "좋습니다"), "test_x": CellGrade(0, 2)}
    page = write_feedback(tmp_path / "nb.ipynb", grades, tmp_path / "p.html", title="t", source=source).read_text()
    assert '<html lang="ko">' in page and "<h2>연습 2</h2>" in page and "Exercise 2" not in page
    assert "my own answer" in page and "모범 답안" not in page  # never the instructor's answer
    assert (
        "점수: 2 / 5" in page
        and "<th>테스트</th>" in page
        and "test_x</b> 0/2 실패" in page
        and "강사의 코멘트:" in page
    )
    english = write_feedback(
        tmp_path / "nb.ipynb", grades, tmp_path / "e.html", title="t"
    )  # no source: the notebook's own text
    assert "Exercise 2" in english.read_text()


def test_recheck_outcomes_become_feedback_messages():
    """Zeroed cells keep their worded reason on the page; cells left for review say so, with the reason."""
    got = report.recheck_messages(
        {"test_a": "a hidden check failed: wrong"}, {"why": "the re-run died", "cells": "test_b, test_c"}
    )
    assert got == {
        "test_a": "a hidden check failed: wrong",
        "test_b": "needs review: could not be re-checked in isolation (the re-run died)",
        "test_c": "needs review: could not be re-checked in isolation (the re-run died)",
    }


def test_a_scored_cell_the_recheck_does_not_report_is_zeroed_for_review():
    """A cell that scored in the kernel but is missing from the re-check's report scores 0, "needs review"."""
    unreported = "needs review: the isolated re-check did not report this cell"
    failed, review = workers.recheck_outcome(["test_a", "test_b", "test_c"], {"test_a": None, "test_b": "wrong"}, None)
    assert failed == {"test_b": "a hidden check failed: wrong", "test_c": unreported}  # test_a keeps its score
    assert review == {"why": "the isolated re-check did not report this cell", "cells": "test_c"}
    failed, review = workers.recheck_outcome(["test_a", "test_b"], {"test_a": "died"}, "the re-run died")
    assert failed == {"test_a": "needs review: the re-run died", "test_b": unreported}
    assert review == {"why": "the re-run died", "cells": "test_a, test_b"}
    assert workers.recheck_outcome(["test_a"], {"test_a": None, "test_x": "not asked"}, None) == ({}, None)


def test_only_a_visible_check_that_disagrees_is_suspected():
    """A failed hidden check gets the check's message; a visible check that passed in the kernel is "needs review"."""
    failed, review = workers.recheck_outcome(
        ["test_a", "test_b"], {"test_a": "Checkpoint B: wrong\nmore", "test_b": "patched"}, None, ["test_b"]
    )
    assert failed["test_a"] == "a hidden check failed: Checkpoint B: wrong"
    assert failed["test_b"].startswith("needs review: a visible check passed in the notebook's kernel but failed")
    assert "patch" in failed["test_b"] and "patch" not in failed["test_a"] and review is None


def test_recheck_isolated_zeroes_the_cells_its_report_leaves_out(tmp_path, monkeypatch):
    """recheck_isolated zeroes in the gradebook a scored cell the re-check did not report, and notes it for review."""
    notebook = tmp_path / "autograded" / "s1" / "a1" / "nb.ipynb"
    notebook.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(notebook))
    (tmp_path / "source" / "a1").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "source" / "a1" / "nb.ipynb"))

    class Report(dict):
        inconclusive = None
        visible_failures = ()

    zeroed: list[list[str]] = []
    monkeypatch.setattr(workers, "_passed_cells", lambda *_: ["test_a", "test_b"])
    monkeypatch.setattr(workers, "recheck", types.SimpleNamespace(run=lambda *a, **k: Report(test_a=None)))
    monkeypatch.setattr(workers, "_zero", lambda db, cells, *_: zeroed.append(cells))
    isolated, kept = workers.recheck_isolated(tmp_path, "a1", "s1", timeout=10)
    assert zeroed == [["test_b"]]
    assert isolated == {"nb": {"test_b": "needs review: the isolated re-check did not report this cell"}}
    assert kept == {"nb": {"why": "the isolated re-check did not report this cell", "cells": "test_b"}}


def test_recheck_isolated_without_a_source_keeps_no_kernel_score(tmp_path, monkeypatch):
    """With no trusted source to re-check against, every scored cell is zeroed for review."""
    notebook = tmp_path / "autograded" / "s1" / "a1" / "nb.ipynb"
    notebook.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(notebook))
    zeroed: list[list[str]] = []
    monkeypatch.setattr(workers, "_passed_cells", lambda *_: ["test_a", "test_b"])
    monkeypatch.setattr(workers, "_zero", lambda db, cells, *_: zeroed.append(cells))
    _, kept = workers.recheck_isolated(tmp_path, "a1", "s1", timeout=10)
    assert zeroed == [["test_a", "test_b"]]
    assert kept["nb"]["why"] == "no source notebook nb.ipynb in the working course"


def test_the_recheck_sandbox_gets_the_limits_configured_for_the_kernel():
    """backend_of builds the re-check's backend with the kernel's factory: the course's backend, memory and CPU caps."""
    from traitlets.config import Config

    from resumable_core.course.grading.steps.execute import SandboxedExecute

    config = Config()
    assert workers.backend_of(config) is None  # plain nbgrader
    config.SandboxedExecute.memory = 512 << 20
    config.SandboxedExecute.cpus = 0.5
    config.SandboxedExecute.library = "/grading-lib"
    box = workers.backend_of(config)
    assert box is not None and box == SandboxedExecute(config=config).backend() and box.name == "bwrap"
    assert (box.limits.memory, box.limits.cpus, box.library) == (512 << 20, 0.5, Path("/grading-lib"))
    config.SandboxedExecute.isolation = "plain"
    plain = workers.backend_of(config)  # --no-sandbox: the same limits, nothing isolated
    assert plain is not None and plain.name == "plain" and plain.limits == box.limits


# --- student ids ---------------------------------------------------------------------------------


def _files(root: Path, names: list[str]) -> Path:
    nb = nbformat.writes(nbformat.v4.new_notebook())
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(nb)
    return root


def test_two_files_with_one_id_are_refused_naming_both(tmp_path):
    """x..ipynb beside x.ipynb, X.ipynb beside x.ipynb and one stem in two folders: refused, both files named."""
    root = _files(
        tmp_path / "flat", ["x..ipynb", "x.ipynb", "Ann.ipynb", "ann.ipynb", "a/z.ipynb", "b/z.ipynb", "ok.ipynb"]
    )
    subs = {s.student: s for s in collect(root, "reconcile", ["reconcile"])}
    assert sorted(subs) == ["Ann", "ann", "ok", "x", "z"]
    assert subs["ok"].status == "graded"
    for sid, names in {
        "x": ("x..ipynb", "x.ipynb"),
        "ann": ("Ann.ipynb", "ann.ipynb"),
        "z": ("a/z.ipynb", "b/z.ipynb"),
    }.items():
        assert subs[sid].status == "invalid" and not subs[sid].files
        assert all(repr(n) in subs[sid].reason for n in names), subs[sid].reason


def test_a_student_folder_and_a_flat_file_with_one_id_are_refused(tmp_path):
    """In nbgrader's layout a notebook beside the folders is a submission too: one id twice is refused."""
    root = _files(
        tmp_path / "submitted", ["kim/reconcile/reconcile.ipynb", "kim.ipynb", "lee/reconcile/reconcile.ipynb"]
    )
    subs = {s.student: s for s in collect(tmp_path, "reconcile", ["reconcile"])}
    assert root.is_dir() and sorted(subs) == ["kim", "lee"]
    assert subs["kim"].status == "invalid" and "'kim/'" in subs["kim"].reason and "'kim.ipynb'" in subs["kim"].reason
    assert subs["lee"].status == "graded"


def test_a_link_in_the_class_folder_is_refused_never_followed(tmp_path):
    """A notebook, a student's folder or a timestamp that is a link (to the instructor's solution) is never read."""
    solution = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
    root = _files(tmp_path / "submitted", ["lee/reconcile/reconcile.ipynb", "kim/reconcile/timestamp.txt"])
    (root / "kim" / "reconcile" / "reconcile.ipynb").symlink_to(solution)
    (root / "eve").symlink_to(solution.parent.parent)  # eve/reconcile/ is the solutions' folder
    (root / "lee" / "reconcile" / "timestamp.txt").symlink_to(solution)
    (root / "ann.ipynb").symlink_to(solution)  # a flat file beside the folders
    subs = {s.student: s for s in collect(tmp_path, "reconcile", ["reconcile"])}
    links = {f"submitted/{name}" for name in ("ann.ipynb", "eve", "kim/reconcile/reconcile.ipynb")}
    assert links <= set(subs), sorted(subs)
    for label in links:
        assert subs[label].status == "invalid" and "is a link, not a submitted file" in subs[label].reason
    assert subs["kim"].status == "missing" and not subs["kim"].files  # the linked notebook is not kim's
    assert subs["lee"].status == "graded" and subs["lee"].timestamp is None  # a linked timestamp is not read
    assert not any(str(solution) in str(f) for s in subs.values() for f in s.files.values())


def test_ids_come_from_names_and_bad_ones_are_refused_with_a_reason(tmp_path):
    """Spaces and accents are mapped; a separator, '..', nothing usable or other symbols are refused."""
    assert [student_id(n) for n in ("bob lee", "José", "x.", "a.b@uni-x")] == ["bob_lee", "Jose", "x", "a.b@uni-x"]
    for name, why in {
        "a\\b": "path separator",
        "a..b": "'..'",
        "___": "empty",
        "ok (1)": "'('",
        "日本": "'日'",
        "a" * 65: "over 64",
    }.items():
        with pytest.raises(StudentIdError) as info:
            student_id(name)
        assert why in info.value.reason and info.value.name == name
    for bad in ("../x", "a/b", "", ".."):
        with pytest.raises(StudentIdError):
            check_id(bad)
    root = _files(tmp_path / "c", ["ok [1].ipynb", "fine.ipynb"])
    subs = {s.student: s for s in collect(root, "reconcile", ["reconcile"])}
    assert subs["ok [1].ipynb"].status == "invalid" and "'['" in subs["ok [1].ipynb"].reason
    assert subs["fine"].status == "graded"


def test_reports_for_unknown_students_are_ignored_and_logged(tmp_path, caplog):
    """A forged report (an id nobody submitted under, or filed under a classmate's id) is dropped, not fatal."""
    for s in ("ann", "bob"):
        (tmp_path / "submitted" / s).mkdir(parents=True)
    reports = {
        "ann": StudentReport("ann", str(tmp_path), success=True),
        "bob": StudentReport("ann", str(tmp_path), success=False, error="kernel died"),
        "no_such_student": StudentReport("no_such_student", str(tmp_path), success=False),
    }
    with caplog.at_level(logging.WARNING):
        trusted = trusted_reports(tmp_path, reports)
    assert list(trusted) == ["ann"]
    assert len(caplog.records) == 2 and "'no_such_student'" in caplog.text and "'bob'" in caplog.text


# --- hygiene ---------------------------------------------------------------------------------------

_CHECKS_IN_A_PROCESS = """
from resumable_core.course.checks import support
from resumable_core.crash import run_in_child

run_in_child(lambda: support.scratch("in-a-child-first"))  # the child leaves with os._exit
support.scratch("a")
support.fresh_toolbox(ledger=True)
run_in_child(lambda: support.scratch("in-child"))
print("ran")
"""


@pytest.mark.slow
def test_the_checks_leave_the_temp_folder_as_it_was(tmp_path):
    """Scratch folders, a forked child's included (before or after the parent made one), go with the process:
    its TMPDIR is empty afterwards."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHECKS_IN_A_PROCESS)], env=env, capture_output=True, text=True
    )
    assert proc.stdout.strip() == "ran", proc.stderr
    assert list(tmp.iterdir()) == []


# --- notebook size and metadata -----------------------------------------------------------------


def _prepare_one(tmp_path: Path, nb: nbformat.NotebookNode) -> tuple[Submission, Path]:
    path = tmp_path / "in" / "kim.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    sub = Submission("kim", files={"reconcile": path})
    (sub,) = prep.prepare([sub], tmp_path / "out", "reconcile", {"reconcile": samples.tiny_source_notebook()})
    return sub, tmp_path / "out" / "submitted" / "kim" / "reconcile" / "reconcile.ipynb"


@pytest.mark.slow
def test_a_26_mb_notebook_of_outputs_is_graded_without_them(tmp_path):
    """26 MB of printed output: stripped with a note (nbgrader runs every cell again), the code kept."""
    nb = samples.tiny_source_notebook()
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * (26 * 2**20))]
    sub, written = _prepare_one(tmp_path, nb)
    assert sub.status == "graded" and "outputs stripped (26.0 MB" in sub.reason
    assert written.stat().st_size < 2**20
    assert [c.get("outputs") for c in nbformat.read(str(written), as_version=4).cells if c.cell_type == "code"] == [
        []
    ] * 4


def test_too_large_notebooks_are_refused_with_the_size(tmp_path, monkeypatch):
    """Code and text over the cap are refused; a file over the file cap is refused unread."""
    nb = samples.tiny_source_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("DATA = '" + "y" * (3 * 2**20) + "'"))
    sub, written = _prepare_one(tmp_path / "code", nb)
    assert sub.status == "invalid" and "code and text are 3.0 MB, over the 2.0 MB" in sub.reason
    assert not written.exists()
    monkeypatch.setattr(prep, "MAX_FILE_BYTES", 1000)
    sub, written = _prepare_one(tmp_path / "file", samples.tiny_source_notebook())
    assert sub.status == "invalid" and "over the 0.0 MB a notebook may be" in sub.reason and not written.exists()


def test_duplicate_missing_and_edited_grade_metadata_is_put_right():
    """A second copy of a test, an unknown or missing grade_id, edited points and checksum: the release wins."""
    release = samples.tiny_source_notebook()
    nb = copy.deepcopy(release)
    nb.cells[3].metadata.nbgrader.update(points=100, checksum="forged")  # test_read_only
    nb.cells.append(copy.deepcopy(release.cells[4]))  # a second test_side_effect
    nb.cells.append(nbformat.v4.new_code_cell("pass", metadata=_meta("no_such_test", grade=True, points=50)))
    nb.cells.append(nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {"grade": True, "points": 9}}))
    notes = prep.repair_metadata(nb, release)
    assert notes == [
        "nbgrader metadata with an unknown or repeated grade_id dropped (run as plain cells): "
        "cell 6 (test_side_effect), cell 7 (no_such_test), cell 8",
        "edited nbgrader metadata put back as released: test_read_only",
    ]
    assert nb.cells[3].metadata.nbgrader == release.cells[3].metadata.nbgrader
    assert [notebooks.grade_id(c) for c in nb.cells[5:]] == [None, None, None]
    assert prep.repair_metadata(copy.deepcopy(release), release) == []


# --- one real grading run ---------------------------------------------------------------------------

WRONG = "def my_reconcile(cp, tools):\n    return cp"
PRINTS_A_SCRIPT = f"from resumable_core.course.checks.support import scratch\nscratch('mine')\nprint('{SCRIPT}')"


@pytest.mark.slow
@pytest.mark.nbgrader
def test_grade_writes_safe_feedback_refuses_collisions_and_leaves_no_temp_files(tmp_path, monkeypatch):
    """Real nbgrader on the stand-in assignment: the page escapes the script and hides the tests; TMPDIR stays empty."""
    import tempfile

    from resumable_core.course.grading.pipeline import grade

    source = samples.write_tiny_source(tmp_path / "source" / "reconcile")
    learner = samples.submission(samples.tiny_source_notebook(), WRONG, extra_cell=PRINTS_A_SCRIPT)
    _files(tmp_path / "class", ["x.ipynb", "x..ipynb"])
    nbformat.write(learner, str(tmp_path / "class" / "eve.ipynb"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches the folder it found first
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    run = grade(tmp_path / "class", "reconcile", source=source.parent, out=tmp_path / "out", timeout=20, echo=print)
    subs = {s.student: s for s in run.submissions}
    assert subs["x"].status == "invalid" and "'x.ipynb' and 'x..ipynb'" in subs["x"].reason
    assert subs["eve"].status == "graded" and subs["eve"].score == 0 < subs["eve"].max_score, (
        subs["eve"].reason,
        subs["eve"].problems,
    )
    page = (run.out / "feedback-html" / "eve.html").read_text()
    assert html.escape(SCRIPT) in page and "<script" not in page.lower()
    assert "test_side_effect</b> 0/3 failed" in page and "AssertionError" in page
    assert "importlib.reload" not in page and "exercise_run_folder(&quot;C&quot;" not in page
    assert not (run.out / "feedback-html" / "x.html").exists()
    assert list(tmp.iterdir()) == []
