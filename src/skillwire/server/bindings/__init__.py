"""How a request arrives and what stands at its door: the HTTP endpoints (the shared prologue in
``endpoint.py``, JSON-RPC in ``jsonrpc.py``, HTTP+JSON in ``rest.py``) and their ASGI building blocks
(``asgi.py``), gRPC (``grpc.py``, its budgets in ``grpc_limits.py``), the agent card (``card.py``), and the
door itself: the Host rule (``hosts.py``), browsers and CORS (``browser.py``), authentication
(``guard.py``), TLS and the client certificate (``tls.py``), the descriptors connections cost
(``descriptors.py``).

May import, inside the server: the seam (``server/context.py``, ``server/handler.py``) and
``server/observability/``; never the task runtime, the buses or push: a binding reaches the work only
through the handler. Outside: errors, protocol, wire, security (tests/test_package.py holds this).
"""
