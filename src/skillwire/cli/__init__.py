"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

The ``skillwire`` command line."""

from skillwire.cli.main import main

__all__ = ["main"]
