"""Novaberg: a local-first AI companion engine.

Its persona, Nova, talks with you and remembers you.
"""

__version__ = "0.1.0"
