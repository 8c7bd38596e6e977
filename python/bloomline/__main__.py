"""``python -m bloomline``: the same as the ``bloomline`` command."""

from .cli import main

raise SystemExit(main())
