"""The nodes of a turn, one module each. Every node is ``async (state, ctx) -> dict``."""
