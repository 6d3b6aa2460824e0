"""The grading pipeline's steps, each a module: what the trusted host does to a class."""
