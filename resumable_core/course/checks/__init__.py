"""The visible checks the exercises' test cells call, one module per assignment.

This package ships in the student kit: a learner may read every check here. The hidden checks,
and the answers, are the instructor's (:mod:`resumable_core.course.hidden`).
"""
