"""Every page at fleet scale: the console crawled from the overview, server time per page.

Seeds a fleet with every area's demo (node config, quotas, federation with four weeks of water
levels, scheduling), an audit log of ``--audit`` entries and a year of system jobs, then signs
in as an admin (who reaches every page) and follows every link from the overview to our own
pages — lists, details, filters, charts, the CPU fleet view, the audit log, the job list — at
most ``--per-route`` URLs per URL route (one node page stands for all of them). Each page is
fetched twice and the second time counts (the first warms Python's and the database's caches,
as a running console's are). The same crawl on a small fleet first gives each route's query
count: a page whose queries grow with the fleet is named.

Prints p50/p95/p99 server time against the goals (p95 ≤100 ms, p99 ≤150 ms, the emergency
downgrade page ≤100 ms), the slowest pages, and the routes whose query count grew.

    python bench/bench_pages.py [--clusters 500] [--nodes 200000] [--audit 1000000]
                                [--small-clusters 10] [--small-nodes 4000] [--per-route 4]
    BENCH_DATABASE_URL=… python bench/bench_pages.py --crawl-only   # again, on the fleet seeded before

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``
(the goals are PostgreSQL's).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from django_setup import add_sizes, setup_from_command_line  # noqa: E402

EMERGENCY = "/nodeconfig/emergency/"
GOALS = {"p95": 100.0, "p99": 150.0, "emergency": 100.0}


def seed(clusters: int, nodes: int, audit: int, job_days: int) -> None:
    from django.core.management import call_command

    out = io.StringIO()
    steps = [("fleet", lambda: call_command("seed_demo", clusters=clusters, nodes=nodes, stdout=out)),
             ("node config", lambda: call_command("seed_nodeconfig_demo", stdout=out)),
             ("quotas", lambda: call_command("seed_quotas_demo", stdout=out)),
             ("federation, 28 days of water levels", lambda: call_command("seed_federation_demo", history_days=28, stdout=out)),
             ("scheduling", lambda: call_command("seed_scheduling_demo", stdout=out)),
             (f"audit log to {audit:,} entries", lambda: fill_audit(audit)),
             (f"{job_days} days of system jobs", lambda: fill_jobs(job_days))]
    for label, step in steps:
        started = time.perf_counter()
        step()
        print(f"  seeded {label} in {time.perf_counter() - started:.1f} s", flush=True)
    settle()


def settle() -> None:
    """Statistics and visibility maps as a running database has them: autovacuum analyzes and
    vacuums a table within minutes of a bulk load (plans depend on the statistics, index-only
    scans on the visibility map); the crawl would otherwise measure the minute after a restore."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


def fill_audit(total: int) -> None:
    """Routine entries (what automation writes all day) up to ``total``, spread over a year."""
    from django.contrib.contenttypes.models import ContentType
    from django.utils import timezone

    from core.models import ObjectChange
    from fleet.models import Cluster

    missing = total - ObjectChange.objects.count()
    cluster_type = ContentType.objects.get_for_model(Cluster)
    names = list(Cluster.objects.values_list("pk", "name"))
    now, step = timezone.now(), timedelta(days=365) / max(missing, 1)
    for start in range(0, max(missing, 0), 20_000):
        ObjectChange.objects.bulk_create([
            ObjectChange(time=now - step * (missing - i), actor="system:sync", source="system",
                         action=ObjectChange.Action.UPDATE, verb="became_ready", object_type=cluster_type,
                         object_id=str(names[i % len(names)][0]), object_repr=names[i % len(names)][1],
                         before={"ready": False}, after={"ready": True})
            for i in range(start, min(start + 20_000, missing))], batch_size=5000)


def fill_jobs(days: int) -> None:
    """A finished sync job every 10 minutes per ten clusters, as beat leaves them."""
    from django.utils import timezone

    from core.models import Job

    now, created = timezone.now(), Job._meta.get_field("created")
    rows = [Job(kind="fleet.sync_all", status=Job.Status.SUCCEEDED, triggered_by="beat", created=at, started=at,
                finished=at + timedelta(seconds=3), result={"clusters": 500})
            for at in (now - timedelta(minutes=10 * i) for i in range(days * 24 * 6))]
    created.auto_now_add = False  # the bench writes history: keep its times
    try:
        Job.objects.bulk_create(rows, batch_size=5000)
    finally:
        created.auto_now_add = True


def crawl(per_route: int, also: dict[str, str] | None = None) -> list:
    """Every page reachable from the overview, fetched twice; the second fetch is kept. ``also``
    (URL → route): pages to fetch as well, the other crawl's, so both sizes measure the same pages."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tests.crawl import Crawl, Page

    user = get_user_model().objects.filter(username="bench-admin").first() or \
        get_user_model().objects.create_superuser("bench-admin", password="x")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)

    def fetch(url: str, route: str) -> Page:
        client.get(url)
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        seconds = time.perf_counter() - started
        html = response.content.decode(errors="replace") if "html" in response.get("Content-Type", "") else ""
        return Page(url, route, response.status_code, html, seconds, len(queries))

    start = ["/", EMERGENCY, "/jobs/", "/audit/"]
    pages = list(Crawl(fetch, per_route=per_route).pages(*start))
    seen = {page.url for page in pages}
    extra = (fetch(url, route) for url, route in (also or {}).items() if url not in seen)
    return pages + [page for page in extra if page.status == 200]  # a page only the other fleet has is not compared


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def report(pages: list, label: str) -> dict[str, tuple[str, int]]:
    """Prints the figures; returns each page's route and query count by URL."""
    ok = [p for p in pages if p.status == 200]
    broken = [(p.url, p.status) for p in pages if p.status >= 400]
    ms = [p.seconds * 1000 for p in ok]
    print(f"{label}: {len(pages)} pages over {len({p.route for p in pages})} routes; "
          f"p50 {statistics.median(ms):.0f} ms, p95 {percentile(ms, 0.95):.0f} ms (goal ≤{GOALS['p95']:.0f}), "
          f"p99 {percentile(ms, 0.99):.0f} ms (goal ≤{GOALS['p99']:.0f}), max {max(ms):.0f} ms")
    emergency = [p for p in ok if p.url == EMERGENCY]
    if emergency:
        print(f"  the emergency downgrade page: {emergency[0].seconds * 1000:.0f} ms (goal ≤{GOALS['emergency']:.0f}), "
              f"{emergency[0].queries} queries")
    if broken:
        print(f"  not 200: {broken[:10]}")
    for page in sorted(ok, key=lambda p: -p.seconds)[:12]:
        print(f"  {page.seconds * 1000:7.0f} ms {page.queries:4d} queries  {page.url}")
    return {page.url: (page.route, page.queries) for page in ok}


def grown(small: dict[str, tuple[str, int]], large: dict[str, tuple[str, int]]) -> tuple[dict[str, tuple[int, int]], int]:
    """The pages whose query count grew with the fleet, and how many routes were compared.

    The same URL is compared (the large crawl also fetches every page the small one did: a
    group with children and one without run different queries whatever the fleet, so a
    route's maximum compared pages that differ in their data, not in the fleet's size); a
    route with no URL in both (a page the large fleet lacks) is compared by its largest count."""
    grew: dict[str, tuple[int, int]] = {}
    routes = {route for route, _ in large.values()}
    shared = {large[url][0] for url in large.keys() & small.keys()}
    for url in large.keys() & small.keys():
        if large[url][1] > small[url][1]:
            grew[url] = (small[url][1], large[url][1])
    for route in routes - shared:
        before = max((n for r, n in small.values() if r == route), default=None)
        after = max(n for r, n in large.values() if r == route)
        if before is not None and after > before:
            grew[route] = (before, after)
    return grew, len(routes)


def main() -> None:
    parser = add_sizes(argparse.ArgumentParser(), clusters=500, nodes=200_000, audit=1_000_000, job_days=365, small_clusters=10,
                       small_nodes=4000, per_route=4)
    parser.add_argument("--crawl-only", action="store_true",
                        help="crawl the fleet already in BENCH_DATABASE_URL (an earlier run's), seeding nothing")
    args = setup_from_command_line(parser)
    from django.core.management import call_command

    if args.crawl_only:
        report(crawl(args.per_route), "fleet")
        return

    print(f"small fleet: {args.small_clusters} clusters, {args.small_nodes:,} nodes", flush=True)
    seed(args.small_clusters, args.small_nodes, audit=10_000, job_days=7)
    small = report(crawl(args.per_route), "small fleet")
    call_command("flush", interactive=False, verbosity=0)
    print(f"fleet: {args.clusters} clusters, {args.nodes:,} nodes", flush=True)
    seed(args.clusters, args.nodes, audit=args.audit, job_days=args.job_days)
    large = report(crawl(args.per_route, also={url: route for url, (route, _) in small.items()}), "fleet")
    grew, routes = grown(small, large)
    print(f"query count per page independent of fleet size: {routes} routes compared, the same URL where both "
          f"crawls fetched it ({', '.join(f'{r} {a}→{b}' for r, (a, b) in sorted(grew.items())) or 'none grew'})")


if __name__ == "__main__":
    main()
