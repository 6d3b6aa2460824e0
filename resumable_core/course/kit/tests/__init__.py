"""The student kit's own tests: `make test` runs them."""
