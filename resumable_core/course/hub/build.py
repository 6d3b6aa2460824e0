"""Build the class's folders on this machine: the exchange, the course, the two environments, the configs.

Under one ``root`` (``/srv/resumable-class`` for ``make hub``)::

    exchange/      nbgrader's exchange: world-writable, as nbgrader's docs set it up
    course/        the nbgrader course (solutions/, the gradebook, submitted/): the instructor's and the
                   staff group's only (2770), so no student reads an answer, a grade or a classmate's work
    staff-env/     Python for the instructor, the grader and formgrader: the whole library (0750, staff group)
    student-env/   Python for students: the student kit's library only, no ``course/hidden``
    hub/           JupyterHub's own files: its config, database and cookie secret (root's only)

An environment is a venv of a Python every account can run (the repository's own may live under
``/root``), with the repository venv's site-packages hard-linked in (seconds, no download) and the
library copied in as a plain package, not as the repository's editable install: a student's
``import resumable_core.course.hidden`` finds nothing, however ``sys.path`` is arranged.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from resumable_core.course import release, student_kit
from resumable_core.course.errors import CourseError
from resumable_core.course.hub import accounts

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_ROOT = Path("/srv/resumable-class")
SETTINGS_FILE = "settings.json"
LIBRARY = "resumable_core"
EDITABLE_LEFTOVERS = ("__editable__", "resumable_core-", "resumable_core.")
"""Names in the repository venv's site-packages that belong to its editable install of the library."""
STUDENT_SERVER_CONFIG = {
    # A student's server has nbgrader's assignment list (fetch, submit, feedback) but no formgrader
    # nor course creation: those are the staff's, on the course folder a student cannot read.
    "ServerApp": {
        "jpserver_extensions": {
            "nbgrader.server_extensions.formgrader": False,
            "nbgrader.server_extensions.course_list": False,
        }
    }
}
STUDENT_PAGE_CONFIG = {
    # ...and JupyterLab shows no panel of theirs (`jupyter labextension disable`, for the whole environment)
    "disabledExtensions": {
        f"@jupyter/nbgrader:{name}": True for name in ("create-assignment", "formgrader", "course-list")
    }
}
LAB_OVERRIDES = student_kit.TEMPLATES / "lab-settings" / "overrides.json"
"""The student kit's JupyterLab defaults (no news pop-up, no update check), for every server of the class."""


class HubError(CourseError, RuntimeError):
    """The class cannot be built here; carries a one-line ``reason`` that says what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class HubSettings:
    """What a class on this machine is: where, whose, which assignments, how people log in."""

    root: str = str(DEFAULT_ROOT)
    course_id: str = "resumable"
    prefix: str = "ra-"
    assignments: list[str] = field(default_factory=lambda: list(release.ASSIGNMENTS))
    port: int = 8000
    """Where the proxy listens: the class's address is ``http://127.0.0.1:PORT``."""
    hub_port: int = 8081
    proxy_api_port: int = 8001
    service_port: int = 8090
    """Where formgrader's service listens (behind the proxy at ``/services/<course_id>/``)."""
    authenticator: str = "pam"
    """``pam`` on a lab machine (each account's own password); ``dummy`` only in tests."""
    dummy_password: str = ""
    spawner: str = "localprocess"
    db_url: str = ""
    """The gradebook's URL (nbgrader's ``CourseDirectory.db_url``); empty: SQLite in the course folder."""
    python: str = ""
    """The interpreter the environments are venvs of; empty: :func:`shared_python` picks one."""
    repo_venv: str = str(REPO_ROOT / ".venv")

    @property
    def paths(self) -> ClassPaths:
        return ClassPaths(Path(self.root))

    @property
    def roster(self) -> accounts.Roster:
        return accounts.Roster(self.prefix)

    def save(self) -> Path:
        path = self.paths.hub / SETTINGS_FILE
        path.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> HubSettings:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


@dataclass(frozen=True)
class ClassPaths:
    """The folders of a class under its root."""

    root: Path

    @property
    def exchange(self) -> Path:
        return self.root / "exchange"

    @property
    def course(self) -> Path:
        return self.root / "course"

    @property
    def staff_env(self) -> Path:
        return self.root / "staff-env"

    @property
    def student_env(self) -> Path:
        return self.root / "student-env"

    @property
    def hub(self) -> Path:
        return self.root / "hub"

    @property
    def kit(self) -> Path:
        return self.root / "kit"

    def python(self, env: Path) -> Path:
        return env / "bin" / "python"


def _everyone_can_run(path: Path) -> bool:
    """Whether an account that is neither owner nor group can traverse to ``path`` and run it."""
    path = path.resolve()
    for folder in path.parents:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & stat.S_IXOTH)


def shared_python(repo_venv: Path) -> Path:
    """A Python of the repository venv's version that every account can run (its own base, else the system's)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()  # the venv's base, not its symlink
    for candidate in (base, Path("/usr/bin") / version, Path("/usr/local/bin") / version):
        if candidate.exists() and _everyone_can_run(candidate):
            return candidate
    raise HubError(
        f"no {version} that every account can run (the repository's is {base}); install Debian's {version} "
        "or pass --python"
    )


def _site_packages(env: Path) -> Path:
    return env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _link_tree(source: Path, dest: Path) -> None:
    """Hard-link every file of ``source`` into ``dest`` (a copy where the filesystems differ); never writes a linked file."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, dest, copy_function=link, symlinks=True, dirs_exist_ok=True)


def _write_new(path: Path, text: str) -> None:
    """Write ``path`` as a file of its own: an environment's ``share``/``etc`` are hard links to the repository venv's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.write_text(text, encoding="utf-8")


def _copy_scripts(source: Path, dest: Path) -> None:
    """The venv's console scripts (``alembic``, ``jupyter``, ``nbgrader``...), their ``#!`` pointed at ``dest``'s Python."""
    python = dest / "python"
    for script in source.iterdir():
        if script.is_symlink() or not script.is_file() or (dest / script.name).exists():
            continue
        head = script.read_bytes()[:2]
        if head != b"#!":
            continue
        lines = script.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        if "python" not in lines[0]:
            continue  # activate scripts and the like: not needed by the class
        (dest / script.name).write_text(f"#!{python}\n" + "".join(lines[1:]), encoding="utf-8")
        (dest / script.name).chmod(0o755)


def _python_version(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _unsupported(site: Path, version: str) -> list[Path]:
    """The dist-info folders in ``site`` whose ``Requires-Python`` excludes ``version`` (a patch release counts)."""
    from email.parser import Parser

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    found = []
    for info in sorted(site.glob("*.dist-info")):
        metadata = info / "METADATA"
        if not metadata.is_file():
            continue
        requires = (
            Parser()
            .parsestr(metadata.read_text(encoding="utf-8", errors="replace"), headersonly=True)
            .get("Requires-Python")
        )
        with_spec = None
        if requires:
            try:
                with_spec = SpecifierSet(requires)
            except InvalidSpecifier:
                continue
        if with_spec is not None and not with_spec.contains(version, prereleases=True):
            found.append(info)
    return found


def _refit(site: Path, version: str, repo_venv: Path) -> list[str]:
    """Swap each package ``version`` cannot run for its newest release that it can; return ``name old -> new`` lines.

    The repository venv's packages were resolved for its own Python; the environments run one every
    account can reach (Debian's ``python3.11`` is 3.11.2), and a package may need a later patch
    release (``soupsieve`` 4 needs 3.11.5; with it nbconvert, so formgrader's submission pages, fails).
    Only the environment's own hard links are removed: the repository venv's files are never touched.
    """
    swapped = []
    for info in _unsupported(site, version):
        name, _, old = info.name.removesuffix(".dist-info").rpartition("-")
        record = info / "RECORD"
        tops = {line.split(",")[0].split("/")[0] for line in record.read_text(encoding="utf-8").splitlines() if line}
        for top in sorted(t for t in tops if t and t != ".." and not t.endswith(".pyc")):
            path = site / top
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        args = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--only-binary=:all:"]
        args += ["--python-version", version, "--target", str(site), "--upgrade", name]
        done = subprocess.run([str(repo_venv / "bin" / "python"), *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise HubError(
                f"{name} {old} needs a newer Python than {version} and pip found no release for it: "
                f"{done.stderr.strip()[-500:]} (or pass --python with a newer Python every account can run)"
            )
        new = sorted(site.glob(f"{name}-*.dist-info"))
        swapped.append(f"{name} {old} -> {new[-1].name.removesuffix('.dist-info').rpartition('-')[2] if new else '?'}")
    return swapped


def make_env(env: Path, python: Path, repo_venv: Path, library: Path) -> list[str]:
    """A venv at ``env`` of ``python``, with the repository venv's packages and ``library`` as a plain package."""
    if env.exists():
        shutil.rmtree(env)
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(env)], check=True)
    site = _site_packages(env)
    source_site = _site_packages(repo_venv)
    for entry in source_site.iterdir():
        if entry.name.startswith(EDITABLE_LEFTOVERS) or entry.name == "__pycache__":
            continue
        target = site / entry.name
        if entry.is_dir() and not entry.is_symlink():
            _link_tree(entry, target)
        else:
            shutil.copy2(entry, target, follow_symlinks=False)
    _copy_scripts(repo_venv / "bin", env / "bin")
    for shared in ("share", "etc"):  # kernel specs, JupyterLab's extensions, the servers' extension configs
        if (repo_venv / shared).is_dir():
            _link_tree(repo_venv / shared, env / shared)
    shutil.copytree(
        library, site / LIBRARY, ignore=shutil.ignore_patterns(*student_kit.JUNK_NAMES, "*.pyc"), dirs_exist_ok=False
    )
    return _refit(site, _python_version(python), repo_venv)


def _chown_tree(top: Path, user: str, group: str, dir_mode: int, file_mode: int) -> None:
    """``top`` and everything under it owned by ``user:group`` with these modes (files keep their execute bits)."""
    for path in [top, *top.rglob("*")]:
        if path.is_symlink():
            continue
        shutil.chown(path, user, group)
        if path.is_dir():
            path.chmod(dir_mode)
        else:
            path.chmod(file_mode | (path.stat().st_mode & 0o111))


def course_config(settings: HubSettings) -> str:
    """The course's ``nbgrader_config.py``: the repository's, with the class's course id, exchange and gradebook."""
    text = (REPO_ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    text += "\n# The class on this machine (resumable_core.course.hub).\n"
    text += f"c.CourseDirectory.course_id = {settings.course_id!r}\n"
    text += f"c.Exchange.root = {str(settings.paths.exchange)!r}\n"
    if settings.db_url:
        text += f"c.CourseDirectory.db_url = {settings.db_url!r}\n"
    return text


def student_config(settings: HubSettings) -> str:
    """A student's ``~/.jupyter/nbgrader_config.py``: where the exchange is and which course."""
    return (
        "# Written by resumable_core.course.hub: the class's course and exchange.\n"
        "c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file\n"
        f"c.CourseDirectory.course_id = {settings.course_id!r}\n"
        f"c.Exchange.root = {str(settings.paths.exchange)!r}\n"
    )


def as_user(user: str, command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` as ``user`` (``runuser``, from root), in ``cwd``, with a login-like environment."""
    home = Path(os.path.expanduser(f"~{user}"))
    base = {"HOME": str(home), "USER": user, "LOGNAME": user, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    base.update(env or {})
    full = ["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in base.items()], *command]
    return subprocess.run(full, cwd=cwd, capture_output=True, text=True, check=False)


def staff_command(
    settings: HubSettings, user: str, args: list[str], cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``python ARGS`` as a staff account with the staff environment first on PATH (nbgrader runs ``alembic``)."""
    bin_dir = settings.paths.staff_env / "bin"
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"}
    return as_user(user, [str(bin_dir / "python"), *args], cwd or settings.paths.course, env)


def _build_course(settings: HubSettings) -> None:
    """The course folder: solutions, config, the released assignments (each language's) in the gradebook and the exchange."""
    paths, roster = settings.paths, settings.roster
    course = paths.course
    course.mkdir(exist_ok=True)
    for assignment in settings.assignments:
        target = course / "solutions" / assignment
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(
            REPO_ROOT / "solutions" / assignment, target, ignore=shutil.ignore_patterns(".ipynb_checkpoints")
        )
    (course / "nbgrader_config.py").write_text(course_config(settings), encoding="utf-8")
    _chown_tree(course, roster.instructor, roster.staff_group, 0o2770, 0o660)
    for assignment in settings.assignments:
        # make release's step (generate_assignment, then the Korean release ko/), then into the exchange:
        # the course's config has release_assignment carry ko/ (resumable_core.course.exchange)
        for args in (
            ["resumable_core.course.release", "release", "--root", ".", "--assignment", assignment],
            ["nbgrader", "release_assignment", assignment, "--force"],
        ):
            done = staff_command(settings, roster.instructor, ["-m", *args])
            if done.returncode != 0:
                raise HubError(f"`python -m {' '.join(args)}` as {roster.instructor} failed: {done.stderr[-2000:]}")
    _chown_tree(course, roster.instructor, roster.staff_group, 0o2770, 0o660)


def _install_student_configs(settings: HubSettings) -> None:
    for student in settings.roster.students:
        folder = Path(os.path.expanduser(f"~{student}")) / ".jupyter"
        folder.mkdir(exist_ok=True)
        (folder / "nbgrader_config.py").write_text(student_config(settings), encoding="utf-8")
        for path in (folder, folder / "nbgrader_config.py"):
            shutil.chown(path, student, student)


def readable_by_others(path: Path) -> bool:
    """Whether an account outside the owner and group can read ``path`` (every folder above it traversable)."""
    path = path.resolve()
    if not all(p.stat().st_mode & stat.S_IXOTH for p in path.parents):
        return False
    return bool(path.stat().st_mode & stat.S_IROTH)


def setup(settings: HubSettings, log=print) -> list[str]:
    """Build the whole class under ``settings.root`` (as root, idempotently); return warnings worth reading."""
    if os.geteuid() != 0:
        raise HubError("the class is built as root (it makes accounts and hands folders to them): sudo make hub")
    paths, roster = settings.paths, settings.roster
    repo_venv = Path(settings.repo_venv)
    python = Path(settings.python) if settings.python else shared_python(repo_venv)
    settings.python = str(python)
    log(f"accounts: {', '.join(roster.everyone)} (group {roster.staff_group})")
    accounts.ensure(roster)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.root.chmod(0o755)
    paths.hub.mkdir(exist_ok=True)
    paths.hub.chmod(0o700)
    paths.exchange.mkdir(exist_ok=True)
    paths.exchange.chmod(0o777)  # nbgrader's docs: `chmod ugo+rw` on the exchange root
    log(f"student kit -> {paths.kit}")
    if paths.kit.exists():
        shutil.rmtree(paths.kit)
    folder, _zip = student_kit.build(paths.kit)
    log(f"environments from {python} and {repo_venv}")
    for line in make_env(paths.staff_env, python, repo_venv, REPO_ROOT / LIBRARY):
        log(f"staff-env: {line} (for {python})")
    shutil.chown(paths.staff_env, "root", roster.staff_group)
    paths.staff_env.chmod(0o750)  # it holds course/hidden: no student may read it
    for line in make_env(paths.student_env, python, repo_venv, folder / LIBRARY):
        log(f"student-env: {line} (for {python})")
    etc = paths.student_env / "etc" / "jupyter"
    _write_new(
        etc / "jupyter_server_config.d" / "zz-resumable-student.json", json.dumps(STUDENT_SERVER_CONFIG, indent=1)
    )
    _write_new(etc / "labconfig" / "page_config.json", json.dumps(STUDENT_PAGE_CONFIG, indent=1))
    for env in (paths.staff_env, paths.student_env):
        _write_new(env / "share" / "jupyter" / "lab" / "settings" / "overrides.json", LAB_OVERRIDES.read_text("utf-8"))
    accounts.write_profile(
        settings.roster, {paths.student_env / "bin": roster.students, paths.staff_env / "bin": roster.staff}
    )
    log(
        f"course {settings.course_id} -> {paths.course}: {', '.join(settings.assignments)} released to {paths.exchange}"
    )
    _build_course(settings)
    _install_student_configs(settings)
    settings.save()
    (paths.hub / "jupyterhub_config.py").write_text(
        "# Written by resumable_core.course.hub: the class's settings are in settings.json beside it.\n"
        "from resumable_core.course.hub.config import configure\n\n"
        f"configure(get_config(), {str(paths.hub / SETTINGS_FILE)!r})  # noqa: F821 - traitlets provides get_config\n",
        encoding="utf-8",
    )
    warnings = []
    if readable_by_others(REPO_ROOT / "solutions"):
        warnings.append(
            f"{REPO_ROOT / 'solutions'} is readable by every account, students' too: keep the repository where "
            f"they cannot read it (chmod o-rwx {REPO_ROOT}); the class's own course folder is closed"
        )
    return warnings
