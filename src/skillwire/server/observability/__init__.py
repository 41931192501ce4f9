"""What the server reports about itself: traces (``telemetry.py``), Prometheus metrics (``metrics.py``),
structured logs (``logs.py``), the access line (``access.py``), what one request reports on every binding
(``observe.py``), and the store and bus observed (``instrument.py``).

May import, inside the server: the seam (``server/context.py``, ``server/handler.py``) and
``server/buses/`` (the bus protocol, to observe one). Outside: errors, protocol, stores
(tests/test_package.py holds this).
"""
