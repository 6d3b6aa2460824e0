"""``python -m resumable_core.course.hub setup|start|remove``: build, run and take down the class (as root).

``collect``, ``grade`` and ``feedback --assignment A`` are the instructor's steps of the term, run
from root as the instructor's account (:mod:`resumable_core.course.hub.term`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from resumable_core.course.hub import accounts, term
from resumable_core.course.hub.build import DEFAULT_ROOT, SETTINGS_FILE, HubError, HubSettings, setup
from resumable_core.course.hub.config import formgrader_url

TERM_STEPS = {"collect": term.collect, "grade": term.grade, "feedback": term.release_feedback}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m resumable_core.course.hub", description=__doc__)
    parser.add_argument("command", choices=("setup", "start", "remove", *TERM_STEPS))
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"the class's folder (default {DEFAULT_ROOT})")
    parser.add_argument("--prefix", default="ra-", help="of every account name (default ra-)")
    parser.add_argument("--course-id", default="resumable")
    parser.add_argument("--assignment", action="append", help="release only these (default: every assignment)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--authenticator", choices=("pam", "dummy"), default="pam")
    parser.add_argument("--db-url", default="", help="the gradebook's URL (default: SQLite in the course folder)")
    args = parser.parse_args(argv)
    try:
        if args.command == "remove":
            print(f"removed: {', '.join(accounts.remove(args.prefix)) or 'no account'}; {args.root} is left to you")
            return 0
        if args.command == "setup":
            settings = HubSettings(str(args.root), args.course_id, args.prefix, port=args.port)
            settings.authenticator, settings.db_url = args.authenticator, args.db_url
            if args.assignment:
                settings.assignments = args.assignment
            for warning in setup(settings):
                print(f"warning: {warning}")
            print(f"built {args.root}; start it with: python -m resumable_core.course.hub start --root {args.root}")
            return 0
        settings = HubSettings.load(args.root / "hub" / SETTINGS_FILE)
        if args.command in TERM_STEPS:
            for assignment in args.assignment or settings.assignments:
                print(TERM_STEPS[args.command](settings, assignment))
            return 0
        print(f"the class: http://127.0.0.1:{settings.port}/  formgrader (its own tab): {formgrader_url(settings)}")
        hub = Path(settings.repo_venv) / "bin" / "jupyterhub"
        os.chdir(settings.paths.hub)
        os.execv(str(hub), [str(hub), "-f", str(settings.paths.hub / "jupyterhub_config.py")])
    except (HubError, accounts.AccountError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
