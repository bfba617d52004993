"""The store a config asks for, opened for the life of the gateway.

``store.url`` set: the shared server (:mod:`gateway.store.redis_store`);
otherwise the embedded store, with its file where ``store.path`` says or
beside the config file (:func:`default_path`).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio

from gateway.store.api import StoreUnavailable
from gateway.store.embedded import EmbeddedStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from gateway.config import StoreConfig
    from gateway.store.api import Store

__all__ = ["default_path", "open_store"]

logger = structlog.get_logger("gateway.store")


def default_path(config: StoreConfig, config_file: str | None) -> str:
    """Where the embedded store keeps its file.

    Args:
        config: the ``store:`` block.
        config_file: the config file the gateway runs on; None when the config
            came from no file (then the store keeps everything in memory).

    Returns:
        ``store.path`` when set; else ``<config stem>.state.sqlite`` beside the
        config file; else "" (memory only).
    """
    if config.path:
        return config.path
    if config_file is None:
        return ""
    source = Path(config_file)
    return str(source.with_name(source.stem + ".state.sqlite"))


def _embedded(config: StoreConfig, config_file: str | None) -> EmbeddedStore:
    """The embedded store; memory only when the *default* file cannot be opened.

    A ``store.path`` the operator set that cannot be opened stops the start
    (``StoreUnavailable`` names the file). The default beside the config
    file may sit where the gateway may not write (a config inside a
    read-only install, the packaged default): then the store keeps
    everything in memory, with one warning saying what a restart will lose.
    """
    path = default_path(config, config_file)
    if config.path or not path:
        return EmbeddedStore(path)
    try:
        return EmbeddedStore(path)
    except StoreUnavailable as exc:
        logger.warning("store.embedded.memory_only", path=path, reason=exc.reason)
        return EmbeddedStore()


@asynccontextmanager
async def open_store(config: StoreConfig, *, config_file: str | None) -> AsyncIterator[Store]:
    """Open the configured store and run its upkeep task while the context is open.

    Args:
        config: the ``store:`` block.
        config_file: the config file's path, for the embedded store's default.

    Yields:
        The store.
    """
    if config.url:
        # coredis loads only for a shared store: the embedded default's start
        # path stays as short as it was.
        from gateway.store.redis_store import open_redis_store

        async with open_redis_store(config) as shared, trio.open_nursery() as nursery:
            await nursery.start(shared.run)
            yield shared
            nursery.cancel_scope.cancel()
        return
    embedded = _embedded(config, config_file)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(embedded.run)
            yield embedded
            nursery.cancel_scope.cancel()
    finally:
        embedded.close()
