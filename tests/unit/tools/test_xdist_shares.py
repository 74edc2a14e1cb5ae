"""tools/xdist_shares.py: the shares worksteal hands its workers first, and the snake of long
modules."""

from __future__ import annotations

import itertools

import pytest

from tools.xdist_shares import share_of, share_starts


@pytest.mark.parametrize(
    ("count", "workers", "starts"),
    [
        (1928, 3, [0, 642, 1285]),  # 642, then 1286 // 2 = 643, then the 643 left
        (1928, 4, [0, 482, 964, 1446]),
        (10, 3, [0, 3, 6]),  # 3, then 7 // 2 = 3, then 4
        (2, 3, [0, 0, 1]),  # fewer tests than workers: the first worker gets none
        (7, 1, [0]),
    ],
)
def test_shares_start_where_worksteal_cuts_them(count, workers, starts):
    assert share_starts(count, workers) == starts


def test_every_test_is_in_exactly_one_share():
    for count in range(40):
        for workers in range(1, 6):
            starts = [*share_starts(count, workers), count]
            sizes = [end - start for start, end in itertools.pairwise(starts)]
            assert sum(sizes) == count and min(sizes) >= 0 and max(sizes) - min(sizes) <= 1, (
                count,
                workers,
                sizes,
            )


@pytest.mark.parametrize(
    ("workers", "shares"),
    [
        (3, [0, 1, 2, 2, 1, 0, 0]),
        (4, [0, 1, 2, 3, 3, 2, 1, 0, 0]),
        (1, [0, 0, 0]),
    ],
)
def test_long_modules_snake_across_the_shares(workers, shares):
    assert [share_of(index, workers) for index in range(len(shares))] == shares
