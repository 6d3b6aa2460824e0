"""The Korean edition's notebooks, paired with the English ones so that their code cannot drift.

A Korean notebook lives in a `ko/` folder beside its English one (`lessons/ko/01_….ipynb`,
`simulator/ko/simulator.ipynb`, `solutions/<a>/ko/<a>.ipynb`, `exercises/<a>/ko/<a>.ipynb`).
The two pair cell by cell, by id: same cells, same order, same types, same metadata. A code cell
is the English one byte for byte, or differs only in its comments; a markdown cell is translated.

`python -m resumable_core.lab.editions check` lists every drift (`tests/test_editions.py` fails on
any); `python -m resumable_core.lab.editions sync` copies each changed code cell of the English
notebooks into the Korean ones, and says which markdown cells a translator must add or remove.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
LANG = "ko"
#: Where English notebooks live whose Korean editions sit in a `ko/` folder beside them (globs from the root).
ENGLISH_NOTEBOOKS = ("lessons/*.ipynb", "simulator/*.ipynb", "solutions/*/*.ipynb", "exercises/*/*.ipynb")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_CODE_SPAN = re.compile(r"```.*?```|`[^`]*`|\$[^$]*\$|<[^>]+>|\([^)]*\)", re.S)
_WORD = re.compile(r"[A-Za-z]{4,}")


@dataclass(frozen=True)
class Pair:
    """An English notebook and its Korean edition (which may not exist yet)."""

    english: Path
    korean: Path


def korean_of(english: Path) -> Path:
    """Where the Korean edition of `english` lives: a `ko/` folder beside it, same file name."""
    return english.parent / LANG / english.name


def pairs(root: Path = REPO_ROOT) -> list[Pair]:
    """Every English notebook of the kit with its Korean edition's path."""
    found = {p for pattern in ENGLISH_NOTEBOOKS for p in root.glob(pattern) if p.parent.name != LANG}
    return [Pair(p, korean_of(p)) for p in sorted(found)]


def without_comments(source: str) -> str | None:
    """`source` with its comments cut (and the spaces before them, and lines that held only one); None if it does not tokenize."""
    try:
        comments = [
            t.start for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    for row, col in comments:
        line = lines[row - 1]
        ending = line[len(line.rstrip("\r\n")) :]
        code = line[:col].rstrip()
        if code:
            lines[row - 1] = code + ending
        else:
            drop.add(row - 1)
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def _comment_columns(source: str) -> dict[int, int] | None:
    """{0-based line: the column its comment starts at} (None if it does not tokenize)."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return {t.start[0] - 1: t.start[1] for t in tokens if t.type == tokenize.COMMENT}
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def carry_comments(english: str, korean: str) -> str:
    """`english`'s code with `korean`'s comments wherever the code they sit on or above is unchanged.

    A comment at the end of a line goes with that line's code; a block of comment lines goes with
    the code line after it (when the block has as many lines), and a block after the last code line
    with the cell's end. Whatever has no match keeps the English comment, so the result is always the
    English code.
    """
    en_cols, ko_cols = _comment_columns(english), _comment_columns(korean)
    if en_cols is None or ko_cols is None:
        return english
    # a code line may come more than once: its comments are taken in order
    inline: dict[str, list[str]] = {}
    above: dict[str, list[list[str]]] = {}
    block: list[str] = []
    for i, line in enumerate(korean.splitlines(keepends=True)):
        col = ko_cols.get(i)
        if col is not None and line[:col].strip():
            inline.setdefault(line[:col].rstrip(), []).append(line[col:].rstrip("\r\n"))
        elif col is not None:
            block.append(line)
            continue
        if line.strip():
            above.setdefault((line[:col] if col is not None else line).rstrip(), []).append(block)
        block = []
    out: list[str] = []
    pending: list[str] = []
    for i, line in enumerate(english.splitlines(keepends=True)):
        col = en_cols.get(i)
        if col is not None and not line[:col].strip():
            pending.append(line)
            continue
        code = (line[:col] if col is not None else line).rstrip()
        korean_block = above[code].pop(0) if code and above.get(code) else None
        out += korean_block if korean_block is not None and len(korean_block) == len(pending) else pending
        pending = []
        if col is not None and inline.get(code):
            line = line[:col] + inline[code].pop(0) + line[len(line.rstrip("\r\n")) :]
        out.append(line)
    if block and len(block) == len(pending):  # comments after the last code line: the cell's end is their code
        ending = pending[-1][len(pending[-1].rstrip("\r\n")) :]
        pending = [*block[:-1], block[-1].rstrip("\r\n") + ending]
    out += pending
    carried = "".join(out)
    return carried if same_code(english, carried) else english


def same_code(english: str, korean: str) -> bool:
    """True when the two sources are the same code byte for byte once their comments are cut."""
    if english == korean:
        return True
    a, b = without_comments(english), without_comments(korean)
    return a is not None and a == b


def _untranslated(english: str, korean: str) -> bool:
    # A cell of prose must carry Hangul; one with no English word outside code spans may stay as it is.
    if _HANGUL.search(korean):
        return False
    return bool(_WORD.search(_CODE_SPAN.sub(" ", english)))


def _answer_area(cell: dict[str, Any]) -> bool:
    # a written answer's cell (nbgrader's solution cell): the learner writes there, in either language
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def _cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def drift(english: Path, korean: Path) -> list[str]:
    """Every way `korean` drifted from `english`, one line each naming the cell (none: they agree)."""
    if not korean.exists():
        return [f"{korean}: missing (the Korean edition of {english.name}); copy {english} there and translate it"]
    en, ko = _cells(english), _cells(korean)
    en_ids, ko_ids = [c.get("id") for c in en], [c.get("id") for c in ko]
    out: list[str] = []
    if en_ids != ko_ids:
        lacks = [i for i in en_ids if i not in ko_ids]
        extra = [i for i in ko_ids if i not in en_ids]
        if lacks:
            out.append(f"{korean}: lacks the English cells {lacks}; add them (translated) in the English order")
        if extra:
            out.append(f"{korean}: has cells the English lacks {extra}; remove them")
        if not lacks and not extra:
            out.append(f"{korean}: the cells are in another order than the English; put them in the English order")
        return out
    for e, k in zip(en, ko):
        where = f"{korean}: cell {e.get('id')}"
        if e["cell_type"] != k["cell_type"]:
            out.append(f"{where} is {k['cell_type']}, the English is {e['cell_type']}")
        elif e.get("metadata", {}) != k.get("metadata", {}):
            out.append(f"{where}: metadata differs from the English (nbgrader's above all: copy it back)")
        elif e["cell_type"] == "code" and not same_code(_source(e), _source(k)):
            out.append(
                f"{where}: its code differs from the English (only comments may); run `python -m resumable_core.lab.editions sync`"
            )
        elif e["cell_type"] == "markdown" and not _answer_area(e) and _untranslated(_source(e), _source(k)):
            out.append(f"{where}: not translated (no Korean in it)")
        if e["cell_type"] == "code" and (k.get("outputs") or k.get("execution_count")):
            out.append(f"{where}: has outputs; clear them (no outputs are committed)")
    return out


def check(root: Path = REPO_ROOT) -> list[str]:
    """Every drift of every Korean notebook from its English one, a missing edition included."""
    return [line for pair in pairs(root) for line in drift(pair.english, pair.korean)]


def sync(english: Path, korean: Path) -> list[str]:
    """Copy into `korean` each code cell of `english` whose code it lacks (by id), its Korean comments kept where
    their code is unchanged (:func:`carry_comments`); say what else a translator must do."""
    if not korean.exists():
        return [f"{korean}: missing; copy {english} there and translate it"]
    notebook = json.loads(korean.read_text(encoding="utf-8"))
    by_id = {c.get("id"): c for c in _cells(english)}
    changed = 0
    for cell in notebook["cells"]:
        e = by_id.get(cell.get("id"))
        if e is not None and e["cell_type"] == cell["cell_type"] == "code" and not same_code(_source(e), _source(cell)):
            carried = carry_comments(_source(e), _source(cell))
            cell["source"] = carried.splitlines(keepends=True)
            changed += 1
    if changed:
        korean.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    left = [line for line in drift(english, korean) if "its code differs" not in line]
    return [f"{korean}: {changed} code cell(s) copied from the English", *left] if changed else left


def main(argv: list[str] | None = None) -> int:
    """`check` (exit 1 on any drift) or `sync` every Korean notebook."""
    parser = argparse.ArgumentParser(prog="python -m resumable_core.lab.editions", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("check", "sync"))
    args = parser.parse_args(argv)
    if args.action == "check":
        lines = check()
    else:
        lines = [line for pair in pairs() for line in sync(pair.english, pair.korean)]
    for line in lines:
        print(line)
    return 1 if args.action == "check" and lines else 0


if __name__ == "__main__":
    sys.exit(main())
