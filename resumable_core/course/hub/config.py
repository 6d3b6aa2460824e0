"""JupyterHub's configuration for the class, from its ``settings.json`` (see :mod:`build`).

JupyterHub runs as root (the local spawner becomes each user), behind the Python
``configurable-http-proxy`` (no Node). Students' servers run the student environment, the staff's the
staff environment. Formgrader is a hub service run as the instructor in the course folder, open to
the ``formgrade-<course>`` group only.

JupyterHub 4.1 and later send ``Content-Security-Policy: frame-ancestors 'none'`` from every
single-user server, so formgrader's JupyterLab panel (an iframe) stays blank (nbgrader #1870). The
kit does not loosen that header, which guards against one user's page framing another's: formgrader
is opened in its own browser tab, at :func:`formgrader_url`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resumable_core.course.hub.build import HubSettings

AUTHENTICATORS = {"pam": "jupyterhub.auth.PAMAuthenticator", "dummy": "jupyterhub.auth.DummyAuthenticator"}
SPAWNERS = {"localprocess": "jupyterhub.spawner.LocalProcessSpawner"}


def formgrader_url(settings: HubSettings) -> str:
    """Where a grader opens formgrader: its own tab, never JupyterLab's iframe."""
    return f"http://127.0.0.1:{settings.port}/services/{settings.course_id}/formgrader"


def formgrade_group(settings: HubSettings) -> str:
    return f"formgrade-{settings.course_id}"


def configure(c: Any, settings_file: str | Path) -> None:
    """Fill JupyterHub's config object ``c`` for the class whose settings are in ``settings_file``."""
    settings = HubSettings.load(settings_file)
    paths, roster = settings.paths, settings.roster
    repo_bin = Path(settings.repo_venv) / "bin"
    c.JupyterHub.bind_url = f"http://127.0.0.1:{settings.port}"
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = settings.hub_port
    c.ConfigurableHTTPProxy.command = [str(repo_bin / "configurable-http-proxy")]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.proxy_api_port}"
    c.JupyterHub.db_url = f"sqlite:///{paths.hub / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(paths.hub / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(paths.hub / "jupyterhub.pid")
    c.ConfigurableHTTPProxy.pid_file = str(paths.hub / "jupyterhub-proxy.pid")

    c.JupyterHub.authenticator_class = AUTHENTICATORS[settings.authenticator]
    if settings.authenticator == "dummy":
        c.DummyAuthenticator.password = settings.dummy_password
    c.Authenticator.allowed_users = set(roster.everyone)
    c.Authenticator.admin_users = {roster.instructor}

    c.JupyterHub.spawner_class = SPAWNERS[settings.spawner]
    c.Spawner.default_url = "/lab"
    c.Spawner.notebook_dir = "~"
    c.Spawner.http_timeout = 120  # a loaded 2-core machine starts JupyterLab in tens of seconds
    c.Spawner.start_timeout = 120
    staff, students = set(roster.staff), set(roster.students)

    def pick_environment(spawner: Any) -> None:
        """The staff's environment for the staff, the student kit's for everyone else."""
        env = paths.staff_env if spawner.user.name in staff else paths.student_env
        spawner.cmd = [str(paths.python(env)), "-m", "jupyterhub.singleuser"]
        spawner.environment = {**spawner.environment, "PATH": f"{env / 'bin'}:/usr/local/bin:/usr/bin:/bin"}

    c.Spawner.pre_spawn_hook = pick_environment

    group = formgrade_group(settings)
    c.JupyterHub.load_groups = {
        group: {"users": list(roster.staff)},
        f"nbgrader-{settings.course_id}": {"users": sorted(students)},
    }
    c.JupyterHub.load_roles = [
        {"name": group, "groups": [group], "scopes": [f"access:services!service={settings.course_id}"]},
    ]
    c.JupyterHub.services = [
        {
            "name": settings.course_id,
            "url": f"http://127.0.0.1:{settings.service_port}",
            "command": [
                str(paths.python(paths.staff_env)),
                "-m",
                "jupyterhub.singleuser",
                f"--port={settings.service_port}",
            ],
            "user": roster.instructor,
            "cwd": str(paths.course),
            "environment": {
                "JUPYTERHUB_DEFAULT_URL": "/formgrader",
                "PATH": f"{paths.staff_env / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            },
            "oauth_no_confirm": True,
        }
    ]
