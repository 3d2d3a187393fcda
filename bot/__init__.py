"""Adapters over the Memora core: the terminal chat and the Telegram bot."""

import os

# python-telegram-bot 22 warns on every duration it reads as an int (RetryAfter, voice
# durations) until this opt-in to the timedelta values that become its default.
os.environ.setdefault("PTB_TIMEDELTA", "1")
