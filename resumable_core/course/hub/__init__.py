"""A real class on one machine: UNIX accounts, nbgrader's exchange, JupyterHub and formgrader as its service.

``python -m resumable_core.course.hub setup --root ROOT`` (``make hub``, as root) builds the class:
:mod:`accounts` makes the instructor's, the grader's and the students' accounts, :mod:`build` the
exchange, the course folder, the two Python environments (the staff's with the whole library, the
students' with the student kit's only) and each student's nbgrader config; ``start`` runs JupyterHub
with :mod:`config`, formgrader being a hub service of the instructor's. ``docs/running-a-class.md``
says how to run it and what its limits are.
"""
