"""Backends: one module per kind of model server, all behind the contract in ``base.py``."""
