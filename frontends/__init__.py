"""Nova behind real front-ends, driven through their own UIs (issue 20, part 7): a separate,
slower CI step (``make frontends``), not part of the README's suite in ``tests/``."""
