"""`memora check` for the operator: the model provider's checks (memora/check.py) and the
Telegram token's (getMe), one line each, and an exit status that says whether Memora can run."""

from __future__ import annotations

from telegram import Bot
from telegram.error import InvalidToken, NetworkError, TelegramError

from memora.check import Finding, run_checks
from memora.config import Settings, TelegramConfig


async def check_telegram(cfg: TelegramConfig) -> Finding:
    """The token, asked to Telegram (getMe) at the configured Bot API server."""
    if not cfg.token:
        return Finding("telegram", "fatal", "no token: set [telegram] token or TELEGRAM_BOT_TOKEN")
    bot = Bot(cfg.token, base_url=cfg.base_url, base_file_url=cfg.base_file_url)
    try:
        async with bot:
            me = await bot.get_me()
    except InvalidToken:
        return Finding("telegram", "fatal", "Telegram refuses the token (getMe): check it")
    except NetworkError as exc:
        return Finding("telegram", "fatal", f"{cfg.base_url} cannot be reached ({exc})")
    except TelegramError as exc:
        return Finding("telegram", "fatal", f"getMe failed ({exc})")
    return Finding("telegram", "ok", f"the token is @{me.username}'s: Memora runs as that bot")


async def run(settings: Settings) -> int:
    """Print every check's line; 1 when one of them is fatal, else 0."""
    found = [*await run_checks(settings), await check_telegram(settings.telegram)]
    for finding in found:
        print(finding.line(), flush=True)
    fatal = [f.capability for f in found if f.fatal]
    if fatal:
        print(f"memora check: Memora cannot run until this is fixed: {', '.join(fatal)}")
        return 1
    print("memora check: Memora can run with this configuration")
    return 0
