"""UTC time: the one helper every timestamp the product stores or shows goes through."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["as_utc", "utcnow"]


def as_utc(when: datetime | None = None) -> datetime:
    """`when` (now when None) as an aware UTC datetime; a naive datetime is taken as UTC."""
    when = when or datetime.now(UTC)
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def utcnow(when: datetime | None = None) -> str:
    """`when` (now when None) in UTC as ISO 8601 to the second: how timestamps are stored."""
    return as_utc(when).isoformat(timespec="seconds")
