"""Adapters over the Memora core: the terminal chat and the Telegram bot."""
