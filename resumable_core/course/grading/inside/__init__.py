"""The entry points that run inside a sandbox, beside the learner's code: they trust nothing it says.

They are started by module name in a command line (``python -m ...``), never imported by the
trusted side, and import no gradebook and no nbgrader: ``kernel_runner`` (nbclient, the kernel),
``learner_server`` (the learner's process of the re-check) and ``checker`` (the re-check's checks).
"""
