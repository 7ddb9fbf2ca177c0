"""Beat may run twice (two pods, a restart overlapping the old one): only the holder of the
leader lease sends anything; a standby takes over when the leader stops (at once) or dies (within
the lease's lifetime). Real Redis and the real Celery app; what a beat sends is observed on the
way out (``before_task_publish``)."""

from __future__ import annotations

import time

import pytest
from celery.signals import before_task_publish

from config.celery import app
from core.beat import LEADER_TTL, TICK_SECONDS, Scheduler
from core.locks import KEY, Lease
from core.redis import get_redis

from .workers import purge_queues


@pytest.fixture
def clean_lease():
    get_redis().delete(KEY.format(name="beat-leader"), KEY.format(name="test-lease"))
    yield
    get_redis().delete(KEY.format(name="beat-leader"), KEY.format(name="test-lease"))
    purge_queues()


def test_one_lease_holder_at_a_time_renewed_released_and_lapsing(clean_lease):
    first, second = Lease("test-lease", ttl=1.0, holder="first"), Lease("test-lease", ttl=1.0, holder="second")
    assert first.keep() and not second.keep()
    assert second.holder() == "first"
    time.sleep(0.6)
    assert first.keep(), "renewed while held"
    time.sleep(0.6)
    assert not second.keep(), "the renewal kept it past its first lifetime"
    first.release()
    assert second.keep() and not first.keep(), "released: the other takes it at once"
    time.sleep(1.2)  # second stops renewing, as a killed process would
    assert first.keep(), "lapsed: the other takes it"
    assert not second.keep(), "the old holder finds it gone and does not lead"


def sent_during(action) -> list[str]:
    sent: list[str] = []

    def record(sender=None, **_kwargs):
        sent.append(sender)

    before_task_publish.connect(record, weak=False)
    try:
        action()
    finally:
        before_task_publish.disconnect(record)
    return sent


def tick_for(scheduler: Scheduler, seconds: float) -> list[float]:
    """Tick as beat's loop does (each tick says how long to wait) for ``seconds``."""
    waits, ends = [], time.monotonic() + seconds
    while time.monotonic() < ends:
        waits.append(scheduler.tick())
        time.sleep(max(0, min(waits[-1], 0.3)))
    return waits


@pytest.mark.django_db(transaction=True)  # the beat closes its database connection after the reaper's pass
def test_only_the_leading_beat_sends_and_a_standby_takes_over_when_it_stops(clean_lease):
    leader, standby = Scheduler(app=app), Scheduler(app=app)
    try:
        sent = sent_during(lambda: tick_for(leader, 1.5))
        assert "core.publish_live" in sent, "the first beat leads and sends what is due (every second)"
        waits = []
        assert sent_during(lambda: waits.extend(tick_for(standby, 1.5))) == [], "the standby sends nothing"
        assert set(waits) == {TICK_SECONDS}, "and tries again each second"
        leader.close()
        assert "core.publish_live" in sent_during(lambda: tick_for(standby, 1.5)), \
            "the leader stopped cleanly: the standby leads at once"
    finally:
        standby.close()


@pytest.mark.django_db(transaction=True)
def test_a_dead_leaders_lease_lapses_within_its_lifetime(clean_lease):
    leader, standby = Scheduler(app=app), Scheduler(app=app)
    try:
        leader.tick()
        died = time.monotonic()  # the leader stops ticking without releasing: kill -9
        while not sent_during(lambda: tick_for(standby, 0.5)):
            assert time.monotonic() - died < LEADER_TTL + 3, "the standby did not take over"
        assert time.monotonic() - died >= LEADER_TTL - 1, "not before the dead leader's lease lapsed"
    finally:
        standby.close()
