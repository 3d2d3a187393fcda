"""Long-term memory on a Chroma server shared by several replicas (`[longterm] chroma_url`).

Each replica keeps its own per-user cache (:mod:`memora.longterm.user_cache`) and ranks from it in
numpy, as the embedded store does. What changes with a server is that ANOTHER process may write
for the same user (a learner talking in a private chat and a group answered by two replicas).
So every write ends by giving the user a new version token, kept on the server in a small
collection of its own, one record per user; every read first fetches the user's token (one
`get` by id) and uses the cached memories only if they were loaded under that same token.

Order makes it safe without a lock across replicas: a writer stores the memories first and the
token second; a reader fetches the token first and the memories second. A reader that loads
between the two steps keeps the new memories under the old token and simply loads once more on
its next read. A writer does not write through its own cache either (another replica may have
written in between); it drops the user and the next read loads what the server has.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

__all__ = ["VERSIONS", "SharedVersions", "close_http_client", "http_client"]

VERSIONS = "memory_versions"


def http_client(url: str) -> Any:
    """A `chromadb.HttpClient` for an http(s)://host:port URL."""
    import chromadb  # imported lazily: heavy, and only a Chroma server needs it here
    from chromadb.config import Settings  # lazily, with chromadb

    parts = urlsplit(url)
    ssl = parts.scheme == "https"
    return chromadb.HttpClient(
        host=parts.hostname or "localhost",
        port=parts.port or (443 if ssl else 8000),
        ssl=ssl,
        settings=Settings(anonymized_telemetry=False),
    )


def close_http_client(client: Any) -> None:
    """Close the client and its HTTP connections: chromadb 1.5's close() stops the client's
    System (and its admin client's) but leaves their httpx sessions, and sockets, open until
    garbage collection."""
    owners = [client, getattr(client, "_admin_client", None)]
    sessions = [getattr(getattr(o, "_server", None), "_session", None) for o in owners]
    try:
        client.close()
    finally:
        for session in sessions:
            if session is not None:
                session.close()


class SharedVersions:
    """Per-user version tokens on the Chroma server (blocking calls: run them off the loop)."""

    def __init__(self, client: Any) -> None:
        # Records need a vector: a constant one-dimensional vector, never searched.
        self._col = client.get_or_create_collection(
            VERSIONS, metadata={"purpose": "per-user cache versions"}, embedding_function=None
        )

    def current(self, user_id: int) -> str:
        """The user's token; "" if the user has never been written (or was forgotten)."""
        got = self._col.get(ids=[str(user_id)], include=["metadatas"])
        metas = got.get("metadatas") or []
        return str((metas[0] or {}).get("v", "")) if metas else ""

    def bump(self, user_id: int) -> None:
        """Tell every replica that the user's memories changed."""
        self._col.upsert(
            ids=[str(user_id)],
            embeddings=[[1.0]],
            metadatas=[{"user_id": user_id, "v": uuid.uuid4().hex}],
        )

    def forget(self, user_id: int) -> None:
        """The user is gone: no token (which every replica also reads as a change)."""
        self._col.delete(ids=[str(user_id)])
