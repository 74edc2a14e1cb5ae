"""The bridge process's start-up tuning (`python -m bridge`, container/bridge/__main__.py)."""

from __future__ import annotations

import gc

from bridge.__main__ import freeze_startup_objects


def test_startup_objects_leave_the_collectors_generations():
    gc.unfreeze()
    try:
        frozen = freeze_startup_objects()
        assert frozen == gc.get_freeze_count()
        # The interpreter and the bridge's imported modules: tens of thousands of objects, none left to traverse.
        assert frozen > 10_000
        assert sum(len(gc.get_objects(generation)) for generation in range(3)) < frozen / 10
    finally:
        gc.unfreeze()
