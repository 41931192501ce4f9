"""The package's version, in one place: hatchling reads it for the distribution (pyproject.toml
``[tool.hatch.version]``), ``skillwire.__version__`` and ``skillwire --version`` print it."""

__version__ = "0.1.0"


def version_line() -> str:
    """What ``skillwire --version`` prints, wherever it is answered (the console script or the parser)."""
    return f"skillwire {__version__}"
