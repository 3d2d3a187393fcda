"""The test engines themselves: a real PostgreSQL and a real Chroma server answer."""

from __future__ import annotations

import asyncio

import asyncpg

from memora.longterm.chroma_server import close_http_client, http_client
from tests.support.engines import ChromaServer, Postgres, fresh_database


async def test_postgres_answers_and_each_test_has_its_own_schema(postgres: Postgres) -> None:
    first, second = fresh_database(postgres), fresh_database(postgres)
    assert first != second
    conn = await asyncpg.connect(first)
    try:
        assert (await conn.fetchval("SHOW server_version")).startswith("16")
        await conn.execute("CREATE TABLE t (x BIGINT)")
    finally:
        await conn.close()
    other = await asyncpg.connect(second)
    try:
        assert await other.fetchval("SELECT to_regclass('t')") is None
    finally:
        await other.close()


async def test_chroma_server_answers(chroma_server: ChromaServer) -> None:
    def roundtrip() -> list[str]:
        client = http_client(chroma_server.url)
        try:
            col = client.get_or_create_collection("engine_check", embedding_function=None)
            col.upsert(ids=["a"], embeddings=[[0.1, 0.2, 0.3]], documents=["hello"])
            got = col.get(ids=["a"], include=["documents"])
            client.delete_collection("engine_check")
        finally:
            close_http_client(client)
        return list(got["documents"] or [])

    assert await asyncio.to_thread(roundtrip) == ["hello"]
