"""A Celery pool process freezes its startup heap (``core.worker_signals.freeze_startup_heap``)."""

from __future__ import annotations

import gc
import multiprocessing


def _pool_process(pipe) -> None:
    """What a forked pool process does on start: Celery sends ``worker_process_init`` in it."""
    from celery.signals import worker_process_init

    gc.unfreeze()
    before = gc.get_freeze_count()
    worker_process_init.send(sender=None)
    frozen = gc.get_freeze_count()
    made_later = [[] for _ in range(100)]
    pipe.send((before, frozen, gc.get_freeze_count(), all(gc.is_tracked(x) for x in made_later)))


def test_a_pool_process_moves_its_startup_heap_out_of_the_collectors_way():
    """In a forked process, as Celery's pool makes them: the signal's other receivers (Celery's
    Django fixup closes the inherited database sockets) must not run in the test process."""
    parent, child = multiprocessing.get_context("fork").Pipe()
    process = multiprocessing.get_context("fork").Process(target=_pool_process, args=(child,))
    process.start()
    try:
        assert parent.poll(30), "the pool process did not answer"
        before, frozen, after, tracked = parent.recv()
    finally:
        process.join(10)
    assert before == 0
    assert frozen > 10_000, frozen  # Django and the apps: what every full collection walked again
    assert after == frozen and tracked, "objects made later are collected as before"
