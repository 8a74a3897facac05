"""``python -m groundwatch``: the ``groundwatch`` command."""

from groundwatch.cli import main

raise SystemExit(main())
