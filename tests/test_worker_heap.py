"""A Celery pool process freezes its startup heap (``core.worker_signals.freeze_startup_heap``);
bulk work pauses the cyclic collector (``collector_paused``), across threads, and never for good."""

from __future__ import annotations

import gc
import multiprocessing
import threading
import weakref

import pytest

from core import worker_signals
from core.fastpath import BatchingWebhook
from core.worker_signals import collector_paused
from tests.threads import held_in_a_thread


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


def test_the_collector_is_paused_inside_and_back_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner pause leaving does not end the outer one"
    assert gc.isenabled()


def test_a_collector_off_before_stays_off():
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_pauses_in_threads_end_when_the_last_one_leaves():
    with held_in_a_thread(collector_paused, at_most=10) as let_go:
        with collector_paused():
            let_go()
            assert not gc.isenabled(), "the other thread's pause still holds"
    assert gc.isenabled()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_overlapping_pauses_without_end_still_collect_cycles(monkeypatch):
    monkeypatch.setattr(worker_signals, "COLLECT_EVERY_SECONDS", 0.0)
    with collector_paused():  # another sync, running all along
        cycle = _Cycle()
        alive = weakref.ref(cycle)
        del cycle
        assert alive() is not None, "only the cyclic collector frees a cycle"
        with collector_paused():
            pass
        assert alive() is None, "a pause that left collected, though another still holds"
    assert gc.isenabled()


@pytest.mark.django_db(transaction=True)
def test_a_worker_in_the_test_process_hands_its_frozen_heap_back():
    """The suites' in-process worker (the solo pool) sends ``worker_process_init`` here, which
    froze this process's heap. A thread that had a database connection then, and finished while
    the worker ran, left its connection in a frozen cycle that was never freed: its PostgreSQL
    session outlived the suite ("test_test is being accessed by 2 other sessions")."""
    from django.db import connections

    from fleet.models import Cluster
    from tests.workers import shard_worker

    opened, finish = threading.Event(), threading.Event()
    held: list[weakref.ref] = []

    def a_thread_with_a_connection() -> None:
        Cluster.objects.exists()
        held.append(weakref.ref(connections["default"]))
        opened.set()
        finish.wait(30)
        connections.close_all()  # this test's own connection goes back; the wrapper is what must not stay

    thread = threading.Thread(target=a_thread_with_a_connection)
    thread.start()
    assert opened.wait(30)
    with shard_worker("heap-hand-back"):
        assert gc.get_freeze_count() > 0, "the solo pool froze the heap, as a pool process does"
        finish.set()
        thread.join(30)
    gc.collect()
    assert gc.get_freeze_count() == 0
    assert held[0]() is None, "the finished thread's wrapper (and whatever connection it held) is freed"


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.parametrize("freeze", [
    worker_signals.freeze_startup_heap,
    lambda: BatchingWebhook(app=None)._start_pool().shutdown(),  # a web process's first webhook batch
], ids=["pool process", "webhook fast path"])
def test_freezing_the_heap_keeps_no_garbage(freeze):
    """Garbage alive when the heap is frozen is collected, not frozen with it (a frozen cycle is
    never freed: a finished thread's connection in one held its PostgreSQL session for good)."""
    gc.unfreeze()
    enabled = gc.isenabled()
    gc.disable()  # no collection of its own between making the garbage and the freeze
    garbage = _Cycle()
    gone = weakref.ref(garbage)
    del garbage
    try:
        freeze()
        assert gone() is None
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
