"""Grading a class with real nbgrader: one module per step of the pipeline."""
