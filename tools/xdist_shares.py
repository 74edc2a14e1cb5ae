"""How pytest-xdist's ``--dist worksteal`` cuts a collection into its workers' first shares, and
which share the k-th long module should begin: what tests/e2e/conftest.py orders the collection by,
so that each long module starts the run on a worker of its own. Written here because xdist exposes
no such function: it mirrors ``WorkStealingScheduling.check_schedule`` of pytest-xdist 3.x
(xdist/scheduler/worksteal.py), where every idle worker in turn gets the pending tests divided by
the workers still to serve; if a later xdist cuts otherwise, the long modules only start later,
nothing fails."""

from __future__ import annotations


def share_starts(count: int, workers: int) -> list[int]:
    """Where each of ``workers`` shares of ``count`` tests begins, as worksteal cuts them: each idle
    worker in turn gets the pending tests divided by the workers still to serve
    (xdist/scheduler/worksteal.py, check_schedule)."""
    starts, start = [], 0
    for remaining_workers in range(workers, 0, -1):
        starts.append(start)
        start += (count - start) // remaining_workers
    return starts


def share_of(index: int, workers: int) -> int:
    """The share the ``index``-th marked module begins: 0, 1, ..., N-1, then back N-1, ..., 0 (a
    snake), so a share that got an early module, the first one being the browser's two-minute
    recording, is the last to get a second."""
    rank, position = divmod(index, workers)
    return position if rank % 2 == 0 else workers - 1 - position
