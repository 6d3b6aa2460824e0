"""The hidden checks the exercises' hidden test blocks call, one module per assignment.

The instructor's side only: the student kit never holds this package. A hidden test block calls
nothing but functions defined here (``tests/test_checks.py`` holds it to that); the building
blocks they share with the visible checks come from :mod:`resumable_core.course.checks.support`.
"""
