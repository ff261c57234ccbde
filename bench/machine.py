"""Facts about the machine a benchmark ran on, and the header that prints them."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
import time
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float:
    """Total memory in GiB from /proc/meminfo (0 when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def filesystem_of(path: Path) -> str:
    """File-system type and device of the mount holding ``path``, from /proc/mounts."""
    best = ("", "unknown", "?")
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    target = str(path.resolve())
    for line in mounts:
        device, point, fstype = line.split()[:3]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, fstype, device)
    return f"{best[1]} on {best[2]}"


def host_info() -> dict[str, Any]:
    """CPU, cores, memory, OS and Python: the part every benchmark prints."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count() or 1,
        "ram_gib": round(ram_gib(), 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def machine_info(sqlite_dir: Path, pg: dict[str, str]) -> dict[str, Any]:
    """What the figures were measured on; ``pg`` is the PostgreSQL server's settings."""
    return {
        **host_info(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_files": f"{sqlite_dir} ({filesystem_of(sqlite_dir)})",
        "postgresql": pg,
    }


def print_machine(machine: dict[str, Any]) -> None:
    """The machine header, from a ``machine_info`` object."""
    pg = machine["postgresql"]
    pg_text = ", ".join(f"{k}={v}" for k, v in pg.items() if k != "server_version")
    print(f"CPU:        {machine['cpu']} ({machine['cores']} cores)")
    print(f"RAM:        {machine['ram_gib']} GiB")
    print(f"OS:         {machine['os']}")
    print(f"Python:     {machine['python']}")
    print(f"SQLite:     {machine['sqlite']} (WAL, synchronous=FULL)")
    print(f"SQLite dir: {machine['sqlite_files']}")
    print(f"PostgreSQL: {pg['server_version']}" + (f"; {pg_text}" if pg_text else ""))


def version_of(dist: str) -> str:
    """Installed version of a distribution, or 'missing'."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def probe_ms() -> float:
    """Best of five runs of a fixed pure-Python loop, in ms: how fast the CPU is right now."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        sum(i * i for i in range(200_000))
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def report_probe(host: dict[str, Any], before: float, label: str = "CPU probe:") -> None:
    """Probe again, print both probes (a benchmark's last line) and keep them in ``host``."""
    after = probe_ms()
    print(f"\n{label} {before:.1f} ms before, {after:.1f} ms after (a fixed pure-Python loop; "
          "a slower probe means the shared host was slower, and so are these figures)")
    host["cpu_probe_ms"] = {"before": before, "after": after}
