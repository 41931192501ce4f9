"""The ``skillwire`` command line."""

from skillwire.cli.main import main

__all__ = ["main"]
