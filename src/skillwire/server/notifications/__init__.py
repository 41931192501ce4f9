"""Push notifications and the URLs the server calls: the config operations and the deliveries a commit
queues (``push.py``), the deliverer (``push_delivery.py``: lanes, retries, the signed POST), the webhook
URL policy (``outbound.py``, the SSRF guard) and the HTTP transport that connects only to checked
addresses (``outbound_http.py``).

May import, inside the server: the seam (``server/context.py``, ``server/handler.py``) and
``server/observability/``. Outside: errors, protocol, wire, stores, webhooks (tests/test_package.py holds
this).
"""
