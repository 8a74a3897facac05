"""One module per stream processor; each has ``register(ctx)`` that defines its faust agent."""
