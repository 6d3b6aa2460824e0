"""The Korean edition cannot drift: its notebooks pair with the English ones cell by cell, code byte for byte."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from english_prose import english_runs

from resumable_core.lab import editions

PAIRS = editions.pairs()


def test_every_english_notebook_has_a_korean_edition() -> None:
    """Each lesson, the simulator page and each exercise (source and release) has its `ko/` edition."""
    missing = [str(p.korean.relative_to(editions.REPO_ROOT)) for p in PAIRS if not p.korean.exists()]
    assert missing == []


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: str(p.english.relative_to(editions.REPO_ROOT)))
def test_the_korean_edition_agrees_with_the_english(pair: editions.Pair) -> None:
    """Same cell ids in the same order, same types and metadata, code equal but for comments, prose translated."""
    if not pair.korean.exists():
        pytest.skip(f"{pair.korean} does not exist (the test above fails for it)")
    assert editions.drift(pair.english, pair.korean) == []


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: str(p.english.relative_to(editions.REPO_ROOT)))
def test_the_korean_editions_prose_is_korean(pair: editions.Pair) -> None:
    """No markdown cell of a Korean edition holds a run of English prose (a JupyterLab menu item left in English)
    but the title of an English page it links to."""
    if not pair.korean.exists():
        pytest.skip(f"{pair.korean} does not exist (the test above fails for it)")
    cells = json.loads(pair.korean.read_text(encoding="utf-8"))["cells"]
    prose = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert [run for text in prose for run in english_runs(re.sub(r"\[[^\]]*\]\(https?://[^)]*\)", "", text))] == []


def _pair(tmp_path: Path, edit) -> tuple[Path, Path]:
    """A lesson and a Korean edition made from it (markdown marked as translated), then changed by `edit`."""
    english = editions.REPO_ROOT / "lessons" / "01_skeleton_resume.ipynb"
    nb = json.loads(english.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = "번역된 셀\n" + "".join(cell["source"])
    edit(nb["cells"])
    korean = tmp_path / "ko" / english.name
    korean.parent.mkdir()
    korean.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    return english, korean


def _first(cells, kind):
    return next(c for c in cells if c["cell_type"] == kind and "".join(c["source"]).strip())


def test_a_faithful_edition_passes_and_a_comment_may_differ(tmp_path: Path) -> None:
    """A copy whose prose is translated and one comment rewritten in Korean agrees with the English."""

    def edit(cells):
        cell = next(c for c in cells if c["cell_type"] == "code" and "#" in "".join(c["source"]))
        cell["source"] = ["# 한국어 주석\n", *cell["source"]]

    assert editions.drift(*_pair(tmp_path, edit)) == []


@pytest.mark.parametrize(
    ("edit", "caught"),
    [
        (lambda cells: _first(cells, "code").__setitem__("source", "x = 1  # 코드가 바뀌었다\n"), "its code differs"),
        (
            lambda cells: _first(cells, "code").__setitem__("source", "".join(_first(cells, "code")["source"]) + " "),
            "its code differs",
        ),
        (lambda cells: cells.pop(), "lacks the English cells"),
        (
            lambda cells: cells.append({"cell_type": "markdown", "id": "extra", "metadata": {}, "source": "추가"}),
            "has cells the English lacks",
        ),
        (lambda cells: cells.insert(0, cells.pop(1)), "in another order"),
        (lambda cells: _first(cells, "code")["metadata"].__setitem__("tags", ["x"]), "metadata differs"),
        (
            lambda cells: _first(cells, "markdown").__setitem__("source", "The checkpoint is written atomically."),
            "not translated",
        ),
        (
            lambda cells: _first(cells, "code").__setitem__(
                "outputs", [{"output_type": "stream", "name": "stdout", "text": "x"}]
            ),
            "has outputs",
        ),
    ],
    ids=["code", "whitespace", "missing-cell", "extra-cell", "order", "metadata", "untranslated", "outputs"],
)
def test_each_planted_drift_is_caught(tmp_path: Path, edit, caught: str) -> None:
    """A code change (even one space), a cell gained or lost, another order, changed metadata, English prose, outputs."""
    problems = editions.drift(*_pair(tmp_path, edit))
    assert any(caught in p for p in problems), problems


def test_sync_copies_the_english_code_and_keeps_the_translation(tmp_path: Path) -> None:
    """After the English code changes, sync copies it into the Korean edition and the pair agrees again."""
    english, korean = _pair(tmp_path, lambda cells: None)
    changed = tmp_path / english.name
    shutil.copy(english, changed)
    nb = json.loads(changed.read_text(encoding="utf-8"))
    _first(nb["cells"], "code")["source"] = "NEW = 1\n"
    changed.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    assert any("its code differs" in p for p in editions.drift(changed, korean))
    assert editions.sync(changed, korean)[0].endswith("1 code cell(s) copied from the English")
    assert editions.drift(changed, korean) == []
    assert "번역된 셀" in korean.read_text(encoding="utf-8")


def test_sync_keeps_the_korean_comments_where_their_code_did_not_change() -> None:
    """carry_comments: the English code, with each Korean comment beside or above a line the English did not change."""
    korean = "# 준비한다\nx = 1  # 하나\n\n# 보낸다\nsend(x)  # 한 번\n"
    english = "# prepare\nx = 2  # two now\n\n# send\nsend(x)  # once\nlog(x)  # new\n"
    carried = editions.carry_comments(english, korean)
    assert carried == "# prepare\nx = 2  # two now\n\n# 보낸다\nsend(x)  # 한 번\nlog(x)  # new\n"
    assert editions.same_code(english, carried)
    assert editions.carry_comments("x = (\n", korean) == "x = (\n"  # no tokenizing: the English as it is


def test_sync_on_an_unchanged_edition_changes_nothing() -> None:
    """For every code cell of every Korean notebook, carrying its comments onto the English code gives it back whole."""
    lost = []
    for pair in PAIRS:
        if not pair.korean.exists():
            continue
        english = {c["id"]: "".join(c["source"]) for c in json.loads(pair.english.read_text(encoding="utf-8"))["cells"]}
        for cell in json.loads(pair.korean.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and editions.carry_comments(english[cell["id"]], source) != source:
                lost.append(f"{pair.korean.name}: {cell['id']}")
    assert lost == []


def test_the_check_command_passes_on_this_repository(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m resumable_core.lab.editions check` (the README's command) prints nothing and exits 0 here."""
    assert editions.main(["check"]) == 0
    assert capsys.readouterr().out == ""
