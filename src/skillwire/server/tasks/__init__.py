"""The task runtime: the request handler that runs skills as tasks (``runtime.py``), one run of a task
(``run.py``) and its lock (``lock.py``), the executor protocol a skill runner implements (``executor.py``),
idempotency keys (``idempotency.py``) and retention in the background (``retention.py``).

May import, inside the server: the seam (``server/context.py``, ``server/handler.py``),
``server/buses/``, ``server/observability/`` and ``server/notifications/``; never a binding, the app or
the serving glue. Outside: errors, protocol, stores, security (tests/test_package.py holds this).
"""
