"""Event buses: the ``EventBus`` protocol (``base.py``) and one module per bus (``memory.py``,
``redis.py``, ``postgres.py``), opened by URL scheme from the table in ``schemes.py``. Adding a bus is
one module here and one line in ``schemes.SCHEMES``; ``base.py`` imports no bus.

May import nothing else of the server (every other part of it may use a bus). Outside: errors, protocol
(tests/test_package.py holds this).
"""
