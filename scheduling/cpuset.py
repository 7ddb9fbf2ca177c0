"""``scheduling/cpuset.py`` is where the contracts (``spec/contracts.md``: ``CPUTopology.from_rows``,
``allocate``, ``AllocationError``) put the CPU allocator, and where outside conformance checks
import it from. The allocator lives in :mod:`scheduling.cpu.cpuset`, with the rest of CPU
co-location; this module only re-exports its public names. Meridian's own code imports
``scheduling.cpu.cpuset``."""

from scheduling.cpu.cpuset import (  # noqa: F401  (re-exported)
    BIND_ALL_CPUS,
    IO_QUEUES_ANNOTATION,
    SAME_CORE_FIRST,
    SPREAD,
    STRATEGIES,
    TOPOLOGY_ANNOTATION,
    AllocationError,
    CPUSetFormatError,
    CPUTopology,
    Decision,
    IOQueueDistribution,
    Placement,
    TopologyError,
    accept_io_queue_update,
    accept_topology_update,
    allocate,
    format_cpuset,
    generate_topology,
    parse_cpuset,
    plan_allocation,
    reserve_cpus,
    __all__,
)
