"""Alert rules over closed windows: pure evaluation (rules.py), wiring (engine.py), webhook (webhook.py)."""
