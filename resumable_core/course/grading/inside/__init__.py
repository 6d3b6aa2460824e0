"""The entry points that run inside a sandbox, beside the learner's code: they trust nothing it says.

They are started by module name in a command line (``python -m ...``) and import no gradebook and
no nbgrader: ``learner_server`` (the learner's process: it runs the notebook's cells in an IPython
shell of its own, :mod:`.shell`, then serves the re-check) and ``checker`` (the re-check's checks).
``leftovers`` kills what a cell left running.
"""
