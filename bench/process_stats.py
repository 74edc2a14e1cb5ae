"""What the benches read of a process and a sample: CPU seconds and resident memory from /proc,
a free loopback port, and a nearest-rank percentile."""

from __future__ import annotations

import os
import socket
from pathlib import Path

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid`, seconds (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def rss_bytes(pid: int) -> int:
    """Resident set size of process `pid`, bytes (/proc/<pid>/statm, second field, pages)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `values` (fraction in 0..1); NaN for an empty list."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]
