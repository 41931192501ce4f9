"""Public test kit: the store contract suite and helpers for testing agents."""
