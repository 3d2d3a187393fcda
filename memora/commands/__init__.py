"""Slash commands, executed by the core so every adapter renders the same answers: the registry
(registry.py) and one module per family of commands. Importing this package registers them all,
in /help order (the order of the imports below)."""

# Each family registers its commands when imported; /help lists them in this order.
# isort: off
from memora.commands import (  # noqa: F401
    debug,
    memory,
    pins,
    learner,
    lessons,
    data,
    reminders,
)

# isort: on
from memora.commands.buttons import press_button
from memora.commands.registry import (
    COMMANDS,
    Command,
    CommandContext,
    Handler,
    command,
    help_text,
    run_command,
)

__all__ = [
    "COMMANDS",
    "Command",
    "CommandContext",
    "Handler",
    "command",
    "help_text",
    "press_button",
    "run_command",
]
