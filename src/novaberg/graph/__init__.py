"""The turn graph: declared state channels (``state.py``) and graph assembly (``build.py``)."""
