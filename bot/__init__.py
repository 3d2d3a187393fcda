"""Adapters over the Memora core: the terminal chat (`memora chat`) and the Telegram bot."""
