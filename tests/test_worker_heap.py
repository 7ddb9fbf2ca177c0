"""A Celery pool process freezes its startup heap (``core.worker_signals.freeze_startup_heap``)."""

from __future__ import annotations

import gc

from celery.signals import worker_process_init


def test_a_pool_process_moves_its_startup_heap_out_of_the_collectors_way():
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        worker_process_init.send(sender=None)  # what Celery sends in each pool process it forks
        frozen = gc.get_freeze_count()
        assert frozen > 10_000, frozen  # Django and the apps: what every full collection walked again
        made_later = [[] for _ in range(100)]
        assert gc.get_freeze_count() == frozen and all(gc.is_tracked(x) for x in made_later)
    finally:
        gc.unfreeze()
