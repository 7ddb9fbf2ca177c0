"""``scheduling/cpuset.py`` is where the contracts (``spec/contracts.md``: ``CPUTopology.from_rows``,
``allocate``, ``AllocationError``) put the CPU allocator, and where outside conformance checks
import it from. The allocator lives in :mod:`scheduling.cpu.cpuset`, with the rest of CPU
co-location; this module only re-exports its public names. Meridian's own code imports
``scheduling.cpu.cpuset``."""

from scheduling.cpu.cpuset import *  # noqa: F403  (the re-export, whatever it holds)
from scheduling.cpu.cpuset import __all__  # noqa: F401
