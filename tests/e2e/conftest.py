"""The e2e tier's scheduling: a test marked ``starts_first`` (one that takes minutes however fast
the machine is, such as a recording played in real time or a deploy-update-destroy with the CDK CLI)
starts at the beginning of the run, each marked module on a worker of its own while there are
workers.

Why: pytest-xdist's ``--dist worksteal`` (``make test``) hands each of its N workers one contiguous
share of the collection, in order (the shares' sizes depend only on the number of tests and N), and
later lets an idle worker take the second half of the longest queue. A long test collected late
starts late, and the suite waits for it alone at the end; two long tests in one share run one after
the other, however many workers idle. So the hook puts the marked modules at the starts of the
shares, one per share in collection order and then back again (tools/xdist_shares.py), and the
other tests fill the shares in their order. Each marked module moves whole (marked tests first), so
its fixtures (a browser, the servers, moto) are still set up once.

The hook runs last (``trylast``), after any other reordering of the collection, and only reorders:
deselection (``-m``, ``-k``) is untouched. Every worker computes the same order (xdist requires one
collection). Without xdist the marked modules simply come first.
"""

from __future__ import annotations

import pytest

from tools.xdist_shares import share_of, share_starts

MARKER = "starts_first"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: a test of a minute or more at any machine speed: its module "
        "starts the run on a worker of its own (tests/e2e/conftest.py)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked_modules = list(
        dict.fromkeys(
            getattr(item, "module", None) for item in items if item.get_closest_marker(MARKER)
        )
    )
    if not marked_modules:
        return
    groups = []
    for module in marked_modules:
        group = [item for item in items if getattr(item, "module", None) == module]
        group.sort(
            key=lambda item: item.get_closest_marker(MARKER) is None
        )  # stable: the marked ones first
        groups.append(group)
    rest = [item for item in items if getattr(item, "module", None) not in marked_modules]
    workers = max(1, int(getattr(config, "workerinput", {}).get("workercount", 1)))
    starts = [*share_starts(len(items), workers), len(items)]
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for index, group in enumerate(groups):
        heads[share_of(index, workers)] += group
    ordered: list[pytest.Item] = []
    for share in range(workers):
        ordered += heads[share]
        fill = len(rest) if share == workers - 1 else max(0, starts[share + 1] - len(ordered))
        ordered += rest[:fill]
        del rest[:fill]
    items[:] = ordered
