"""The lab wing: the crash matrix, the exercise checkpoints, rendering and the widgets.

Installed with the ``[lab]`` extra. It builds on the core and never the other way round.
"""
