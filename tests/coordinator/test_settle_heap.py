"""The coordinator's start-up GC settings (``coordinator.main.settle_heap``): what start-up
loaded is frozen, its garbage is collected first, and the collector is on again after."""

from __future__ import annotations

import gc
import weakref

from coordinator.main import settle_heap


class Loaded:
    """Something start-up makes; in a cycle when it is garbage."""

    def __init__(self) -> None:
        self.me: Loaded | None = None


def test_the_loaded_heap_is_frozen_and_its_garbage_collected() -> None:
    gc.disable()  # as serve() does while the store loads
    try:
        kept = [Loaded() for _ in range(1000)]
        garbage = Loaded()
        garbage.me = garbage
        gone = weakref.ref(garbage)
        del garbage
        settle_heap()
        assert gc.isenabled()
        assert gone() is None  # collected, not frozen for good
        assert gc.get_freeze_count() >= len(kept)
        assert not any(o is kept for o in gc.get_objects())  # out of every collection
    finally:
        gc.unfreeze()
        gc.enable()
