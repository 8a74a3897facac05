"""Personal data in interactions: detection (``detect``), placeholders and their reversal (``mask``)."""
