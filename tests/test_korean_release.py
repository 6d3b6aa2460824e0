"""The Korean release: the English release with Korean markdown, made by `make release`, never a solution in it."""

from __future__ import annotations

import ast
import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from resumable_core.course import notebooks, student_kit
from resumable_core.course import release as course
from resumable_core.course.assignments import REGISTRY
from resumable_core.course.i18n import COURSE, say
from resumable_core.lab.editions import same_code, without_comments

ROOT = course.COURSE_ROOT
KOREAN_RELEASES = sorted((ROOT / course.RELEASE_DIR).glob("*/ko/*.ipynb"))
KOREAN_SOURCES = sorted((ROOT / course.SOURCE_DIR).glob("*/ko/*.ipynb"))


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _cell(kind: str, cid: str, text: str, **nbgrader: object) -> dict:
    cell: dict[str, Any] = {"cell_type": kind, "id": cid, "metadata": {}, "source": text}
    if nbgrader:
        cell["metadata"]["nbgrader"] = {"grade_id": cid, "schema_version": 3, **nbgrader}
    if kind == "code":
        cell |= {"outputs": [], "execution_count": None}
    return cell


def _notebook(*cells: dict) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_nbgrader_ignores_the_translated_sources_and_keeps_its_defaults():
    """`ko` folders are ignored (they hold solutions); nbgrader's default ignore list is still there."""
    cfg = Config()
    path = ROOT / "nbgrader_config.py"
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: cfg, "__file__": str(path)})
    from nbgrader.coursedir import CourseDirectory

    defaults = CourseDirectory().ignore  # nbgrader's own list, unconfigured
    assert set(defaults) <= set(cfg.CourseDirectory.ignore)
    assert set(course.TRANSLATIONS) <= set(cfg.CourseDirectory.ignore)


def test_translate_takes_markdown_from_the_translation_and_everything_else_from_the_release():
    """Code cells and metadata are the English release's; a written answer keeps the release's blank."""
    release = _notebook(
        _cell("markdown", "intro", "# Exercise", locked=True, grade=False, solution=False, checksum="x"),
        _cell("code", "setup", "import json", locked=True, grade=False, solution=False),
        _cell("markdown", "why", "YOUR ANSWER HERE", grade=True, solution=True, points=3),
    )
    source = _notebook(
        _cell("markdown", "intro", "# 연습", locked=True, grade=False, solution=False),
        _cell("code", "setup", "import os  # a drifted code cell: not taken", locked=True, grade=False, solution=False),
        _cell("markdown", "why", "강사의 모범 답안", grade=True, solution=True, points=3),
    )
    out = course.translate_release(release, source, "ko")
    assert [c["source"] for c in out["cells"]] == ["# 연습", "import json", "YOUR ANSWER HERE"]
    assert [c["metadata"] for c in out["cells"]] == [c["metadata"] for c in release["cells"]]
    assert out["metadata"] == {"resumable": {"lang": "ko"}}
    assert release["cells"][0]["source"] == "# Exercise"  # the English release is not changed


def test_translate_takes_a_code_cells_comments_from_the_translation_but_no_hidden_test():
    """A test cell reads in Korean: the release's code with the translation's comments; its hidden block stays cut."""
    release = _notebook(_cell("code", "test_a", "# Checks a.\ncheck(a)\nprint('a')", grade=True, locked=True))
    hidden = "### BEGIN HIDDEN TESTS\n# hidden: b too\ncheck(b)\n### END HIDDEN TESTS\n"
    source = _notebook(
        _cell("code", "test_a", f"# a를 확인한다.\ncheck(a)\n{hidden}print('a')", grade=True, locked=True)
    )
    out = course.translate_release(release, source, "ko")
    assert [c["source"] for c in out["cells"]] == ["# a를 확인한다.\ncheck(a)\nprint('a')"]
    # a cell that is all hidden test keeps, in Korean, the comment that stood above it
    release = _notebook(_cell("code", "test_b", "# Hidden at release: b.", grade=True, locked=True))
    source = _notebook(_cell("code", "test_b", f"# 배포본에서는 숨김: b.\n{hidden}", grade=True, locked=True))
    out = course.translate_release(release, source, "ko")
    assert [c["source"] for c in out["cells"]] == ["# 배포본에서는 숨김: b."]


def test_translate_refuses_a_translation_that_lacks_a_markdown_cell():
    """A markdown cell of the release with no Korean cell of its id is an error that names the id."""
    release = _notebook(_cell("markdown", "intro", "# Exercise"), _cell("markdown", "new_cell", "Added in English"))
    source = _notebook(_cell("markdown", "intro", "# 연습"))
    with pytest.raises(course.TranslationError, match="new_cell"):
        course.translate_release(release, source, "ko")


def test_every_translated_source_has_its_release():
    """`make release` wrote exercises/<a>/ko/<a>.ipynb for each solutions/<a>/ko/<a>.ipynb, and no other."""
    assert KOREAN_SOURCES, "no solutions/<assignment>/ko/ notebook: nothing to release in Korean"
    made = {p.relative_to(ROOT / course.RELEASE_DIR) for p in KOREAN_RELEASES}
    assert made == {p.relative_to(ROOT / course.SOURCE_DIR) for p in KOREAN_SOURCES}


@pytest.mark.parametrize("released", KOREAN_RELEASES, ids=lambda p: p.parent.parent.name)
def test_no_korean_release_holds_a_solution_or_a_hidden_test(released):
    """No solution region, hidden test or written answer of the sources reaches exercises/<a>/ko/."""
    assignment = released.parent.parent.name
    text = "".join(notebooks.source(c) for c in _nb(released)["cells"])
    assert "### BEGIN" not in text and "### END" not in text
    for source in (course.notebook_path(assignment), course.translated_path(assignment, "ko")):
        cells = _nb(source)["cells"]
        for block in re.findall(
            r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", "".join(map(notebooks.source, cells)), re.S
        ):
            for line in block.strip().splitlines():
                if line.strip() and not line.strip().startswith("#"):
                    assert line not in text, line
        for cell in cells:
            if cell["cell_type"] == "markdown" and cell["metadata"].get("nbgrader", {}).get("solution"):
                assert notebooks.source(cell).strip() not in text, notebooks.grade_id(cell)
    # Every file anywhere under the released ko/ folder is a release notebook (nbgrader copied nothing there).
    assert sorted(p.name for p in released.parent.iterdir()) == [released.name]


@pytest.mark.parametrize("released", KOREAN_RELEASES, ids=lambda p: p.parent.parent.name)
def test_the_korean_release_is_the_english_one_but_for_markdown(released):
    """Same cells, ids, order, code (comments aside) and metadata as the English release; the metadata says lang ko."""
    assignment = released.parent.parent.name
    english, korean = _nb(course.notebook_path(assignment, ROOT, course.RELEASE_DIR)), _nb(released)
    assert [c["id"] for c in korean["cells"]] == [c["id"] for c in english["cells"]]
    for e, k in zip(english["cells"], korean["cells"], strict=True):
        if e["metadata"].get("nbgrader", {}).get("solution") and e["cell_type"] == "markdown":
            assert k == e, e["id"]
        elif e["cell_type"] == "code":
            assert same_code(notebooks.source(e), notebooks.source(k)), e["id"]
            assert {**k, "source": None} == {**e, "source": None}, e["id"]
        else:
            assert {**k, "source": None} == {**e, "source": None}, e["id"]
    assert korean["metadata"] == {**english["metadata"], "resumable": {"lang": "ko"}}


def test_what_the_korean_release_keeps_of_a_hidden_test_is_korean_as_its_readme_says():
    """A cell whose tests are all hidden keeps one comment saying what is hidden: Korean, under the marker the Korean
    kit's README names."""
    kept = {}
    for released in KOREAN_RELEASES:
        for cell in _nb(released)["cells"]:
            text = notebooks.source(cell)
            if cell["cell_type"] == "code" and notebooks.grade_id(cell) and without_comments(text) == "":
                kept[f"{released.parent.parent.name}/{cell['id']}"] = text
    assert {k.split("/")[0] for k in kept} == {p.parent.parent.name for p in KOREAN_RELEASES}  # every one has some
    assert [t for t in kept.values() if not all(re.search("[가-힣]", line) for line in t.splitlines())] == []
    markers = {t.split(":")[0].lstrip("# ") for t in kept.values()}
    readme = (student_kit.TEMPLATES / "README.ko.md").read_text(encoding="utf-8")
    assert len(markers) == 1 and f'"{markers.pop()}"' in readme


def test_release_check_notices_a_stale_or_missing_korean_release(tmp_path):
    """`release check` compares exercises/<a>/ko/ too: a stale Korean cell, and a missing file, are differences."""
    released = KOREAN_RELEASES[0]
    name = released.relative_to(ROOT / course.RELEASE_DIR).as_posix()
    nb = _nb(released)
    stale = copy.deepcopy(nb)
    markdown = next(c for c in stale["cells"] if c["cell_type"] == "markdown")
    markdown["source"] = "옛 번역"
    (tmp_path / "stale.ipynb").write_text(json.dumps(stale), encoding="utf-8")
    problems = course.tree_differences({name: tmp_path / "stale.ipynb"}, {name: released})
    assert any(f"{markdown['id']} differs in source" in p or "differs in source" in p for p in problems), problems
    assert course.tree_differences({}, {name: released}) == [f"exercises/{name}: missing"]
    english = course.notebook_path("reconcile", ROOT, course.RELEASE_DIR)
    rest = {"reconcile/reconcile.ipynb": english}
    gone = course.tree_differences({**rest, "reconcile/ko/reconcile.ipynb": released}, rest)  # its source removed
    assert gone == ["exercises/reconcile/ko/reconcile.ipynb: not produced by generate_assignment"]
    scratch = course.tree_differences({**rest, "reconcile/ko/notes.ipynb": released}, rest)  # a learner's own file
    assert scratch == []
    assert course.tree_differences({name: released}, {name: released}) == []


@pytest.mark.slow
@pytest.mark.nbgrader
def test_nbgrader_copies_nothing_from_a_translated_source(tmp_path):
    """A file beside the Korean source (it could hold answers) does not reach the release; the Korean release does."""
    shutil.copy2(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    gradebook = f"sqlite:///{tmp_path / 'gradebook.db'}"  # not the course's
    with open(tmp_path / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.CourseDirectory.db_url = {gradebook!r}\n")
    shutil.copytree(ROOT / course.SOURCE_DIR / "reconcile", tmp_path / course.SOURCE_DIR / "reconcile")
    (tmp_path / course.SOURCE_DIR / "reconcile" / "ko" / "answers.txt").write_text("### BEGIN SOLUTION\n")
    made = course.release(tmp_path, ["reconcile"])
    assert course.translated_path("reconcile", "ko", tmp_path, course.RELEASE_DIR) in made
    shipped = sorted(
        p.relative_to(tmp_path).as_posix() for p in (tmp_path / course.RELEASE_DIR).rglob("*") if p.is_file()
    )
    assert shipped == ["exercises/reconcile/ko/reconcile.ipynb", "exercises/reconcile/reconcile.ipynb"]


@pytest.mark.parametrize("assignment", sorted(REGISTRY), ids=str)
def test_what_a_test_cell_prints_comes_from_the_catalog(assignment: str) -> None:
    """A test cell prints no literal (its code is the same in every edition): only `checks.say("...")`, whose
    message the course catalog has in Korean."""
    source = _nb(ROOT / course.SOURCE_DIR / assignment / f"{assignment}.ipynb")
    said = []
    for cell in source["cells"]:
        grading = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] != "code" or not grading.get("grade") or grading.get("solution"):
            continue
        text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for call in ast.walk(ast.parse(text)):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print":
                assert [ast.unparse(a) for a in call.args if not _said(a)] == [], grading["grade_id"]
                said += [ast.literal_eval(a.args[0]) for a in call.args if isinstance(a, ast.Call)]
    assert said, "each exercise's test cells say when they pass"
    assert REGISTRY[assignment].checks().say is say
    assert [m for m in said if COURSE.gettext(m, "ko") == m] == []


def _said(node: ast.expr) -> bool:
    """``checks.say("a literal")``: a sentence the course catalog extracts and translates."""
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "checks.say"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )
