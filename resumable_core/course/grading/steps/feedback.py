"""Each student's feedback page, rendered here from the autograded notebook and the gradebook's grades.

nbgrader's feedback template shows every test cell's source word for word (the hidden tests and the
level-1 answer key included) and passes the learner's markdown and HTML outputs through as live
HTML. This page instead shows, for each test cell, only its name, points and failure message (also
beside its row of the score table); markdown is rendered (markdown-it, raw HTML off) and then
sanitized (nh3: a short list of tags, links only to http, https and mailto, no images); every other
text of the learner's is escaped; only plain-text and validated PNG outputs are shown; and a strict
Content-Security-Policy forbids any script. Its path is made from the trusted student id alone.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import html
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat
import nh3
from markdown_it import MarkdownIt

from ... import notebooks
from ...notebook_cells import is_test
from .. import reasons
from ..errors import StudentIdError, check_id
from ..i18n import GRADING
from ..model import CellGrade

FEEDBACK = "feedback-html"
"""The folder of the pages, in a working folder and a class folder alike."""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
"""No script, frame, font, fetch or form; images only inline (the validated PNGs); the page's own style."""
MAX_OUTPUT_CHARS = 4000
"""Characters of one output shown (the rest is cut with a note): outputs are the learner's, not the grader's."""
MAX_PNG_BYTES = 2_000_000
MAX_ROW_MESSAGE = 160
"""Characters of a check's message beside its row of the score table (the whole one is at its cell)."""
MARKDOWN_TAGS = frozenset(
    {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre", "blockquote"}
    | {"ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td"}
)
"""What rendered markdown may keep: text structure and links; no image (it would fetch), no style, no form."""
_LANG: contextvars.ContextVar[str] = contextvars.ContextVar("feedback_language", default="en")
"""The language of the page being rendered (its notebook's): each grading thread renders its own."""


def _(message: str) -> str:
    return GRADING.gettext(message, _LANG.get())


_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")
HIDDEN_MARKER = "BEGIN HIDDEN TESTS"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STYLE = """body{font-family:sans-serif;max-width:60rem;margin:1rem auto;padding:0 1rem;color:#222}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5rem;margin:.3rem 0}
.cell{border-left:4px solid #ddd;padding:.2rem .8rem;margin:.8rem 0}
.test{border-color:#888}.passed{border-color:#2a2}.failed{border-color:#c22}.pending{border-color:#e90}
.stderr{background:#fee}.note{color:#666;font-style:italic}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}"""


def page_path(folder: Path, student: str, notebook: str, several: bool) -> Path:
    """``folder/<student>.html`` (``<student>-<notebook>.html`` for several notebooks), from trusted names only:
    :class:`StudentIdError` for one that could leave ``folder``."""
    path = folder / f"{check_id(student)}{f'-{check_id(notebook)}' if several else ''}.html"
    if path.resolve().parent != folder.resolve():  # a symlinked page, say
        raise StudentIdError(student, f"its feedback page {path} leaves {folder}")
    return path


def _text(value: Any) -> str:
    text = "".join(value) if isinstance(value, list) else str(value)
    return _ANSI.sub("", text)


def markdown_html(text: str) -> str:
    """A markdown cell as safe HTML: rendered with raw HTML off, then cleaned by nh3 to :data:`MARKDOWN_TAGS`."""
    if len(text) > MAX_OUTPUT_CHARS * 4:
        text = text[: MAX_OUTPUT_CHARS * 4]
    return nh3.clean(
        _MARKDOWN.render(text),
        tags=set(MARKDOWN_TAGS),
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def _capped(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return html.escape(text)
    cut = len(text) - MAX_OUTPUT_CHARS
    note = _("({cut} more characters not shown)").format(cut=cut)
    return html.escape(text[:MAX_OUTPUT_CHARS]) + f'</pre><p class="note">{note}</p><pre>'


def png_data(value: Any) -> str | None:
    """The base64 of a real PNG image (re-encoded, so only base64 characters reach the page), else None."""
    try:
        raw = base64.b64decode("".join(_text(value).split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw.startswith(b"\x89PNG\r\n\x1a\n") or len(raw) > MAX_PNG_BYTES:
        return None
    return base64.b64encode(raw).decode("ascii")


def error_line(output: Any) -> str:
    """An error output as one message: ``ename: evalue`` (never its traceback, which quotes code)."""
    ename, evalue = _text(output.get("ename", "Error")), _text(output.get("evalue", "")).strip()
    return f"{ename}: {evalue}" if evalue else ename


def _output(output: Any) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        css = "stderr" if output.get("name") == "stderr" else "stdout"
        return f'<pre class="{css}">{_capped(_text(output.get("text", "")))}</pre>'
    if kind == "error":
        return f'<pre class="stderr">{_capped(error_line(output))}</pre>'
    data = output.get("data", {}) if kind in ("execute_result", "display_data") else {}
    png = png_data(data["image/png"]) if "image/png" in data else None
    if png is not None:
        alt = _("a figure")
        return f'<img alt="{alt}" src="data:image/png;base64,{png}">'
    if "text/plain" in data:
        return f"<pre>{_capped(_text(data['text/plain']))}</pre>"
    note = _("(an output that is not plain text or a PNG image is not shown)")
    return f'<p class="note">{note}</p>'


def failure_message(cell: Any) -> str | None:
    """Why a test cell failed, from its error output (None if it raised nothing)."""
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    return error_line(errors[-1]) if errors else None


def _points(grade: CellGrade | None) -> str:
    if grade is None:
        return reasons.CELL_NOT_GRADED
    if grade.score is None:
        return reasons.waits_for_manual_grading(grade.max_score)
    return f"{grade.score:g}/{grade.max_score:g}"


def _state(grade: CellGrade | None) -> str:
    if grade is None or grade.score is None:
        return "pending"
    return "passed" if grade.score >= grade.max_score else "failed"


def _test_cell(gid: str, cell: Any, grade: CellGrade | None, message: str | None) -> str:
    """A test cell: its name, points and message, never its source or outputs."""
    state = _state(grade)
    why = message or failure_message(cell)
    if state == "failed" and why is None:
        why = reasons.NO_POINTS
    body = f"<pre>{_capped(why)}</pre>" if state == "failed" and why else ""
    said = {"passed": _("passed"), "failed": _("failed"), "pending": _("pending")}[state]
    return f'<div class="cell test {state}"><p><b>{html.escape(gid)}</b> {_points(grade)} {said}</p>{body}</div>'


def _comment(grade: CellGrade | None) -> str:
    if grade is None or not grade.comment:
        return ""
    said = _("Instructor's comment:")
    return f'<p class="note">{said}</p><pre>{html.escape(grade.comment)}</pre>'


def _is_test(cell: Any) -> bool:
    """A test cell, shown by its name, points and message only (never its source)."""
    return is_test(cell) or HIDDEN_MARKER in notebooks.source(cell)


def _cell(cell: Any, grades: Mapping[str, CellGrade], messages: Mapping[str, str]) -> str:
    gid = notebooks.grade_id(cell) or ""
    src = notebooks.source(cell)
    if _is_test(cell):
        return _test_cell(gid or "a test", cell, grades.get(gid), messages.get(gid))
    grade = grades.get(gid)
    head = f"<p><b>{html.escape(gid)}</b> {_points(grade)}</p>" if grade is not None else ""
    if cell.get("cell_type") != "code":
        return f'<div class="cell markdown">{head}{markdown_html(_text(src))}{_comment(grade)}</div>'
    outputs = "".join(_output(o) for o in cell.get("outputs", []))
    return f'<div class="cell code">{head}<pre>{_capped(_text(src))}</pre>{outputs}</div>'


def _row_message(gid: str, cell: Any, grade: CellGrade, messages: Mapping[str, str]) -> str:
    """What a row of the score table says beside its points: why a test cell lost them, cut to one line."""
    if _state(grade) != "failed" or not _is_test(cell):
        return ""
    why = messages.get(gid) or failure_message(cell) or reasons.NO_POINTS
    line = why.splitlines()[0] if why.strip() else why
    return html.escape(line if len(line) <= MAX_ROW_MESSAGE else line[: MAX_ROW_MESSAGE - 1] + "…")


def _summary(nb: Any, grades: Mapping[str, CellGrade], messages: Mapping[str, str]) -> str:
    cells: dict[str, Any] = {}
    for c in nb.cells:
        if (g := notebooks.grade_id(c) or "") in grades:
            cells.setdefault(g, c)
    rows = "".join(
        f"<tr><td>{html.escape(g)}</td><td>{_points(grades[g])}</td><td>{_row_message(g, c, grades[g], messages)}</td></tr>"
        for g, c in cells.items()
    )
    known = [grades[g] for g in cells]
    score = sum(g.score or 0.0 for g in known)
    total = sum(g.max_score for g in known)
    pending = f" ({reasons.SOME_POINTS_WAIT})" if any(g.score is None for g in known) else ""
    said = _("Score: {score} / {total}").format(score=f"{score:g}", total=f"{total:g}")
    head = "".join(f"<th>{word}</th>" for word in (_("check"), _("points"), _("message")))
    return f"<p>{said}{pending}</p><table><tr>{head}</tr>{rows}</table>"


def render_feedback(
    nb: Any,
    grades: Mapping[str, CellGrade],
    title: str,
    messages: Mapping[str, str] | None = None,
    *,
    lang: str = "en",
    texts: Mapping[str, str] | None = None,
) -> str:
    """The whole page for one notebook, in ``lang``. ``messages``: {grade_id: why} from the trusted side (the
    re-check). ``texts``: {cell id: markdown} of the release's text in the notebook's language, which the
    page shows instead of the gradebook's copy nbgrader put back (a locked cell; never a written answer)."""
    token = _LANG.set(lang)
    try:
        if texts:
            nb = nbformat.from_dict(nb)
            for cell in nb.cells:
                if cell.get("cell_type") == "markdown" and not notebooks.is_solution(cell) and cell.get("id") in texts:
                    cell.source = texts[cell["id"]]
        cells = "".join(_cell(c, grades, messages or {}) for c in nb.cells)
        return (
            f'<!DOCTYPE html>\n<html lang="{html.escape(lang)}"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
            f"<body><h1>{html.escape(title)}</h1>{_summary(nb, grades, messages or {})}{cells}</body></html>\n"
        )
    finally:
        _LANG.reset(token)


def _edition_texts(source: Path, lang: str) -> dict[str, str] | None:
    """{cell id: markdown} of the locked markdown cells of ``source``'s edition in ``lang``, or None without one."""
    edition = source.parent / lang / source.name
    if not edition.is_file():
        return None
    nb = nbformat.read(str(edition), as_version=4)
    return {
        c["id"]: notebooks.source(c)
        for c in nb.cells
        if c.get("cell_type") == "markdown" and not notebooks.is_solution(c) and "id" in c
    }


def write_feedback(
    autograded: Path,
    grades: Mapping[str, CellGrade],
    out: Path,
    *,
    title: str,
    messages: Mapping[str, str] | None = None,
    source: Path | None = None,
) -> Path:
    """Render ``autograded`` with ``grades`` into ``out``, in the notebook's language; a translated one's locked
    markdown comes from the trusted ``source``'s edition in that language, when there is one."""
    nb = nbformat.read(str(autograded), as_version=4)
    lang = notebooks.language(nb)
    texts = _edition_texts(source, lang) if source is not None and lang != "en" else None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_feedback(nb, grades, title, messages, lang=lang, texts=texts), encoding="utf-8")
    return out


def write_page(
    folder: Path,
    autograded: Path,
    source: Path,
    student: str,
    assignment: str,
    several: bool,
    grades: Mapping[str, CellGrade],
    messages: Mapping[str, str] | None = None,
) -> str | None:
    """The one writer of a student's page for one notebook, in ``folder``: None, or the reason it could not be."""
    try:
        page = page_path(folder, student, autograded.stem, several)
        title = f"{assignment}: {autograded.name}, {student}"
        write_feedback(autograded, grades, page, title=title, messages=messages, source=source)
    except (OSError, ValueError) as e:  # ValueError: an id StudentIdError refuses, or a broken notebook
        return reasons.feedback_not_written(e)
    return None
