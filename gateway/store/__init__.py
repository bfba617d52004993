"""Where state that outlives a request lives: embedded by default, Valkey/Redis when shared.

- ``api``: the :class:`~gateway.store.api.Store` interface every tenant uses,
  its typed failure and its health;
- ``embedded``: memory plus a SQLite file, one gateway, nothing to install;
- ``redis_store``: one Valkey or Redis server shared by every replica;
- ``opening``: the store a config asks for, as a service with its own task.
"""
