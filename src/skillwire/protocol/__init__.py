"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

Pure data and rules of the A2A protocol: models, the task-state table, operations, versions."""
