"""Running the app under uvicorn: ``serve.py`` (one process, workers, reloading, the shutdown that ends
streams first), ``uvicorn_tls.py`` (HTTPS and the ASGI TLS extension) and ``http.py`` (the HTTP/1.1
connection budgets below the ASGI app).

The top of the server: may import ``server/app.py`` and every folder beside this one; nothing in the
server imports it (the agent and the CLI do). Outside: errors, protocol, wire, stores
(tests/test_package.py holds this).
"""
