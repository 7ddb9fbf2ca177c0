"""Exit codes a pipeline can branch on (docs/cli.md has the table).

One number per kind of outcome, whatever the command: a script tells "the server said no"
from "the server could not be reached" from "someone changed it first" without parsing text.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    #: Anything unexpected: the server unreachable or failing (5xx), a broken answer.
    ERROR = 1
    #: The command line itself is wrong: an unknown flag, a missing argument, an unreadable file.
    USAGE = 2
    #: The server refused the request (400: invalid, a rule forbids it; 404: no such object) or
    #: denied it (401: not logged in, 403: not allowed).
    REFUSED = 3
    #: Someone changed it first: a stale resourceVersion or If-Match (412), a conflict (409).
    CONFLICT = 4
    #: ``--wait`` ran out of time before the work finished.
    TIMEOUT = 5
    #: ``meridian diff`` only: applying the files would change something.
    CHANGES = 6


def for_status(status: int) -> ExitCode:
    """The exit code of an HTTP error status."""
    if status in (409, 412):
        return ExitCode.CONFLICT
    if 400 <= status < 500:
        return ExitCode.REFUSED
    return ExitCode.ERROR
