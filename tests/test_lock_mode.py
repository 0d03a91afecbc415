"""The lock-mode rule (issue 24): which lock type and granularity a task takes,
from its type and context — one pure function, used by ingestion, compaction and
the Druid API's lock policies."""

from __future__ import annotations

import pytest

from metastore import locking
from metastore.locking import APPEND, EXCLUSIVE, REPLACE, SEGMENT, TIME_CHUNK, LockMode

INDEX, COMPACT, KILL = locking.INDEX_TASK, locking.COMPACT_TASK, locking.KILL_TASK

# (task type, appends, forceTimeChunkLock, useConcurrentLocks, taskLockType) -> mode
TABLE = [
    # the default: exclusive time-chunk locks, whatever the task does
    (INDEX, False, True, False, None, LockMode(EXCLUSIVE, TIME_CHUNK)),
    (INDEX, True, True, False, None, LockMode(EXCLUSIVE, TIME_CHUNK)),
    (COMPACT, False, True, False, None, LockMode(EXCLUSIVE, TIME_CHUNK)),
    (KILL, False, True, False, None, LockMode(EXCLUSIVE, TIME_CHUNK)),
    # forceTimeChunkLock false: an append or a compaction locks segments, a replace not
    (INDEX, True, False, False, None, LockMode(EXCLUSIVE, SEGMENT)),
    (INDEX, False, False, False, None, LockMode(EXCLUSIVE, TIME_CHUNK)),
    (COMPACT, False, False, False, None, LockMode(EXCLUSIVE, SEGMENT)),
    (KILL, False, False, False, None, LockMode(EXCLUSIVE, TIME_CHUNK)),
    # useConcurrentLocks: APPEND for an append, REPLACE for the rest, time chunks only
    (INDEX, True, True, True, None, LockMode(APPEND, TIME_CHUNK)),
    (INDEX, True, False, True, None, LockMode(APPEND, TIME_CHUNK)),
    (INDEX, False, True, True, None, LockMode(REPLACE, TIME_CHUNK)),
    (COMPACT, False, False, True, None, LockMode(REPLACE, TIME_CHUNK)),
    (KILL, False, True, True, None, LockMode(REPLACE, TIME_CHUNK)),
    # ... and it wins over taskLockType
    (INDEX, False, True, True, "EXCLUSIVE", LockMode(REPLACE, TIME_CHUNK)),
    (INDEX, True, True, True, "REPLACE", LockMode(APPEND, TIME_CHUNK)),
    # taskLockType, set by hand
    (INDEX, True, True, False, "APPEND", LockMode(APPEND, TIME_CHUNK)),
    (INDEX, True, False, False, "APPEND", LockMode(APPEND, TIME_CHUNK)),
    (INDEX, False, True, False, "REPLACE", LockMode(REPLACE, TIME_CHUNK)),
    (INDEX, True, True, False, "REPLACE", LockMode(REPLACE, TIME_CHUNK)),
    (COMPACT, False, True, False, "REPLACE", LockMode(REPLACE, TIME_CHUNK)),
    (INDEX, True, False, False, "EXCLUSIVE", LockMode(EXCLUSIVE, SEGMENT)),
    (INDEX, False, True, False, "EXCLUSIVE", LockMode(EXCLUSIVE, TIME_CHUNK)),
]


@pytest.mark.parametrize(("task_type", "append", "force", "concurrent", "lock_type", "mode"), TABLE)
def test_lock_mode_table(task_type, append, force, concurrent, lock_type, mode):
    assert (
        locking.lock_mode(
            task_type=task_type,
            append=append,
            force_time_chunk_lock=force,
            use_concurrent_locks=concurrent,
            task_lock_type=lock_type,
        )
        == mode
    )


@pytest.mark.parametrize(
    ("task_type", "append", "lock_type", "says"),
    [
        (INDEX, False, "APPEND", "only for appending ingestion"),
        (COMPACT, False, "APPEND", "only for appending ingestion"),
        (INDEX, True, "SHARED", "SHARED locks are not supported"),
        (INDEX, True, "append", "is not a lock type"),
        (INDEX, True, "TIME_CHUNK", "is not a lock type"),
    ],
)
def test_lock_types_that_mean_nothing_are_refused_naming_the_field(
    task_type, append, lock_type, says
):
    with pytest.raises(ValueError, match="taskLockType") as refused:
        locking.lock_mode(task_type=task_type, append=append, task_lock_type=lock_type)
    assert says in str(refused.value)


def test_tasks_that_take_replace_locks_ignore_append_locks_in_druid_policies():
    assert locking.ignores_append_locks({"useConcurrentLocks": True})
    assert locking.ignores_append_locks({"taskLockType": "REPLACE"})
    assert not locking.ignores_append_locks({"taskLockType": "APPEND"})
    assert not locking.ignores_append_locks(None)


@pytest.mark.django_db
def test_a_replace_asking_for_an_append_lock_is_a_400_naming_the_field(api_client, inline_spec):
    spec = inline_spec("modes")
    spec["context"] = {"taskLockType": "APPEND"}
    response = api_client.post("/druid/indexer/v1/task", spec, format="json")
    assert response.status_code == 400, response.content
    assert "context.taskLockType" in response.content.decode()
    spec["context"] = {"taskLockType": "REPLACE"}
    response = api_client.post("/druid/indexer/v1/task", spec, format="json")
    assert response.status_code == 200, response.content


def test_the_models_build_their_lock_choices_from_the_core_vocabulary():
    from metastore import allocation_rules, models

    assert tuple(models.LockType.values) == locking.LOCK_TYPES
    assert tuple(models.LockGranularity.values) == locking.GRANULARITIES
    assert models.EPOCH_VERSION is allocation_rules.EPOCH_VERSION


def test_every_list_of_task_types_is_built_from_the_core_vocabulary():
    """One vocabulary of task types (issue 24): the model's choices, the types the
    services run, the spec grammar (with Druid's legacy alias `index`), its JSON
    Schema, the priority table and the lock-mode rule's keys all come from
    `locking`, so a type added or renamed in one place cannot be missing in another."""
    from metastore import models, services, spec_schema
    from metastore.druid import tasks as druid_tasks

    assert locking.TASK_TYPES == (locking.INDEX_TASK, locking.COMPACT_TASK, locking.KILL_TASK)
    assert tuple(models.TaskType.values) == locking.TASK_TYPES
    assert services.SUPPORTED_TASK_TYPES is locking.TASK_TYPES
    assert druid_tasks.TASK_TYPES == locking.SPEC_TASK_TYPES
    assert set(locking.SPEC_TASK_TYPES) == {*locking.TASK_TYPES, locking.INDEX_ALIAS}
    assert set(locking.TASK_TYPES) <= set(locking.DEFAULT_PRIORITIES)
    assert (
        locking.DEFAULT_PRIORITIES[locking.INDEX_ALIAS]
        == (locking.DEFAULT_PRIORITIES[locking.INDEX_TASK])
    )
    components = spec_schema.task_spec_components()
    mapping = components[spec_schema.TASK_SPEC]["discriminator"]["mapping"]
    assert tuple(mapping) == locking.SPEC_TASK_TYPES
    assert spec_schema.INDEX_TYPES == (locking.INDEX_TASK, locking.INDEX_ALIAS)
    for name, task_type in (
        (spec_schema.COMPACT_SPEC, locking.COMPACT_TASK),
        (spec_schema.KILL_SPEC, locking.KILL_TASK),
    ):
        assert components[name]["properties"]["type"]["enum"] == [task_type]


@pytest.mark.parametrize("raw_type", ["index_parallel", "index", "compact", "kill"])
def test_a_validated_spec_is_typed_with_a_core_task_type(raw_type):
    from metastore.druid.tasks import validate_task_spec

    raw = {
        "index_parallel": {
            "type": raw_type,
            "spec": {
                "dataSchema": {
                    "dataSource": "w",
                    "timestampSpec": {"column": "ts"},
                    "dimensionsSpec": {"dimensions": ["page"]},
                    "granularitySpec": {"segmentGranularity": "DAY"},
                },
                "ioConfig": {
                    "type": "index_parallel",
                    "inputSource": {"type": "inline", "data": "{}"},
                    "inputFormat": {"type": "json"},
                },
            },
        },
        "compact": {"type": "compact", "dataSource": "w", "interval": "2024-01-01/2024-01-02"},
        "kill": {"type": "kill", "dataSource": "w", "interval": "2024-01-01/2024-01-02"},
    }[raw_type if raw_type != "index" else "index_parallel"]
    validated = validate_task_spec(raw, input_roots=[])
    assert validated.type in locking.TASK_TYPES
    assert validated.type == (locking.INDEX_TASK if raw_type == locking.INDEX_ALIAS else raw_type)
