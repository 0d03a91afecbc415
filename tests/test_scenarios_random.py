"""SPEC §8, randomized: random interleavings of appends, compactions and replaces
with random failures, in each lock mode, checked against the serial replay of the
committed change sets (no row lost, none duplicated, no lock left). Histories run
over three days: the first loaded or empty, the others loaded at DAY or HOUR
granularity; replaces lock one to three days at once (DAY or HOUR buckets);
appends write rows anywhere in the three days (split by the chunk visible at
each row's timestamp)."""

from __future__ import annotations

import os
import random

import pytest

from metastore import services
from metastore.models import TaskLock
from tests.lockbox_harness import DAY, DS, MODES, SEG, SPAN, Actor, World, day, rows, run

pytestmark = pytest.mark.django_db

# Histories per lock mode (a CI run does 3x this in all); run more by hand with
# STRATA_HISTORIES=500 (1,500 histories).
HISTORIES = int(os.environ.get("STRATA_HISTORIES", "60"))


def random_history(rng: random.Random, mode: str) -> None:
    world = World()
    # Earlier histories' segments are marked unused: each history starts afresh.
    services.segments_mark_used(datasource=DS, used=False, interval=SPAN)
    if rng.random() < 0.7:
        world.load()
    else:
        # The DAY starts empty (earlier histories' segments marked unused): appends
        # go to EPOCH, or to a fresh version once an EPOCH append was abandoned,
        # and appends racing there must share that version.
        services.segments_mark_used(datasource=DS, used=False, interval=DAY)
    for n in (1, 2):
        if rng.random() < 0.5:
            world.load(f"s{n}", [rows(f"s{n}", range(24 * n, 24 * n + 24))], interval=day(n))
    actors: dict[str, Actor] = {}
    for i in range(rng.randint(2, 4)):
        kind = rng.choice(["append", "append", "compact", "replace", "replace"])
        name = f"{kind[0]}{i}"
        last = "fail" if rng.random() < 0.25 else "publish"
        extra = {}
        if kind == "append":
            new_rows = rows(name, rng.sample(range(72), rng.randint(1, 4)))
        elif kind == "replace" and mode != SEG and rng.random() < 0.6:
            days = sorted(rng.sample(range(3), rng.randint(1, 3)))
            extra = {
                "intervals": [day(n) for n in days],
                "granularity": rng.choice(["DAY", "HOUR"]),
                # It replaces all of its intervals: buckets without rows get tombstones.
                "drop_existing": True,
            }
            hours = [h for n in days for h in range(24 * n, 24 * n + 24)]
            new_rows = rows(name, rng.sample(hours, rng.randint(1, 3)))
        elif kind == "replace":
            new_rows = rows(name, rng.sample(range(24), rng.randint(1, 3)))
        else:
            new_rows = []
        actors[name] = Actor(
            world,
            name,
            kind,
            mode,
            new_rows=new_rows,
            program=["lock", "read", "write", last],
            **extra,
        )
    turns = [name for name in actors for _ in range(4)]
    rng.shuffle(turns)
    run(actors, turns)
    visible = world.visible_ids()
    assert SPAN.contains(DAY)
    assert visible == world.model, (
        f"mode {mode}, turns {turns}, commits {world.commits}, outcomes "
        f"{ {n: a.outcome for n, a in actors.items()} }; "
        f"extra {visible - world.model}, missing {world.model - visible}"
    )
    assert TaskLock.objects.count() == 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch", range(5))
def test_random_histories_match_serial_replay(mode, batch, django_db_blocker):
    seed = MODES.index(mode) * 1000 + batch
    rng = random.Random(seed)
    for _ in range(max(1, HISTORIES // 5)):
        random_history(rng, mode)
