"""The runtime and its bindings: task manager, event bus, request handler, JSON-RPC, card, app."""
