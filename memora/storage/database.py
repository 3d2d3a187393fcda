"""`Database`: the short-term store as one object, composed of its connection and its queries."""

from __future__ import annotations

from memora.storage.chats import ChatQueries
from memora.storage.erasure import UserErasure
from memora.storage.keys import KeyQueries
from memora.storage.ledger import LedgerQueries
from memora.storage.modes import ModeQueries
from memora.storage.turns import TurnQueries


class Database(ChatQueries, TurnQueries, ModeQueries, UserErasure, KeyQueries, LedgerQueries):
    """The short-term store: chats and their history (ChatQueries), turns, usage and the
    extraction log (TurnQueries), lesson modes (ModeQueries), erasure (UserErasure), the
    deployment's keys (KeyQueries), the usage ledger (LedgerQueries), over one Connection."""
