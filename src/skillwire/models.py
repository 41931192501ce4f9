"""The former name of :mod:`skillwire.types`, kept so that ``from skillwire.models import Task`` goes on
working: import from :mod:`skillwire.types`."""

from skillwire.types import *  # noqa: F403 - the same names as skillwire.types
from skillwire.types import __all__ as __all__
