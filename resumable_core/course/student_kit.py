"""Build the kits: ``dist/student-kit/`` and a deterministic ``dist/student-kit.zip``, and the self-study edition.

The student kit holds what a learner needs and nothing that answers the exercises. ``MANIFEST``
below is the one list of what goes in; the kit's own README, Makefile, pyproject and tests are the
files under ``resumable_core/course/kit/``. ``tests/test_student_kit.py`` checks the zip against
``solutions/``.

The self-study edition (``--edition self-study-kit``, ``make self-study-kit``) is for a reader
without a class: the student kit plus every check, the hidden ones included (``course/hidden/``
and the nbgrader sources in ``solutions/``, which ``check --all`` reads its test cells from), and
in each exercise a worked solution folded after each answer cell (:func:`fold_solutions`). Its
own files are those of ``kit/self-study/``, laid over the student kit's.
``tests/test_self_study_kit.py`` checks it.

The Korean kits (``--lang ko``, ``make student-kit LANG=ko``; :func:`localize`) are the same
editions in Korean: their ``lessons/`` and ``simulator/`` are the repository's ``lessons/ko/`` and
``simulator/ko/``, each ``exercises/<a>/<a>.ipynb`` is the Korean release
(``exercises/<a>/ko/<a>.ipynb``, :func:`.release.translate_release`), the Korean self-study kit's
``solutions/<a>/<a>.ipynb`` the Korean source (its worked solutions and whole test cells), and a kit template named
``<name>.ko.<ext>`` replaces ``<name>.<ext>`` (``README.ko.md``, ``kit.ko.mk``, which makes the
kit's ``make lab`` speak Korean). Its copy of the library says its language (``i18n.KIT_LANGUAGE``), so its
notebooks and commands speak Korean however they are started. An English kit ships no ``ko/`` folder but the ko↔en glossary,
``lessons/ko/GLOSSARY.md``. ``tests/test_korean_kit.py`` checks them.

    python -m resumable_core.course.student_kit [--edition student-kit|self-study-kit] [--lang en|ko] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..lab.i18n import DEFAULT, KIT_LANGUAGE, LANGUAGES
from .errors import CourseError

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = Path(__file__).resolve().parent / "kit"
KIT_NAME = "student-kit"

# What the kit holds, as repository paths ("/" at the end: a folder's files). A file ships when
# the longest entry that covers it is "+"; a file no entry covers does not ship.
MANIFEST: tuple[tuple[str, str], ...] = (
    ("+", "lessons/"),
    ("+", "exercises/"),  # the nbgrader release: solutions blanked, hidden tests removed
    ("+", "simulator/"),
    ("+", "resumable_core/"),  # the core and the lab wing
    ("-", "resumable_core/course/"),  # the instructor's: grading, hidden checks, this builder
    ("+", "resumable_core/course/__init__.py"),
    ("+", "resumable_core/course/errors.py"),  # the course wing's error root, which the checks' errors subclass
    ("+", "resumable_core/course/checks/"),  # the visible checks the exercises call
    ("+", "resumable_core/course/self_check.py"),  # python -m resumable_core check (make check NB=...)
    ("+", "resumable_core/course/i18n.py"),  # the catalog of check's and the visible checks' messages
    ("+", "resumable_core/course/locale/"),
)
# What the self-study edition adds: every check, and where `check --all` reads the hidden test cells.
SELF_STUDY_MANIFEST: tuple[tuple[str, str], ...] = (
    *MANIFEST,
    (
        "+",
        "resumable_core/course/hidden/",
    ),  # the hidden checks, their catalog too (and the answer strategies the simulator runs)
    ("+", "solutions/"),  # the nbgrader sources: every test cell whole, hidden blocks included
)
# Never shipped, wherever they are: caches and editor leftovers.
JUNK_NAMES = frozenset(
    {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".DS_Store"}
)
JUNK_SUFFIXES = (".pyc", ".pyo")
# The kit's [dev] extra: only what its own tests need, at the repository's pinned versions.
KIT_DEV_PACKAGES = ("pytest",)
# Every entry of the zip carries one date, the source's, so builds of one commit write the same bytes:
# SOURCE_DATE_EPOCH (reproducible-builds.org) if set, else the last commit's date, else this one.
FALLBACK_EPOCH = 1767225600  # 2026-01-01 00:00:00 UTC
ZIP_EARLIEST_EPOCH = 315532800  # 1980-01-01 00:00:00 UTC: no zip entry can be dated before
TEMPLATE_SUFFIX = ".in"  # a template whose @NAME@ fields are filled from the repository's pyproject


@dataclass(frozen=True)
class Edition:
    """One kit: its name (the folder and the zip's), what it ships, its own files, whether answers are folded in."""

    name: str
    manifest: tuple[tuple[str, str], ...]
    templates: tuple[Path, ...]
    """Folders of the kit's own files; a later one's file replaces an earlier one's of the same name."""
    worked_solutions: bool
    """Fold the instructor's solution after each answer cell of each exercise (:func:`fold_solutions`)."""
    lang: str = "en"
    """The kit's language: ``en``, or a translation's (``ko``): see :func:`localize`."""


SELF_STUDY_TEMPLATES = TEMPLATES / "self-study"
STUDENT = Edition(KIT_NAME, MANIFEST, (TEMPLATES,), worked_solutions=False)
SELF_STUDY = Edition("self-study-kit", SELF_STUDY_MANIFEST, (TEMPLATES, SELF_STUDY_TEMPLATES), worked_solutions=True)
EDITIONS = {edition.name: edition for edition in (STUDENT, SELF_STUDY)}
TRANSLATED_FOLDERS = ("lessons", "simulator")
"""Folders whose Korean edition is ``<folder>/ko/``: in a Korean kit its files replace the folder's."""
GLOSSARY = "lessons/ko/GLOSSARY.md"
"""The ko↔en glossary: in every kit (the Korean kits' ``lessons/GLOSSARY.md``), once it is written."""
UNTRANSLATED_OK = frozenset({"lessons/GLOSSARY.md"})
"""English files a Korean kit keeps while they have no Korean edition (the ko↔en glossary is not written yet)."""


def edition(name: str, lang: str = "en") -> Edition:
    """The edition ``name`` (``student-kit``, ``self-study-kit``) in ``lang``: the Korean ones are named ``<name>-ko``."""
    if lang not in LANGUAGES:
        raise ValueError(f"no kit in {lang!r}: the kit's languages are {', '.join(LANGUAGES)}")
    base = EDITIONS[name]
    if lang == "en":
        return base
    return Edition(f"{base.name}-{lang}", base.manifest, base.templates, base.worked_solutions, lang=lang)


class StudentKitError(CourseError):
    """The kit cannot be built from this tree. Carries the ``path`` and a one-line ``reason``."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def ships(relative: str, edition: Edition = STUDENT) -> bool:
    """Whether the repository file at ``relative`` (a POSIX path) goes into the kit."""
    covering = [
        (len(entry), sign == "+")
        for sign, entry in edition.manifest
        if relative == entry or (entry.endswith("/") and relative.startswith(entry))
    ]
    return max(covering)[1] if covering else False


def is_junk(relative: Path) -> bool:
    """A cache or leftover file that never ships."""
    return any(part in JUNK_NAMES for part in relative.parts) or relative.suffix in JUNK_SUFFIXES


def _files_under(root: Path, folder: Path) -> Iterator[Path]:
    """Every file under ``folder``, as paths relative to ``root``, junk left out."""
    for path in folder.rglob("*"):
        relative = path.relative_to(root)
        if path.is_file() and not is_junk(relative):
            yield relative


def repository_files(root: Path = REPO_ROOT, edition: Edition = STUDENT) -> dict[str, Path]:
    """The repository's shipped files: kit path -> source file."""
    files = {}
    for entry in (entry for sign, entry in edition.manifest if sign == "+"):
        source = root / entry
        if not source.exists():
            raise StudentKitError(source, "listed in the kit's MANIFEST but missing; build from a full checkout")
        candidates = _files_under(root, source) if source.is_dir() else [Path(entry)]
        for relative in candidates:
            if ships(relative.as_posix(), edition):
                files[relative.as_posix()] = root / relative
    return files


def _toml_list(items: list[str]) -> str:
    """A TOML array of strings, one per line."""
    return "[\n" + "".join(f'    "{item}",\n' for item in items) + "]"


def _package_name(requirement: str) -> str:
    """The distribution name at the start of a requirement string."""
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    return match.group(0).lower() if match else ""


def template_fields(root: Path = REPO_ROOT) -> dict[str, str]:
    """The ``@NAME@`` fields of the kit's templates, read from the repository's pyproject.toml."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    dev = [r for r in extras["dev"] if _package_name(r) in KIT_DEV_PACKAGES]
    return {
        "VERSION": project["version"],
        "REQUIRES_PYTHON": project["requires-python"],
        "DEPENDENCIES": _toml_list(project["dependencies"]),
        "LAB": _toml_list(extras["lab"]),
        "DEV": _toml_list(dev),
    }


def render(template: Path, fields: dict[str, str]) -> bytes:
    """A template's text with every ``@NAME@`` replaced; an unknown field is an error."""
    text = template.read_text(encoding="utf-8")
    unknown = sorted(set(re.findall(r"@([A-Z_]+)@", text)) - set(fields))
    if unknown:
        raise StudentKitError(template, f"unknown template fields {unknown}; add them to template_fields()")
    for name, value in fields.items():
        text = text.replace(f"@{name}@", value)
    if template.name.endswith(".toml" + TEMPLATE_SUFFIX):
        tomllib.loads(text)  # raises on a template that renders to invalid TOML
    return text.encode("utf-8")


def template_files(folder: Path) -> Iterator[Path]:
    """A template folder's files, relative to it; the self-study edition's folder inside ``kit/`` is left out."""
    inner = SELF_STUDY_TEMPLATES.name if folder == TEMPLATES else None
    return (relative for relative in _files_under(folder, folder) if relative.parts[0] != inner)


def template_language(relative: Path) -> tuple[str | None, Path]:
    """A template's language and the kit file it makes: ``README.ko.md`` is Korean and makes ``README.md``."""
    parts = relative.name.split(".")
    for lang in LANGUAGES[1:]:
        if lang in parts[1:]:
            parts.remove(lang)
            return lang, relative.with_name(".".join(parts))
    return None, relative


def translation_of(name: str) -> tuple[str, str] | None:
    """``(lang, kit path)`` for a repository file that is a translation, else None.

    ``lessons/ko/X`` and ``simulator/ko/X`` make the Korean kit's ``lessons/X`` and ``simulator/X``;
    ``exercises/<a>/ko/<a>.ipynb`` its ``exercises/<a>/<a>.ipynb``; a translated nbgrader source,
    ``solutions/<a>/ko/<a>.ipynb``, the Korean self-study kit's ``solutions/<a>/<a>.ipynb`` (where
    ``check --all`` reads the whole test cells, so their comments are Korean too; the student kit ships
    no ``solutions/``).
    """
    parts = Path(name).parts
    for lang in LANGUAGES[1:]:
        if len(parts) > 2 and parts[0] in TRANSLATED_FOLDERS and parts[1] == lang:
            return lang, Path(parts[0], *parts[2:]).as_posix()
        if len(parts) > 3 and parts[0] in ("exercises", "solutions") and parts[2] == lang:
            return lang, Path(parts[0], parts[1], *parts[3:]).as_posix()
    return None


def needs_translation(name: str) -> bool:
    """Whether a Korean kit must have its own edition of this English kit path (a lesson, the simulator, an exercise)."""
    parts = Path(name).parts
    exercise = parts[0] == "exercises" and name.endswith(".ipynb")
    return (parts[0] in TRANSLATED_FOLDERS or exercise) and name not in UNTRANSLATED_OK


def localize(files: dict[str, Path], lang: str) -> dict[str, Path]:
    """The repository files of a kit in ``lang`` (kit path -> source file), from the English kit's.

    English: every translation left out but the ko↔en glossary (:data:`GLOSSARY`). A translation:
    each of its files in place of the English one of the same kit path (:func:`translation_of`). An
    English lesson, simulator page or exercise without its translation is an error that names them
    all (but the glossary while it is not written: :data:`UNTRANSLATED_OK`).
    """
    english: dict[str, Path] = {}
    translated: dict[str, Path] = {}
    for name, source in files.items():
        of = translation_of(name)
        if of is None or (lang == "en" and name == GLOSSARY):
            english[name] = source
        elif of[0] == lang:
            translated[of[1]] = source
    if lang == "en":
        return english
    missing = sorted(n for n in english if needs_translation(n) and n not in translated)
    if missing:
        raise StudentKitError(
            Path(lang),
            f"no {lang} edition of {', '.join(missing)} (write lessons/{lang}/, simulator/{lang}/; make release)",
        )
    return dict(sorted({**english, **translated}.items()))


_UP_ONE = re.compile(r"(\]\()\.\./")
"""A markdown link that climbs one folder: a file lifted from ``lessons/ko/`` to ``lessons/`` climbs one less."""
_TO_KO = re.compile(r"(\]\([^)\s]*?)/ko/")
"""A link to another Korean edition (``exercises/<a>/ko/<a>.ipynb``): in the Korean kit that file is lifted too."""


def _lift_links(text: str) -> str:
    return _TO_KO.sub(r"\1/", _UP_ONE.sub(r"\1", text))


def lifted(data: bytes, name: str) -> bytes:
    """A translation's file as the Korean kit holds it one folder up: each relative ``](../`` link one ``../`` shorter
    and each link into a ``ko/`` folder to the file lifted out of it (markdown files, and a notebook's markdown cells
    only: its code stays the English code byte for byte)."""
    if name.endswith(".md"):
        return _lift_links(data.decode("utf-8")).encode("utf-8")
    if not name.endswith(".ipynb"):
        return data
    nb = json.loads(data)
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = _lift_links(text).splitlines(keepends=True)
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def kit_contents(root: Path = REPO_ROOT, edition: Edition = STUDENT) -> dict[str, bytes]:
    """Every file of the kit: kit path -> bytes, the repository's files and the kit's own, in the edition's language."""
    files = localize(repository_files(root, edition), edition.lang)
    contents = {name: source.read_bytes() for name, source in files.items()}
    for name, source in files.items():
        of = translation_of(source.relative_to(root).as_posix()) if source.is_relative_to(root) else None
        if of is not None and Path(name).parts[0] in TRANSLATED_FOLDERS:  # lifted out of its ko/ folder
            contents[name] = lifted(contents[name], name)
    if edition.worked_solutions:
        for name in [n for n in contents if n.startswith("exercises/") and n.endswith(".ipynb")]:
            released = Path(name).relative_to("exercises")
            source = root / "solutions" / released
            if edition.lang != "en":  # the Korean source: its written answers are in Korean, its code the same
                source = root / "solutions" / released.parent / edition.lang / released.name
            contents[name] = fold_solutions(contents[name], source, WORKED_SUMMARIES[edition.lang])
    if edition.lang != DEFAULT:  # its notebooks sit in no ko/ folder: the kit's library says its language
        contents[KIT_LANGUAGE.relative_to(REPO_ROOT).as_posix()] = f"{edition.lang}\n".encode()
    fields = template_fields(root)
    for folder in edition.templates:
        for relative in template_files(folder):
            lang, made = template_language(relative)
            if lang not in (None, edition.lang) or (lang is None and _has_translation(folder, relative, edition.lang)):
                continue  # another language's template, or the English one of a template this kit has translated
            name = made.as_posix()
            if name.endswith(TEMPLATE_SUFFIX):
                contents[name.removesuffix(TEMPLATE_SUFFIX)] = render(folder / relative, fields)
            else:
                contents[name] = (folder / relative).read_bytes()
    return dict(sorted(contents.items()))


def _has_translation(folder: Path, relative: Path, lang: str) -> bool:
    """Whether the template ``relative`` of ``folder`` has a ``lang`` edition beside it (``README.md``: ``README.ko.md``)."""
    if lang == "en":
        return False
    stem, dot, suffix = relative.name.partition(".")
    translated = relative.with_name(f"{stem}.{lang}{dot}{suffix}" if dot else f"{stem}.{lang}")
    return (folder / translated).exists()


# -- the self-study edition's worked solutions ------------------------------------------------

SOLUTION_MARKER_LINES = ("### BEGIN SOLUTION", "### END SOLUTION")
WORKED_SUFFIX = "-worked"
"""Appended to an answer cell's id to make the id of its worked solution's cell."""
WORKED_SUMMARY = "Worked solution (the instructor's): open it after your own attempt"
WORKED_SUMMARIES = {"en": WORKED_SUMMARY, "ko": "풀이 예시(강사의 풀이): 먼저 스스로 풀어 본 다음에 여십시오"}


def _grade(cell: dict[str, Any]) -> dict[str, Any]:
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def _text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def without_markers(text: str) -> str:
    """A solution cell's text without nbgrader's BEGIN/END SOLUTION lines."""
    kept = [line for line in text.splitlines() if line.strip() not in SOLUTION_MARKER_LINES]
    return "\n".join(kept).strip("\n")


def worked_cell(answer: dict[str, Any], solution: dict[str, Any], summary: str = WORKED_SUMMARY) -> dict[str, Any]:
    """The markdown cell that holds ``solution`` (a source notebook's answer cell) folded in a ``<details>``.

    Markdown, not a code cell with ``jupyter.source_hidden``: a hidden code cell still runs on Run
    All and under ``check``, and would redefine the learner's function with the instructor's right
    after the learner's cell, so the tests below it would grade the answer, not the attempt. A
    ``<details>`` block renders folded in JupyterLab 4 (its sanitizer keeps ``details`` and
    ``summary``), Notebook 7, VS Code and GitHub alike, opens with one click, and never runs.
    """
    body = without_markers(_text(solution))
    if solution.get("cell_type") == "code":
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", body)), default=0))
        body = f"{fence}python\n{body}\n{fence}"
    source = f"<details>\n<summary><b>{summary}</b></summary>\n\n{body}\n\n</details>"
    return {"cell_type": "markdown", "id": f"{answer['id']}{WORKED_SUFFIX}"[:64], "metadata": {}, "source": source}


def fold_solutions(released: bytes, source: Path, summary: str = WORKED_SUMMARY) -> bytes:
    """A released exercise notebook with the source notebook's solution folded after each answer cell."""
    nb = json.loads(released)
    if not source.exists():
        raise StudentKitError(source, "the source notebook of a released exercise is missing; run make release")
    solutions = {
        _grade(cell)["grade_id"]: cell
        for cell in json.loads(source.read_text(encoding="utf-8"))["cells"]
        if _grade(cell).get("solution")
    }
    cells = []
    for cell in nb["cells"]:
        cells.append(cell)
        grade = _grade(cell)
        if grade.get("solution"):
            if grade.get("grade_id") not in solutions:
                raise StudentKitError(source, f"has no answer cell {grade.get('grade_id')!r}; run make release")
            cells.append(worked_cell(cell, solutions[grade["grade_id"]], summary))
    nb["cells"] = cells
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def write_folder(contents: dict[str, bytes], folder: Path) -> None:
    """Write the kit unpacked into ``folder``, replacing what was there."""
    if folder.exists():
        shutil.rmtree(folder)
    for name, data in contents.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def source_epoch(root: Path = REPO_ROOT) -> int:
    """The kit's date in seconds since 1970: ``SOURCE_DATE_EPOCH``, else ``root``'s last commit, else a constant."""
    given = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if given:
        if not given.isdigit():
            raise StudentKitError(root, f"SOURCE_DATE_EPOCH={given!r} is not a number of seconds since 1970")
        return int(given)
    if not (root / ".git").exists():  # not a checkout (or inside someone else's): no commit date to ask for
        return FALLBACK_EPOCH
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):  # no git on this machine, or a hung one
        return FALLBACK_EPOCH
    stamp = done.stdout.strip()
    return int(stamp) if done.returncode == 0 and stamp.isdigit() else FALLBACK_EPOCH


def zip_date(epoch: int) -> tuple[int, int, int, int, int, int]:
    """A zip entry's date and time for ``epoch``: UTC, so every machine writes the same, to zip's 2 s."""
    year, month, day, hour, minute, second = time.gmtime(max(epoch, ZIP_EARLIEST_EPOCH))[:6]
    return year, month, day, hour, minute, second - second % 2


def write_zip(
    contents: dict[str, bytes], path: Path, date_time: tuple[int, int, int, int, int, int], top: str = KIT_NAME
) -> None:
    """Write the kit as a zip under one top folder: sorted entries, one date (``date_time``), fixed modes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(contents):
            info = zipfile.ZipInfo(f"{top}/{name}", date_time=date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, so the mode below is read on every platform
            info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            archive.writestr(info, contents[name])


def build(out: Path, root: Path = REPO_ROOT, edition: Edition = STUDENT) -> tuple[Path, Path]:
    """Build ``out/<kit>/`` and ``out/<kit>.zip`` (``student-kit`` by default) from the repository; return both."""
    contents = kit_contents(root, edition)
    out.mkdir(parents=True, exist_ok=True)
    folder, archive = out / edition.name, out / f"{edition.name}.zip"
    write_folder(contents, folder)
    write_zip(contents, archive, zip_date(source_epoch(root)), top=edition.name)
    return folder, archive


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = argparse.ArgumentParser(
        prog="python -m resumable_core.course.student_kit",
        description=(
            f"Build the student kit: OUT/{KIT_NAME}/ and the same files in a deterministic OUT/{KIT_NAME}.zip\n"
            "(lessons, exercises, simulator, the core and lab wings, the visible checks; no answers).\n"
            f"--edition {SELF_STUDY.name}: the same plus every check, hidden ones included, and a worked\n"
            "solution folded after each answer cell, for a reader without a class."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--edition", choices=list(EDITIONS), default=KIT_NAME, help=f"which kit to build (default: {KIT_NAME})"
    )
    parser.add_argument(
        "--lang",
        choices=LANGUAGES,
        default="en",
        help="the kit's language (ko: OUT/<kit>-ko/ and its zip; default: en)",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "dist", metavar="OUT", help="folder to write into (default: dist/)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line: build the kit and say where it is."""
    args = build_parser().parse_args(argv)
    kit = edition(args.edition, args.lang)
    try:
        folder, archive = build(args.out, edition=kit)
    except StudentKitError as error:
        print(f"{kit.name}: {error}", file=sys.stderr)
        return 1
    count = sum(1 for p in folder.rglob("*") if p.is_file())
    print(f"{archive} ({archive.stat().st_size // 1024} KiB, {count} files); unpacked in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
