"""``reader=none`` (the default): no model is asked; the lab scores the context only."""

from __future__ import annotations

from memlab.lab.readers import NO_READER, READERS


@READERS.register(NO_READER)
class NoReader:
    """No reader: runs are offline and write no answer columns (as memlab did
    before readers existed). The composition root builds nothing for it."""

    name = NO_READER
