"""Tools the thinker may call: a registry (``registry.py``) and one module per tool."""
