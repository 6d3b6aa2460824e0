"""The Korean kits (`make student-kit LANG=ko`, `make self-study-kit LANG=ko`), built from a course with Korean editions.

The Korean lessons, simulator page and exercise sources are being written beside this builder, so
the course these tests build from is a copy of the repository with stand-ins: each English lesson,
page and source copied under ``ko/`` with its first markdown cell in Korean (where the repository
already has a Korean edition, it is used as it is).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from resumable_core.course import release, student_kit

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = "# 한국어 대역(stand-in)\n\n이 칸은 한국어판이 들어올 자리입니다."


def _korean_copy(english: Path, korean: Path) -> None:
    """``korean``: ``english`` with its first markdown cell in Korean (a stand-in), unless it exists already."""
    if korean.exists():
        return
    korean.parent.mkdir(parents=True, exist_ok=True)
    if english.suffix != ".ipynb":
        korean.write_text(STAND_IN + "\n", encoding="utf-8")
        return
    nb = json.loads(english.read_text(encoding="utf-8"))
    next(c for c in nb["cells"] if c["cell_type"] == "markdown")["source"] = STAND_IN
    korean.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the course with a Korean edition of every lesson, the simulator page and every exercise."""
    root = tmp_path_factory.mktemp("course")
    junk = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc")
    for folder in ("lessons", "simulator", "exercises", "solutions", "resumable_core"):
        shutil.copytree(ROOT / folder, root / folder, ignore=junk)
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    for folder in student_kit.TRANSLATED_FOLDERS:
        for english in sorted((root / folder).glob("*")):
            if english.is_file() and english.name != "GLOSSARY.md":  # the glossary's absence is tolerated
                _korean_copy(english, root / folder / "ko" / english.name)
    for assignment in release.ASSIGNMENTS:
        _korean_copy(release.notebook_path(assignment, root), release.translated_path(assignment, "ko", root))
        release.release_translations(root, assignment)
    return root


def _build(course: Path, out: Path, name: str = "student-kit", lang: str = "ko") -> Path:
    folder, archive = student_kit.build(out, course, student_kit.edition(name, lang))
    unzipped = out / "unzipped"
    with zipfile.ZipFile(archive) as z:
        z.extractall(unzipped)
    assert archive.name == f"{folder.name}.zip" and (unzipped / folder.name).is_dir()
    return unzipped / folder.name


def _files(kit: Path) -> set[str]:
    return {p.relative_to(kit).as_posix() for p in kit.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_the_korean_student_kit_holds_the_korean_editions(course: Path, tmp_path: Path) -> None:
    """Lessons, simulator and exercises are the Korean ones, at the English paths; no ko/ folder, no source."""
    kit = _build(course, tmp_path)
    assert kit.name == "student-kit-ko"
    names = _files(kit)
    english = _files(_build(course, tmp_path / "en", lang="en"))
    assert {n for n in names if "/ko/" in n and "/locale/" not in n} == set()
    own = {"kit.mk", "resumable_core/lab/kit-language"}  # its make's language, and its library's
    assert names - own == english - {"lessons/ko/GLOSSARY.md"}, "the same files, in Korean"
    assert (kit / "resumable_core" / "lab" / "kit-language").read_text() == "ko\n"
    for folder in student_kit.TRANSLATED_FOLDERS:
        for korean in (course / folder / "ko").glob("*"):
            lifted = student_kit.lifted(korean.read_bytes(), korean.name)  # its links one folder shorter
            assert (kit / folder / korean.name).read_bytes() == lifted, korean
    for assignment in release.ASSIGNMENTS:
        shipped = kit / "exercises" / assignment / f"{assignment}.ipynb"
        assert shipped.read_bytes() == release.translated_path(assignment, "ko", course, "exercises").read_bytes()
        assert json.loads(shipped.read_text(encoding="utf-8"))["metadata"]["resumable"] == {"lang": "ko"}
    markers = {"### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"}  # on a line of their own, as nbgrader reads them
    for n in names:
        text = (kit / n).read_text(encoding="utf-8", errors="replace")
        if n.endswith(".ipynb"):
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
        assert not [line for line in text.splitlines() if line.strip() in markers], n
    assert not [n for n in names if n.startswith(("solutions/", "resumable_core/course/hidden/"))]


@pytest.mark.slow
def test_the_korean_kit_speaks_korean_by_default(course: Path, tmp_path: Path) -> None:
    """Its README is the Korean template; its make sets no language, for its library speaks Korean in and out of
    make (RESUMABLE_LANG=en or LANG=en on make's command line chooses English), and `make check` without NB= says
    how to use it in Korean."""
    kit = _build(course, tmp_path)
    readme = (kit / "README.md").read_text(encoding="utf-8")
    assert readme == (student_kit.TEMPLATES / "README.ko.md").read_text(encoding="utf-8")
    assert "README.ko.md" not in _files(kit)
    plain = {k: v for k, v in os.environ.items() if k not in ("RESUMABLE_LANG", "JPY_SESSION_NAME")}
    say = ["make", "-s", "--no-print-directory", "--eval", 'say: ; @echo "[$$RESUMABLE_LANG]" $$LANG', "say"]
    for make_args, expected in (([], "[]"), (["RESUMABLE_LANG=en"], "[en]"), (["LANG=en"], "[en]")):
        done = subprocess.run(
            [*say, *make_args],
            cwd=kit,
            env=plain,
            capture_output=True,
            text=True,
            check=True,
        )
        lang, *locale = done.stdout.split()
        assert lang == expected, (make_args, done.stdout)
        assert locale != ["en"], "LANG=en on make's command line is no locale: the commands get another"
    english = _build(course, tmp_path / "en", lang="en")
    assert not (english / "kit.mk").exists()
    # in make and out of it, with an English locale, the kit's own library says its language: the Korean kit's is Korean
    for folder, usage in ((kit, "사용법: python -m resumable_core"), (english, "usage: python -m resumable_core")):
        env = plain | {"LANG": "en_US.UTF-8", "LANGUAGE": "en", "PYTHONPATH": str(folder)}
        done = subprocess.run(
            [sys.executable, "-m", "resumable_core", "--help"], cwd=folder, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0 and done.stdout.startswith(usage), (folder.name, done.stdout, done.stderr)
    english_locale = plain | {"LANG": "en_US.UTF-8", "LANGUAGE": "en"}
    help_in_make = ["make", "-s", "--no-print-directory", "--eval", f"h: ; @{sys.executable} -m resumable_core --help"]
    done = subprocess.run([*help_in_make, "h"], cwd=kit, env=english_locale, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("사용법: python -m resumable_core"), done.stdout
    assert (english / "README.md").read_bytes() == (student_kit.TEMPLATES / "README.md").read_bytes()
    venv = f"VENV={Path(sys.executable).parent.parent}"
    for folder, make_args, usage in (
        (kit, [], "사용법: make check NB=exercises/<이름>/<이름>.ipynb [ALL=1]"),
        (kit, ["RESUMABLE_LANG=en"], "usage: make check NB=exercises/<name>/<name>.ipynb [ALL=1]"),
        (english, [], "usage: make check NB=exercises/<name>/<name>.ipynb [ALL=1]"),
    ):
        done = subprocess.run(["make", "-s", "check", venv, *make_args], cwd=folder, capture_output=True, text=True)
        assert done.returncode == 2 and done.stdout.strip() == usage, (folder.name, make_args, done.stdout)


def test_the_kit_readmes_say_the_same_in_both_languages() -> None:
    """Every command, path and link of an English kit README is in its Korean one (the same facts)."""
    for english in (student_kit.TEMPLATES / "README.md", student_kit.SELF_STUDY_TEMPLATES / "README.md"):
        korean = english.with_name("README.ko.md")
        ko = korean.read_text(encoding="utf-8")
        en = english.read_text(encoding="utf-8")
        facts = set(re.findall(r"`([^`\n]+)`", en)) | set(re.findall(r"\]\(([^)]+)\)", en))
        facts |= {line.split("#")[0].strip() for line in re.findall(r"^make [^\n]+", en, re.M)}
        missing = sorted(f for f in facts if f not in ko and f not in {"Hidden at release"})
        assert not missing, f"{korean.name} lacks {missing}"
        assert "fonts-noto-cjk" in en and "fonts-noto-cjk" in ko, "the set-up notes name the Hangul font's package"


@pytest.mark.slow
def test_the_glossary_ships_in_every_kit_once_written(course: Path, tmp_path: Path) -> None:
    """lessons/ko/GLOSSARY.md: the Korean kits' lessons/GLOSSARY.md, the English kits' lessons/ko/GLOSSARY.md."""
    glossary = course / "lessons" / "ko" / "GLOSSARY.md"
    before = glossary.read_bytes() if glossary.exists() else None
    glossary.unlink(missing_ok=True)
    try:
        kit = _build(course, tmp_path / "without")
        assert (kit / "lessons" / "GLOSSARY.md").read_bytes() == (ROOT / "lessons" / "GLOSSARY.md").read_bytes()
        glossary.write_text("# 용어집\n\n**허공에 뜬 호출 (dangling call).** ...\n", encoding="utf-8")
        for name in ("student-kit", "self-study-kit"):
            kit = _build(course, tmp_path / name, name)
            assert (kit / "lessons" / "GLOSSARY.md").read_bytes() == glossary.read_bytes()
            english = _build(course, tmp_path / f"{name}-en", name, "en")
            assert (english / "lessons" / "ko" / "GLOSSARY.md").read_bytes() == glossary.read_bytes()
            assert [n for n in _files(english) if "/ko/" in n and "/locale/" not in n] == ["lessons/ko/GLOSSARY.md"]
    finally:
        glossary.unlink(missing_ok=True)
        if before is not None:
            glossary.write_bytes(before)


@pytest.mark.slow
def test_the_korean_self_study_kit_folds_the_korean_worked_solutions(course: Path, tmp_path: Path) -> None:
    """Each answer cell is followed by the Korean source's solution, under a Korean summary; every check ships, and
    the Korean sources ship at the English sources' paths, where `check --all` reads them."""
    kit = _build(course, tmp_path, "self-study-kit")
    assert kit.name == "self-study-kit-ko"
    for assignment in release.ASSIGNMENTS:
        cells = json.loads((kit / "exercises" / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))[
            "cells"
        ]
        source = json.loads(release.translated_path(assignment, "ko", course).read_text(encoding="utf-8"))["cells"]
        answers = {c["id"]: c for c in source if c["metadata"].get("nbgrader", {}).get("solution")}
        worked = [c for c in cells if c["id"].endswith(student_kit.WORKED_SUFFIX)]
        assert len(worked) == len(answers) > 0
        for cell in worked:
            assert student_kit.WORKED_SUMMARIES["ko"] in cell["source"]
            answer = answers[cell["id"].removesuffix(student_kit.WORKED_SUFFIX)]
            assert student_kit.without_markers("".join(answer["source"])) in cell["source"]
    names = _files(kit)
    for assignment in release.ASSIGNMENTS:  # check --all reads the Korean source's whole test cells
        shipped = kit / "solutions" / assignment / f"{assignment}.ipynb"
        assert shipped.read_bytes() == release.translated_path(assignment, "ko", course).read_bytes()
    assert not [n for n in names if n.startswith("solutions/") and "/ko/" in n]
    assert (kit / "README.md").read_bytes() == (student_kit.SELF_STUDY_TEMPLATES / "README.ko.md").read_bytes()


def test_a_missing_translation_is_named(course: Path, tmp_path: Path) -> None:
    """A Korean kit refuses to ship an English lesson or exercise in its place, and names each one."""
    lesson = course / "lessons" / "ko" / "02_dangling_calls.ipynb"
    kept = lesson.read_bytes()
    lesson.unlink()
    try:
        with pytest.raises(student_kit.StudentKitError, match=r"no ko edition of lessons/02_dangling_calls\.ipynb"):
            student_kit.build(tmp_path, course, student_kit.edition("student-kit", "ko"))
    finally:
        lesson.write_bytes(kept)


def test_make_maps_lang_to_the_kit_language_and_keeps_a_real_locale() -> None:
    """`make student-kit LANG=ko` builds the Korean kit; the commands it runs get C.UTF-8, not the locale "ko"."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "student-kit", "self-study-kit", "LANG=ko"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "student_kit --lang ko" in done.stdout and "--edition self-study-kit --lang ko" in done.stdout, done.stdout
    plain = subprocess.run(
        ["make", "--no-print-directory", "-n", "student-kit"], cwd=ROOT, capture_output=True, text=True
    )
    assert "student_kit --lang en" in plain.stdout, plain.stdout
    env = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", "say: ; @echo $$RESUMABLE_LANG $$LANG", "say", "LANG=ko"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert env.stdout.split() == ["ko", "C.UTF-8"]
    lab = subprocess.run(
        ["make", "--no-print-directory", "-n", "lab", "LANG=ko"], cwd=ROOT, capture_output=True, text=True
    )
    korean = ROOT / "lessons" / "ko" / "01_skeleton_resume.ipynb"
    first = "lessons/ko/01_skeleton_resume.ipynb" if korean.exists() else "lessons/01_skeleton_resume.ipynb"
    assert lab.stdout.split()[-1] == first, lab.stdout


def test_make_lab_lang_ko_opens_jupyterlab_in_korean(tmp_path: Path) -> None:
    """`make lab LANG=ko` (or RESUMABLE_LANG=ko) gives JupyterLab the Korean kit's settings, its ko-KR language
    pack; `make lab` the English ones again, even when the Korean copy is newer."""
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed-stamp").touch()  # newer than pyproject.toml: nothing to install
    overrides = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings = student_kit.TEMPLATES / "lab-settings"
    for make_args, env, source in (
        (["LANG=ko"], {}, "overrides.ko.json"),
        ([], {}, "overrides.json"),
        ([], {"RESUMABLE_LANG": "ko"}, "overrides.ko.json"),
    ):
        subprocess.run(
            ["make", "-s", "--no-print-directory", str(overrides), f"VENV={venv}", *make_args],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if k != "RESUMABLE_LANG"} | env,
            check=True,
            capture_output=True,
        )
        assert overrides.read_bytes() == (settings / source).read_bytes(), (make_args, env)
    assert json.loads(overrides.read_text())["@jupyterlab/translation-extension:plugin"] == {"locale": "ko_KR"}
    lab = subprocess.run(
        ["make", "--no-print-directory", "-n", "lab", "LANG=ko"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "lab-settings/overrides.ko.json .venv/share/jupyter/lab/settings/overrides.json" in lab.stdout, lab.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", ["student-kit", "self-study-kit"])
def test_the_real_korean_kits_links_resolve_and_their_code_is_the_english_kits(name: str, tmp_path: Path) -> None:
    """Built from this repository: every relative link of its lessons resolves (one folder up from lessons/ko/), and
    every code cell of each lesson and exercise is the English kit's byte for byte but for comments."""
    from resumable_core.lab import editions

    korean, english = _build(ROOT, tmp_path / "ko", name), _build(ROOT, tmp_path / "en", name, "en")
    broken = []
    for page in sorted((korean / "lessons").glob("*")):
        if page.suffix == ".ipynb":
            cells = json.loads(page.read_text(encoding="utf-8"))["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
            if not re.match(r"[a-z]+:", target) and not (page.parent / target).exists():
                broken.append(f"{page.name}: {target}")
    assert broken == []
    for notebook in sorted(english.glob("*/**/*.ipynb")):
        relative = notebook.relative_to(english)
        en = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        ko = {c["id"]: c for c in json.loads((korean / relative).read_text(encoding="utf-8"))["cells"]}
        for cell in en:
            if cell["cell_type"] == "code":
                assert editions.same_code("".join(cell["source"]), "".join(ko[cell["id"]]["source"])), (
                    relative,
                    cell["id"],
                )


@pytest.mark.slow
def test_the_korean_kits_jupyterlab_speaks_korean(tmp_path: Path) -> None:
    """The Korean kit installs JupyterLab's Korean language pack and its settings pick it; the English kit's stay English."""
    korean, english = _build(ROOT, tmp_path / "ko"), _build(ROOT, tmp_path / "en", lang="en")
    settings = json.loads((korean / "lab-settings" / "overrides.json").read_text(encoding="utf-8"))
    assert settings["@jupyterlab/translation-extension:plugin"] == {"locale": "ko_KR"}
    assert "jupyterlab-language-pack-ko-KR" in (korean / "pyproject.toml").read_text(encoding="utf-8")
    assert "translation-extension" not in (english / "lab-settings" / "overrides.json").read_text(encoding="utf-8")
    assert sorted(p.name for p in (korean / "lab-settings").iterdir()) == ["overrides.json"]


def test_the_korean_lessons_link_to_the_korean_exercises_here_and_in_the_kit() -> None:
    """Each link from a Korean lesson to an exercise names its Korean edition (it exists), and the Korean kit, which
    lifts both out of their ko/ folders, links it one folder up; the Korean glossary links no glossary (in the
    Korean kit it would be itself)."""
    links = []
    for page in sorted((ROOT / "lessons" / "ko").glob("*")):
        if page.suffix in (".ipynb", ".md"):
            text = page.read_text(encoding="utf-8")
            links += [(page, target) for target in re.findall(r"\]\(([^)\s#]*exercises/[^)\s#]*)", text)]
    assert links, "no link from a Korean lesson to an exercise"
    for page, target in links:
        assert "/ko/" in target and (page.parent / target).exists(), (page.name, target)
        kit_link = student_kit.lifted(f"[x]({target})".encode(), "lessons/x.md").decode()
        assert kit_link == f"[x]({target.replace('../../', '../').replace('/ko/', '/')})", kit_link
    glossary = (ROOT / "lessons" / "ko" / "GLOSSARY.md").read_text(encoding="utf-8")
    assert not re.search(r"\]\([^)]*GLOSSARY\.md\)", glossary)
