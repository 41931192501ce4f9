"""The PostgreSQL store: both contract suites, then what only a store shared by several processes has."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from conftest import postgres_schema
from skillwire.stores.postgres import PostgresTaskStore
from skillwire.testing.store_contract import PushStoreContract, TaskStoreContract


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with postgres_schema() as url:
        yield url


class TestPostgresStore(TaskStoreContract, PushStoreContract):
    @pytest.fixture
    async def store(self, pg_url: str) -> AsyncIterator[PostgresTaskStore]:
        s = PostgresTaskStore(pg_url)
        await s.open()
        yield s
        await s.close()
