"""Similarity: answers alike once names, literals and layout are ignored are paired; the release's code never counts."""

from __future__ import annotations

from pathlib import Path

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest
import similarity_samples as planted

from resumable_core.__main__ import main as cli_main
from resumable_core.course.grading.steps.similarity import class_similarity, normalise, own_code, similar_pairs

MINE = """def reconcile(cp, tools):
    # my own work
    pending = cp.pending_tool_use
    if pending is None:
        return cp
    if tools.is_read_only(pending.name):
        out = tools.execute(pending.name, pending.input)
        result = {"type": "tool_result", "tool_use_id": pending.id, "content": out}
    else:
        result = {"type": "tool_result", "tool_use_id": pending.id, "content": "unknown", "is_error": True}
    cp.messages.append({"role": "user", "content": [result]})
    cp.pending_tool_use = None
    return cp
"""
RENAMED = (
    MINE.replace("pending", "p").replace("result", "r").replace("out", "o").replace("# my own work", "")
    .replace('"unknown"', '"status unknown, check by hand"').replace("    ", "  ")
)  # fmt: skip
OTHER = """def reconcile(cp, tools):
    name = cp.pending_tool_use and cp.pending_tool_use.name
    effect = tools.effect(name) if name in tools else None
    answer = run_again(cp, tools) if effect == "read" else mark_unknown(cp)
    save(answer)
    return answer
"""
RELEASE = "def reconcile(cp, tools):\n    raise NotImplementedError()"


@pytest.mark.slow
def test_a_copy_with_names_strings_and_layout_changed_is_paired_and_another_answer_is_not():
    """The renamed, re-indented, re-worded copy is found whole; an answer of its own reaches no threshold."""
    codes = {s: own_code(c, RELEASE) for s, c in {"ann": MINE, "bo": RENAMED, "cy": OTHER}.items()}
    pairs = similar_pairs(codes, 0.6)
    assert [(p.a, p.b) for p in pairs] == [("ann", "bo")]
    assert pairs[0].share_a > 0.9 and pairs[0].share_b > 0.9 and pairs[0].slices_a


def test_changed_numbers_hide_nothing_and_comments_go():
    """normalise() drops comments and turns every number into 0; code that does not parse is kept as it is."""
    assert normalise("x = 41  # the answer\ny = 2.5") == "x = 0\ny = 0"
    assert normalise("def broken(:") == "def broken(:"


def test_the_release_code_is_subtracted():
    """Two students who both left only the release's template (a helper included) are not listed."""
    template = RELEASE + "\n\n\ndef helper(cp):\n    return cp.pending_tool_use.name\n"
    codes = {"ann": own_code(template, template), "bo": own_code(template, template)}
    assert codes["ann"] == "" and similar_pairs(codes, 0.1) == []


def test_the_report_lists_pairs_side_by_side_escaped(tmp_path):
    """class_similarity reads the answer cells of each notebook; the page marks shared code and escapes markup."""
    tiny = samples.tiny_source_notebook()
    files = {}
    for student, code in {"ann": MINE, "bo": RENAMED + "\n# </pre><script>alert(1)</script>\n", "cy": OTHER}.items():
        nb = samples.submission(tiny, code.replace("def reconcile(", "def my_reconcile("))
        files[student] = tmp_path / f"{student}.ipynb"
        nbformat.write(nb, str(files[student]))
    pairs = class_similarity(tmp_path, files, {"reconcile": samples.submission(tiny, {})}, "reconcile", 0.6)
    assert [(p.a, p.b) for p in pairs] == [("ann", "bo")]
    page = (tmp_path / "similarity.html").read_text()
    assert "<mark>" in page and "<script>" not in page and "ann and bo" in page
    assert (tmp_path / "similarity.csv").read_text().splitlines()[1].startswith("ann,bo,")


@pytest.mark.parametrize("bad", ["1.5", "-0.1", "high"])
def test_a_threshold_outside_0_to_1_is_refused_by_name(bad, capsys):
    """--similar takes a share from 0 to 1; anything else is argparse's one-line error naming the option."""
    with pytest.raises(SystemExit):
        cli_main(["grade", "class", "--similar", bad])
    assert "--similar" in capsys.readouterr().err


def _notebooks(folder: Path, students: dict[str, dict[str, str]]) -> dict[str, Path]:
    """Each student's answers written as a notebook of the planted release: {student: its file}."""
    files = {}
    for student, answers in students.items():
        files[student] = folder / f"{student}.ipynb"
        nbformat.write(planted.notebook(answers), str(files[student]))
    return files


def _listed(folder: Path, students: dict[str, dict[str, str]]) -> list[frozenset[str]]:
    release = {"planted": planted.notebook({})}
    return [frozenset((p.a, p.b)) for p in class_similarity(folder, _notebooks(folder, students), release, "planted")]


@pytest.mark.slow
def test_a_planted_class_is_found_with_few_false_pairs(tmp_path):
    """35 notebooks: 24 honest, 4 only Level 1's dictionary, 2 untouched, 5 disguised copies (6 copy pairs): precision and recall >= 0.8."""
    students, copies = planted.planted_class()
    listed = set(_listed(tmp_path, students))
    precision, recall = len(listed & copies) / max(len(listed), 1), len(listed & copies) / len(copies)
    assert precision >= 0.8 and recall >= 0.8, (precision, recall, listed)


def test_forced_tiny_and_untouched_answers_are_never_paired(tmp_path):
    """Level 1's dictionary alone, the release untouched, or one small answer written alike: no pair, at any threshold."""
    small = "def reconcile(cp, tools):\n    if cp.pending_tool_use is None:\n        return cp\n    return cp.fix()"
    students = {
        "ann": {"level1_actions": planted.LEVEL1},
        "bo": {"level1_actions": planted.LEVEL1.replace('"', "'")},
        "cy": {},
        "dee": {},
        "eve": {"reconcile": small},
        "fay": {"reconcile": small.replace("cp", "c")},
    }
    assert _listed(tmp_path, students) == []
    assert "No pair reaches the threshold" in (tmp_path / "similarity.html").read_text()


TOOL_NAMES = """def tool_names(messages):
    found = []
    for message in messages:
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        found += [block["name"] for block in message["content"] if block.get("type") == "tool_use"]
    return found"""


def test_pairs_are_ranked_by_the_code_they_share_and_never_show_a_stub(tmp_path):
    """A copy of two functions, a line changed, comes before a whole copy of a smaller one; no stub is shown."""
    ann = MINE.replace(
        "    return cp\n", "    log.info('reconciled %s of %d', cp.id, len(cp.messages))\n    return cp\n"
    )
    bo = RENAMED.replace(
        "  cp.messages", "  assert isinstance(cp.messages, list), 'no list'\n  cp.messages"
    )  # neither is all in the other
    students = {
        "ann": {"reconcile": ann, "tool_names": TOOL_NAMES},
        "bo": {"reconcile": bo.replace("cp", "c"), "tool_names": TOOL_NAMES.replace("found", "acc")},
        "cy": {"with_retries": planted.RELEASE["with_retries"].replace("raise NotImplementedError()", RETRY)},
        "dee": {"with_retries": planted.RELEASE["with_retries"].replace("raise NotImplementedError()", RETRY)},
    }
    assert _listed(tmp_path, students) == [frozenset(("ann", "bo")), frozenset(("cy", "dee"))]
    page = (tmp_path / "similarity.html").read_text()
    assert "NotImplementedError" not in page and "YOUR CODE HERE" not in page


RETRY = """for attempt in range(attempts):
        try:
            return call()
        except OSError as error:
            time.sleep(2 ** attempt)
    raise RuntimeError("gave up")"""
