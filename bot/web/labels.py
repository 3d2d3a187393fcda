"""The page's own words, from the same catalogs as the bot's (memora/locale): sent with the data,
in the learner's language, so the page itself holds no text to translate."""

from __future__ import annotations

from memora.i18n import N_, _

LABELS = {
    "title": N_("My memory"),
    "memories": N_("Memories"),
    "profile": N_("Profile"),
    "mistakes": N_("Mistakes"),
    "words": N_("Words"),
    "progress": N_("Progress"),
    "usage": N_("Usage"),
    "from_message": N_("From your message:"),
    "saved_on": N_("Saved"),
    "updated_on": N_("changed"),
    "was": N_("Before:"),
    "edit": N_("Edit"),
    "save": N_("Save"),
    "cancel": N_("Cancel"),
    "undo": N_("Undo last edit"),
    "delete": N_("Delete"),
    "clear": N_("Clear"),
    "confirm_delete": N_("Delete this for good? It cannot be undone."),
    "no_memories": N_("I don't remember anything about you yet."),
    "no_mistakes": N_("No mistakes logged yet."),
    "no_words": N_("No words logged yet."),
    "next_review": N_("Next review:"),
    "source": N_("source:"),
    "history": N_("History"),
    "empty": N_("(empty)"),
    "pinned": N_("Pinned"),
    "pin": N_("Pin"),
    "unpin": N_("Unpin"),
    "since": N_("Since:"),
    "until": N_("Until:"),
    "download": N_("Download my data"),
    "forget_me": N_("Forget me"),
    "confirm_forget_me": N_(
        "Delete everything I keep about you: memories, profile, mistakes, words and our private "
        "chat? This cannot be undone."
    ),
    "forgotten": N_("Everything I kept about you is deleted."),
    "reopen": N_("This page needs a fresh opening: close it and open it again from the chat."),
    "failed": N_("That did not work. Please try again."),
    "too_many": N_("Too many requests: wait a minute, then try again."),
    "tokens_per_day": N_("Tokens per day"),
    "cost_per_day": N_("Estimated cost per day"),
}


def labels() -> dict[str, str]:
    """The page's words in the current language (see memora.i18n.speaking)."""
    return {key: _(text) for key, text in LABELS.items()}
