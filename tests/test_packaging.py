"""Packaging: the repository's and the student kit's wheels build without a setuptools warning and hold every file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from resumable_core.course import student_kit

ROOT = Path(__file__).resolve().parents[1]
# setuptools' warnings: "...Warning: text" (SetuptoolsDeprecationWarning, BuildBackendWarning, _Warning)
# and distutils' "warning: text". pip's own "WARNING:" lines are about this machine's indexes, not the build.
SETUPTOOLS_WARNING = re.compile(r"Warning: |^\s*warning: ", re.M)
BUILD_TIMEOUT = 300  # seconds; pip fetches setuptools into its build environment first


def _source_files(tree: Path) -> set[str]:
    """The files under ``tree``/resumable_core, as wheel entry names, caches left out."""
    return {
        p.relative_to(tree).as_posix()
        for p in (tree / "resumable_core").rglob("*")
        if p.is_file() and not student_kit.is_junk(p.relative_to(tree))
    }


def _repository_tree(tmp_path: Path) -> Path:
    """What building the repository's wheel reads, its pyproject, README and package, copied to a fresh folder."""
    tree = tmp_path / "repository"
    shutil.copytree(ROOT / "resumable_core", tree / "resumable_core", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    return tree


def _kit_tree(tmp_path: Path) -> Path:
    """The student kit, unpacked."""
    folder, _ = student_kit.build(tmp_path / "dist")
    return folder


def _korean_kit_tree(tmp_path: Path) -> Path:
    """The Korean student kit, unpacked: its library says its language (``lab/kit-language``), which must ship."""
    folder, _ = student_kit.build(tmp_path / "dist", edition=student_kit.edition("student-kit", "ko"))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(
    "tree", [_repository_tree, _kit_tree, _korean_kit_tree], ids=["repository", "student-kit", "student-kit-ko"]
)
def test_wheel_builds_without_a_setuptools_warning(tree, tmp_path: Path) -> None:
    """The wheel builds with no setuptools warning and holds every file under resumable_core/, fixtures too."""
    source = tree(tmp_path)
    # PYTHONDONTWRITEBYTECODE would add distutils' "byte-compiling is disabled" warning of its own.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "wheel"), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    warnings = [line for line in log.splitlines() if SETUPTOOLS_WARNING.search(line)]
    assert warnings == [], "\n".join(warnings)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        held = {n for n in z.namelist() if n.startswith("resumable_core/")}
    assert held == _source_files(source)
    assert any(n.startswith("resumable_core/lab/fixtures/") and n.endswith(".json") for n in held)
    assert ("resumable_core/lab/kit-language" in held) == source.name.endswith("-ko")


def test_the_venv_has_no_iri_parser_that_every_notebook_reader_would_build():
    """``make setup`` removes rfc3987-syntax (jupyter-events' jsonschema extra): jsonschema imports it when present,
    and its ~35 parsers cost 1-5 s in every process that reads a notebook, for formats no schema here uses."""
    import importlib.util

    assert importlib.util.find_spec("rfc3987_syntax") is None, "run `make setup` again: it uninstalls rfc3987-syntax"
