"""The learner's page: a Telegram Mini App on the same core as the bot (design §10).

`server.py` serves the page (static/, plain HTML, CSS and JS, no build step) and its JSON API
(`api.py`) from `memora run`'s event loop; `auth.py` checks Telegram's signed initData, the only
source of who is asking. The core (memora/) never imports this package.
"""

from .auth import Refused, sign, verify
from .server import WebServer, build_web_app

__all__ = ["Refused", "WebServer", "build_web_app", "sign", "verify"]
