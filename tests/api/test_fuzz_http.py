"""Mutated payment messages over HTTP (in process, SQLite): the decision endpoints answer each
with a decision or a 4xx problem naming what they refused, never a 5xx.

The bodies are the message vectors, public samples and JSON messages of ``bench.fuzz_messages``
with one to three of its mutations, sent under their own media type (one in ten under another
format's), seeded so each run sends the same bodies.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fuzz_messages import Case, Seed, kinds_for, mutate, seeds
from tests.api.test_fail_closed import Served, in_process
from tests.conftest import Db

BODIES = 200  # per endpoint
MEDIA = {"json": ("application/json",), "mt": ("application/x-swift-fin",),
         "pacs008": ("application/xml", "text/xml")}


@pytest.fixture
def served(sqlite_db: Db, tmp_path: Path) -> Iterator[Served]:
    with in_process(sqlite_db, tmp_path) as (client, rt, s):
        yield Served(client, rt, s)


def bodies(endpoint: str, n: int) -> list[tuple[str, Case]]:
    """``n`` (media type, mutated message) for ``endpoint``; JSON as an array for the batch one."""
    rng = random.Random(f"http {endpoint}")
    pool = seeds()
    if endpoint.endswith("/batch"):
        pool = [Seed(s.name, s.kind, b"[" + s.data + b"]") if s.kind == "json" else s for s in pool]
    out = []
    for _ in range(n):
        seed = rng.choice(pool)
        case = mutate(seed, [rng.choice(kinds_for(seed.kind)) for _ in range(rng.randint(1, 3))], rng)
        kind = seed.kind if rng.random() < 0.9 else rng.choice(sorted(MEDIA))
        out.append((rng.choice(MEDIA[kind]), case))
    return out


@pytest.mark.parametrize("endpoint", ["/v1/decisions", "/v1/decisions/batch"])
def test_a_mutated_message_is_never_answered_with_a_5xx(served: Served, endpoint: str) -> None:
    answered: dict[int, int] = {}
    failures = []
    for media, case in bodies(endpoint, BODIES):
        r = served.client.post(endpoint, content=case.data, headers={"content-type": media,
                                                                     "x-test-role": "scorer"})
        answered[r.status_code] = answered.get(r.status_code, 0) + 1
        if r.status_code >= 500:
            failures.append(f"{r.status_code} for {media} {len(case.data):,} B from {case.describe()}: "
                            f"{r.text[:300]}")
    assert not failures, f"{len(failures)} 5xx answers ({answered}); first: " + "\n".join(failures[:5])
    assert sum(answered.values()) == BODIES and answered.get(422, 0) > 0  # mutations are mostly refused
