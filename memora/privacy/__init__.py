"""Privacy in the core: what is never stored, and what is never deleted without a Yes.

- :mod:`~memora.privacy.secretfilter`: secrets (passwords, keys, card numbers) masked in a
  message before it is written anywhere, and memories that look secret refused;
- :mod:`~memora.privacy.confirmations`: the Yes/No question asked before a deletion nothing can
  undo (/forgetme, forgetting in words); :mod:`memora.commands.answers` acts on the tap.
"""
