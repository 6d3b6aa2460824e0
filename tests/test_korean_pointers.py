"""The Korean messages point to the Korean lessons as the lessons themselves are titled.

A message that sends a learner back to a lesson quotes a section's title. In Korean it reads
"레슨 2의 4절 '수 3: 상태 불명'" (or "레슨 2의 '보충: …'" for the unnumbered sidebar), and the quoted
title is the Korean lesson's own heading of that number: the `## N.` heading, or a `###` heading inside
section N. The English pointer "lesson N, section M" and the Korean one name the same lesson and section.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from resumable_core.lab import catalogs

LESSONS_KO = Path(__file__).resolve().parents[1] / "lessons" / "ko"

# "레슨 2의 4절 '세 가지 수, 손으로'" or "레슨 2의 '보충: 한 턴에 호출 여러 개'".
KO_POINTER = re.compile(r"레슨 (\d)의 (?:(\d+)절 )?'([^']+)'")
# Any other way of naming a lesson or section: "2강", "2강 3절", "레슨 2, 3절 '…'" with a title.
OTHER_FORMS = re.compile(r"\d강|레슨 \d, \d+절 '")
EN_POINTER = re.compile(r"lesson (\d), section (\d+)")
_TIME = re.compile(r"\s*\*?\((?:약 |≈ ?)\d+분\)\*?\s*$")
_NUMBERED = re.compile(r"^## (\d+)\. (.+)$")


def headings(lesson: int, root: Path = LESSONS_KO) -> dict[int | None, set[str]]:
    """The Korean lesson's titles by section number: `## N.` and the `###` under it; None holds the
    unnumbered `##` sections (the sidebar, the summary)."""
    (path,) = root.glob(f"0{lesson}_*.ipynb")
    out: dict[int | None, set[str]] = {None: set()}
    section: int | None = None
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for line in "".join(cell["source"]).splitlines():
            numbered = _NUMBERED.match(line)
            if numbered:
                section = int(numbered.group(1))
                out.setdefault(section, set()).add(_TIME.sub("", numbered.group(2)))
            elif line.startswith("## "):
                section = None
                out[None].add(_TIME.sub("", line[3:]))
            elif line.startswith("### ") and section is not None:
                out[section].add(_TIME.sub("", line[4:]))
    return out


def wrong_pointers(text: str, root: Path = LESSONS_KO) -> list[str]:
    """Each Korean lesson pointer in `text` whose quoted title is not that section's Korean heading."""
    wrong = []
    for m in KO_POINTER.finditer(text):
        lesson, section, title = int(m.group(1)), m.group(2), m.group(3)
        titles = headings(lesson, root).get(int(section) if section else None, set())
        if title not in titles:
            wrong.append(f"{m.group(0)}: the Korean lesson's headings there are {sorted(titles)}")
    return wrong


def _ko_messages() -> list[tuple[str, str, str]]:
    every = catalogs._all_catalogs()
    out = []
    for domain, catalog in sorted(every.items()):
        for m in catalogs.read(catalog, "ko"):
            if not m.id:
                continue
            ids = m.id if isinstance(m.id, (list, tuple)) else (m.id,)
            strings = m.string if isinstance(m.string, (list, tuple)) else (m.string,)
            out.append((domain, " ".join(ids), " ".join(s or "" for s in strings)))
    return out


def test_the_catalogs_point_to_lessons() -> None:
    """The scan is not empty: the catalogs do point to Korean lesson sections."""
    assert len([1 for _, _, ko in _ko_messages() if KO_POINTER.search(ko)]) >= 15


def test_every_quoted_section_title_is_the_korean_lessons_heading() -> None:
    wrong = [f"{domain}: {w}" for domain, _, ko in _ko_messages() for w in wrong_pointers(ko)]
    assert wrong == []


def test_lessons_are_named_one_way() -> None:
    """No "2강 3절" or other form: the glossary's 레슨 N, and 레슨 N의 M절 before a quoted title."""
    other = [f"{domain}: {ko}" for domain, _, ko in _ko_messages() if OTHER_FORMS.search(ko)]
    assert other == []


def test_the_korean_pointer_names_the_english_ones_lesson_and_section() -> None:
    mismatched = []
    for domain, en, ko in _ko_messages():
        english = [(int(a), int(b)) for a, b in EN_POINTER.findall(en)]
        korean = [(int(m.group(1)), int(m.group(2))) for m in KO_POINTER.finditer(ko) if m.group(2)]
        if english and english != korean:
            mismatched.append(f"{domain}: {en!r} -> {ko!r}")
    assert mismatched == []


@pytest.mark.parametrize(
    "planted",
    [
        "다시 읽어 보세요: 레슨 2의 4절 '방법 3: 상태 알 수 없음'",  # a title of its own
        "다시 읽어 보세요: 레슨 2의 5절 '수 3: 상태 불명'",  # a real heading, of another section
        "다시 읽어 보세요: 레슨 2의 '곁들임: 한 턴에 여러 호출'",  # the sidebar, retitled
    ],
)
def test_a_planted_wrong_title_is_caught(planted: str) -> None:
    assert wrong_pointers(planted) != []


def test_the_right_titles_pass_and_other_forms_are_caught() -> None:
    assert wrong_pointers("(다시 읽어 보세요: 레슨 2의 4절 '수 3: 상태 불명')") == []
    assert wrong_pointers("레슨 2의 4절 '세 가지 수, 손으로'") == []
    assert wrong_pointers("레슨 1의 8절 '`turns`와 `tokens_used`는 이어진다'") == []
    assert wrong_pointers("레슨 2의 '보충: 한 턴에 호출 여러 개'") == []
    assert OTHER_FORMS.search("다시 읽어 보세요: 2강 3절 '순진하게 재개하기: API가 거절한다'")
