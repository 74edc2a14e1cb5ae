"""The e2e tier's scheduling: a test marked ``starts_first`` (one that takes minutes however fast the machine is, such
as a recording played in real time) runs before everything else.

Why: pytest-xdist's ``--dist worksteal`` (``make test``) hands each worker a contiguous share of the collection in
order and steals work from the end of a worker's queue. A long test collected late starts late, and the suite waits
for it alone at the end; at the front of the collection it starts at once on the first worker while the other
worker and the steals share the rest. The marked test's whole module moves with it (marked tests first), so the
module's fixtures (a browser, the servers) are still set up once per worker.

The hook runs last (``trylast``), after any other reordering of the collection, and only reorders: deselection
(``-m``, ``-k``) is untouched. Without xdist it only changes the order.
"""

from __future__ import annotations

import pytest

MARKER = "starts_first"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: a test of minutes at any machine speed: its module runs first "
                                       "(tests/e2e/conftest.py)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first_modules = {getattr(item, "module", None) for item in items if item.get_closest_marker(MARKER)}
    if not first_modules:
        return
    moved = [item for item in items if getattr(item, "module", None) in first_modules]
    moved.sort(key=lambda item: item.get_closest_marker(MARKER) is None)  # stable: the marked ones first
    items[:] = moved + [item for item in items if getattr(item, "module", None) not in first_modules]
