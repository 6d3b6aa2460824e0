"""Runs of English prose in a text a Korean learner reads: what a missed translation leaves.

A run is three or more English words in a row, outside quotes, backticks and fenced blocks
(between two lines that start with three backticks: code or data shown as it is), where a word is
plain letters: code-like tokens (identifiers with ``_``, ``.`` or digits, paths, flags, CamelCase,
acronyms such as ``SIGKILL``) and numbers are not prose, so the Korean text that names
``send_email`` or ``reconcile`` beside its Korean words counts none.
"""

from __future__ import annotations

import re

QUOTED = re.compile(r"`[^`\n]*`|\"[^\"\n]*\"|“[^”\n]*”|'[^'\n]*'(?![A-Za-z])|‘[^’\n]*’")
"""Quoted text (a model's words, a name, a shown message) is the text's subject, not its prose."""
TOKEN = re.compile(r"\S+")
WORD = re.compile(r"[(\[]*([A-Za-z][a-z]*(?:'[a-z]+)?)[)\],.;:!?]*")
"""A plain English word, maybe capitalised, with its punctuation; ``send_email``, ``--all``, ``API`` are not."""
RUN = 3
HANGUL = re.compile(r"[\uac00-\ud7a3]")
FENCE = "```"


def english_runs(text: str) -> list[str]:
    """Each run of :data:`RUN` or more English words in ``text`` (quoted text left out), in order."""
    runs: list[str] = []
    for line in _prose_lines(text):
        words: list[str] = []
        for token in TOKEN.findall(line):
            word = _word(token)
            if word:
                words.append(word)
                continue
            if len(words) >= RUN:
                runs.append(" ".join(words))
            words = []
        if len(words) >= RUN:
            runs.append(" ".join(words))
    return runs


def english_lines(text: str) -> list[str]:
    """Each line of ``text`` with an English word and no Korean one: a label or a sentence too short for a run."""
    return [line for line in _prose_lines(text) if not HANGUL.search(line) and any(map(_word, TOKEN.findall(line)))]


def _prose_lines(text: str) -> list[str]:
    """``text``'s lines outside fenced blocks, their quoted text cut."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(FENCE):
            fenced = not fenced
        elif not fenced:
            lines.append(QUOTED.sub(" ¶ ", line))
    return lines


def _word(token: str) -> str | None:
    """The English word ``token`` is (its punctuation cut), or None: a lone letter but "a" and "I" is none."""
    match = WORD.fullmatch(token)
    return match.group(1) if match and (len(match.group(1)) > 1 or match.group(1) in ("a", "I")) else None
