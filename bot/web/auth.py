"""Who is asking: Telegram's signed Mini App initData, checked as Telegram documents it
(core.telegram.org/bots/webapps, "Validating data received via the Mini App").

``secret_key = HMAC_SHA256(key="WebAppData", msg=bot_token)``; ``hash = hex(HMAC_SHA256(
key=secret_key, msg=data_check_string))``, where data_check_string is every received field but
``hash``, as ``key=value`` sorted by key and joined by line feeds. The user is read only from
the signed fields; an ``auth_date`` older than the configured age is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from memora.types import UserRef

SCHEME = "tma"  # Authorization: tma <initData>
MAX_INIT_DATA = 4096  # Telegram's initData is a few hundred bytes


class Refused(Exception):
    """initData that proves nothing: missing, malformed, forged or too old."""


@dataclass(frozen=True)
class Opened:
    """A signed opening of the page: who, and when Telegram signed it."""

    user: UserRef
    auth_date: int


def _secret(token: str) -> bytes:
    return hmac.new(b"WebAppData", token.encode(), hashlib.sha256).digest()


def _check_string(fields: dict[str, str]) -> str:
    return "\n".join(f"{k}={fields[k]}" for k in sorted(fields) if k != "hash")


def signature(fields: dict[str, str], token: str) -> str:
    """The hex hash Telegram puts in initData for these fields."""
    message = _check_string(fields).encode()
    return hmac.new(_secret(token), message, hashlib.sha256).hexdigest()


def sign(user: dict[str, object], token: str, *, auth_date: int | None = None) -> str:
    """initData for this user, signed with the bot token as Telegram signs it (`memora app-url`
    and the tests)."""
    fields = {
        "auth_date": str(int(time.time()) if auth_date is None else auth_date),
        "user": json.dumps(user, separators=(",", ":"), ensure_ascii=False),
    }
    fields["hash"] = signature(fields, token)
    return urlencode(fields)


def verify(init_data: str, token: str, *, max_age: int, now: float | None = None) -> Opened:
    """The user of a signed initData; Refused unless the hash is the token's and it is fresh."""
    if not init_data or len(init_data) > MAX_INIT_DATA:
        raise Refused("no initData")
    try:
        pairs = parse_qsl(init_data, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise Refused("malformed initData") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise Refused("a field given twice")
    given = fields.get("hash", "")
    if not hmac.compare_digest(given.encode(), signature(fields, token).encode()):
        raise Refused("bad signature")
    try:
        auth_date = int(fields["auth_date"])
        user = json.loads(fields["user"])
        user_id = user["id"]
    except (KeyError, ValueError, TypeError):
        raise Refused("no user in initData") from None
    if isinstance(user_id, bool) or not isinstance(user_id, int):
        raise Refused("no user in initData")
    age = (time.time() if now is None else now) - auth_date
    if age > max_age or age < -60:  # a minute's clock skew either way
        raise Refused("expired")
    name = " ".join(str(user.get(k) or "") for k in ("first_name", "last_name")).strip()
    language = str(user.get("language_code") or "")
    return Opened(UserRef(user_id, name, language), auth_date)


def from_header(header: str, token: str, *, max_age: int) -> Opened:
    """The opening an `Authorization: tma <initData>` header carries (see `verify`)."""
    scheme, _sep, init_data = header.partition(" ")
    if scheme.lower() != SCHEME:
        raise Refused("no initData in the Authorization header")
    return verify(init_data.strip(), token, max_age=max_age)
