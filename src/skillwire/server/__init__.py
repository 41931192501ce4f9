"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

The runtime and its bindings: task manager, event bus, request handler, JSON-RPC, card, app."""
