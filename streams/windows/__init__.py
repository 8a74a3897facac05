"""Windowed aggregates: one module per window kind, small aggregator classes."""
