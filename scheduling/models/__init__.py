"""Scheduling models, one module per part: ``policies`` (Part A, unified scheduling) and
``cpu`` (Part B, CPU co-location)."""

from .cpu import *  # noqa: F401,F403
from .policies import (  # noqa: F401
    NodeSchedulerConfig,
    NodeSchedulerConfigRevision,
    PodSchedulerConfig,
    PodSchedulerConfigRevision,
    SchedulerConfigBinding,
    SchedulerConfigBindingRevision,
    SchedulingConfigVersion,
    SchedulingPolicy,
    SchedulingPolicyRevision,
)
