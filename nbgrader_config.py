"""nbgrader configuration of the Resumable Agents course.

The repository root is the course: instructors write notebooks in ``solutions/`` (the
nbgrader source folder) and ``python -m resumable_core.course.release release`` (``make release``)
runs ``nbgrader generate_assignment`` to produce ``exercises/<assignment>/<notebook>.ipynb``.
Student work goes to ``submitted/<student>/<assignment>/`` and ``nbgrader autograde``
fills ``autograded/``; those folders and ``gradebook.db`` are git-ignored.
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

# The course root is the folder of this file, whatever the current directory is.
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"

# A translated source, solutions/<assignment>/ko/, is no part of the assignment nbgrader releases: it
# holds the solutions. `make release` makes exercises/<assignment>/ko/ from the English release
# (resumable_core.course.release.translate_release). nbgrader's own defaults come first.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "ko"]
# The exchange copies from exercises/ and from the students' submissions, never from solutions/:
# there ko/ goes along (the Korean release out, a student's work in it back), so a class may mix
# languages (resumable_core.course.exchange).
c.ExchangeFactory.release_assignment = "resumable_core.course.exchange.ReleaseAssignment"
c.ExchangeFactory.collect = "resumable_core.course.exchange.Collect"

# Graded cells fork a child that is SIGKILLed; a whole notebook runs in well under a minute.
# A cell that hangs past it is interrupted and scores 0 (nbgrader's default is 30 s).
c.ExecutePreprocessor.timeout = 60
