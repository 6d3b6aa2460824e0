"""The course wing: nbgrader glue, the grading pipeline and the checks the exercises call.

Instructors install it with the ``[course]`` extra. Only :mod:`resumable_core.course.checks`
(the visible checks) ships in the student kit; everything else here is the instructor's.
"""
