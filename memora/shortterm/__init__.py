"""Short-term memory: what one chat's reply is given from its own history.

- :mod:`~memora.shortterm.window`: the recent-turn window and the context of one reply inside
  the input-token budget (profile, memories, summary, recent turns, lesson mode, message);
- :mod:`~memora.shortterm.folding`: folding turns that left the window into the rolling summary;
- :mod:`~memora.shortterm.keyfacts`: the numbers, dates, levels and names a summary must keep;
- :mod:`~memora.shortterm.tokens`: counting a request's input tokens (o200k, or the provider);
- :mod:`~memora.shortterm.instructions`: the reply and summary instructions, and how learner
  text is framed as data inside them.

The history itself is stored in :mod:`memora.storage`.
"""
