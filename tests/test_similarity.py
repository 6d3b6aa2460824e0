"""Similarity: answers alike once names, literals and layout are ignored are paired; the release's code never counts."""

from __future__ import annotations

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest

from resumable_core.__main__ import main as cli_main
from resumable_core.course.grading.similarity import class_similarity, normalise, similar_pairs

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
    codes = {s: normalise(c) for s, c in {"ann": MINE, "bo": RENAMED, "cy": OTHER}.items()}
    pairs = similar_pairs(codes, normalise(RELEASE), 0.6)
    assert [(p.a, p.b) for p in pairs] == [("ann", "bo")]
    assert pairs[0].share_a > 0.9 and pairs[0].share_b > 0.9 and pairs[0].slices_a


def test_changed_numbers_hide_nothing_and_comments_go():
    """normalise() drops comments and turns every number into 0; code that does not parse is kept as it is."""
    assert normalise("x = 41  # the answer\ny = 2.5") == "x = 0\ny = 0"
    assert normalise("def broken(:") == "def broken(:"


def test_the_release_code_is_subtracted():
    """Two students who both left only the release's template are not listed."""
    template = RELEASE + "\n\n\ndef helper(cp):\n    return cp.pending_tool_use.name\n"
    codes = {"ann": normalise(template), "bo": normalise(template)}
    assert similar_pairs(codes, normalise(template), 0.1) == []


def test_the_report_lists_pairs_side_by_side_escaped(tmp_path):
    """class_similarity reads the answer cells of each notebook; the page marks shared code and escapes markup."""
    tiny = samples.tiny_source_notebook()
    files = {}
    for student, code in {"ann": MINE, "bo": RENAMED + "\n# </pre><script>alert(1)</script>\n", "cy": OTHER}.items():
        nb = samples.submission(tiny, code.replace("def reconcile(", "def my_reconcile("))
        files[student] = tmp_path / f"{student}.ipynb"
        nbformat.write(nb, str(files[student]))
    pairs = class_similarity(tmp_path, files, {"reconcile": tiny}, "reconcile", 0.6)
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
