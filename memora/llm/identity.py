"""The learner as the model provider sees them: a stable keyed hash (HMAC-SHA256 of the
learner's id under the deployment's `provider_identifier` key, memora/storage/keys.py), sent as
`safety_identifier` so the provider's abuse checks can tell one learner from the whole
deployment. It is never the platform's id: without the key, which never leaves the database, the
hash cannot be turned back into the id nor matched with another deployment's."""

from __future__ import annotations

import hashlib
import hmac


class ProviderIdentity:
    """Learner id → the identifier the provider is sent (64 hex characters, the most OpenAI
    takes)."""

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    def of(self, user_id: int) -> str:
        return hmac.new(self._key, str(user_id).encode(), hashlib.sha256).hexdigest()
