"""The metastore: dataSources, segments, tasks, locks and the commit log.

Every write goes through `metastore.services`; nothing else calls `.save()` here.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from metastore import compaction_state, locking
from metastore.allocation_rules import EPOCH_VERSION
from metastore.intervals import Interval, format_ts


class DataSource(models.Model):
    """A named table of time-partitioned data. Its row is the lock box's mutex."""

    name = models.CharField(max_length=255, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Highest major version ever handed out for this dataSource: new versions
    # always sort above it, even when the clock goes backwards.
    last_version = models.CharField(max_length=32, default=EPOCH_VERSION)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("console:datasource", args=[self.name])


class TaskStatus(models.TextChoices):
    PENDING = "PENDING"
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


ACTIVE_STATUSES = (TaskStatus.PENDING, TaskStatus.WAITING, TaskStatus.RUNNING)
FINAL_STATUSES = (TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.CANCELED)
# Claimed by a worker and not ended: only these may lock, allocate or publish
# (SPEC §5). A PENDING task is active but no worker runs it yet.
WORKING_STATUSES = (TaskStatus.WAITING, TaskStatus.RUNNING)


class TaskType(models.TextChoices):
    # Built from the core vocabulary (`locking.TASK_TYPES`), as the lock choices are.
    INDEX_PARALLEL = locking.INDEX_TASK
    COMPACT = locking.COMPACT_TASK
    KILL = locking.KILL_TASK


class Task(models.Model):
    id = models.CharField(primary_key=True, max_length=255)
    type = models.CharField(max_length=32, choices=TaskType.choices)
    # Indexed as the first column of (datasource, status), not on its own: the
    # lock box's reads of a dataSource's active tasks then probe by status
    # instead of reading every task the dataSource ever had.
    datasource = models.CharField(max_length=255)
    spec = models.JSONField()
    status = models.CharField(
        max_length=16, choices=TaskStatus.choices, default=TaskStatus.PENDING, db_index=True
    )
    priority = models.IntegerField(default=0)
    group_id = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    report = models.JSONField(default=dict, blank=True)
    phase = models.CharField(max_length=64, blank=True, default="")
    progress = models.FloatField(default=0.0)
    # What a WAITING task waits on: [{"lock": id, "task": id, "type": ..., "interval": ...}]
    waiting_on = models.JSONField(default=list, blank=True)
    # The lock request a WAITING task is queued with (first come, first served).
    waiting_request = models.JSONField(null=True, blank=True)
    waiting_since = models.DateTimeField(null=True, blank=True)
    # Set by a cancel request; the worker notices it within a heartbeat.
    cancel_requested = models.BooleanField(default=False)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)  # the first request
    worker = models.CharField(max_length=255, blank=True, default="")
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["datasource", "status"]),
            # The console's tasks table sorted by a column (ties by creation, then
            # id, the same way), one index walk per page; the overview's tasks
            # ended in the last day by status, counted from the index.
            models.Index(fields=["priority", "created_at", "id"], name="task_priority_created"),
            models.Index(fields=["type", "status", "created_at", "id"], name="task_type_created"),
            models.Index(fields=["datasource", "created_at", "id"], name="task_ds_created"),
            models.Index(fields=["status", "created_at", "id"], name="task_status_created"),
            models.Index(fields=["status", "ended_at", "id"], name="task_status_ended"),
        ]

    def __str__(self) -> str:
        return self.id

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("console:task", args=[self.id])

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def stopping(self) -> str:
        """A requested stop (cancel, shutdown) under way, as "stopping (<phase>,
        <n> s since request)"; empty when there is none."""
        if not self.is_active or not self.cancel_requested:
            return ""
        from django.utils import timezone

        since = (timezone.now() - (self.cancel_requested_at or timezone.now())).total_seconds()
        return f"stopping ({self.phase or 'starting'}, {since:.0f} s since request)"

    @property
    def duration_seconds(self) -> float | None:
        if not self.started_at:
            return None
        end = self.ended_at
        if end is None:
            from django.utils import timezone

            end = timezone.now()
        return (end - self.started_at).total_seconds()


class Segment(models.Model):
    """One immutable Parquet file covering an interval, at a version and partition."""

    id = models.CharField(primary_key=True, max_length=512)
    # Indexed as the first column of segment_identity, not on its own.
    datasource = models.ForeignKey(
        DataSource, on_delete=models.PROTECT, related_name="segments", db_index=False
    )
    start = models.DateTimeField()
    end = models.DateTimeField()
    version = models.CharField(max_length=32)
    partition = models.IntegerField()
    minor_version = models.IntegerField(default=0)
    root_partitions = models.JSONField(default=list)
    atomic_update_group = models.JSONField(default=list)
    core_partitions = models.IntegerField(default=0)
    tombstone = models.BooleanField(default=False)
    shard_spec = models.JSONField(default=dict, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    num_rows = models.BigIntegerField(default=0)
    location = models.TextField(blank=True, default="")
    used = models.BooleanField(default=True, db_index=True)
    used_status_updated_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="segments"
    )
    upgraded_from = models.CharField(max_length=512, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # What the segment holds (metastore.schema): dimensions with types, metrics with
    # the aggregators that combine them, rollup, queryGranularity.
    schema = models.JSONField(default=dict, blank=True)
    # Druid's lastCompactionState, on segments a compaction wrote: partitionsSpec,
    # dimensionsSpec, metricsSpec, granularitySpec, transformSpec.
    compaction_state = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["start", "version", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["datasource", "start", "end", "version", "partition"],
                name="segment_identity",
            )
        ]
        indexes = [
            models.Index(fields=["datasource", "used", "start", "end"]),
            # The console's Segments view pages every dataSource newest first by
            # keyset (start, id): one index walk per page, at any depth.
            models.Index(fields=["start", "id"], name="segment_start_id"),
            # ... and by size or rows, largest first, the same way (across dataSources).
            models.Index(fields=["size_bytes", "id"], name="segment_size_id"),
            models.Index(fields=["num_rows", "id"], name="segment_rows_id"),
            # The console's rows and bytes per chunk (`selectors.chunk_rows`): an
            # index-only scan in group order, not a pass over the segment table.
            models.Index(
                fields=["datasource", "start", "end", "version"],
                include=["num_rows", "size_bytes"],
                condition=models.Q(used=True),
                name="segment_used_chunk_rows",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def interval(self) -> Interval:
        return Interval(self.start, self.end)

    @staticmethod
    def make_id(datasource: str, interval: Interval, version: str, partition: int) -> str:
        """Druid-style segment id: `<ds>_<start>_<end>_<version>[_<partition>]`."""
        base = f"{datasource}_{format_ts(interval.start)}_{format_ts(interval.end)}_{version}"
        return base if partition == 0 else f"{base}_{partition}"


# The choices are the core's vocabulary (metastore.locking), not a copy of it.
class LockGranularity(models.TextChoices):
    TIME_CHUNK = locking.TIME_CHUNK
    SEGMENT = locking.SEGMENT


class LockType(models.TextChoices):
    EXCLUSIVE = locking.EXCLUSIVE
    SHARED = locking.SHARED
    APPEND = locking.APPEND
    REPLACE = locking.REPLACE


class TaskLock(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="locks")
    group_id = models.CharField(max_length=255)
    datasource = models.CharField(max_length=255, db_index=True)
    start = models.DateTimeField()
    end = models.DateTimeField()
    granularity = models.CharField(
        max_length=16, choices=LockGranularity.choices, default=LockGranularity.TIME_CHUNK
    )
    type = models.CharField(max_length=16, choices=LockType.choices)
    version = models.CharField(max_length=32)
    priority = models.IntegerField(default=0)
    partition = models.IntegerField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    revoked_by = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="revoked_locks"
    )
    # The dataSource's last commit sequence when the lock was granted: a REPLACE
    # task's input is what was committed up to here; appends committed after it
    # are carried onto the replace's version when the replace publishes.
    granted_seq = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["datasource", "start", "created_at"]

    def __str__(self) -> str:
        return f"{self.type} {self.datasource} {self.interval} v{self.version} ({self.task_id})"

    @property
    def interval(self) -> Interval:
        return Interval(self.start, self.end)


class PendingSegment(models.Model):
    """A segment identity handed out by allocation. When a task ends, the published
    allocations of ended tasks in its chunks are pruned to each chunk's highest
    root and non-root partition number (`services.pending_segments_prune`): those
    are what keeps a chunk's partition numbers from ever being reused, after a
    kill too. Unpublished allocations stay until the janitor has their files."""

    datasource = models.CharField(max_length=255)
    start = models.DateTimeField()
    end = models.DateTimeField()
    version = models.CharField(max_length=32)
    partition = models.IntegerField()
    # Indexed by (task, sequence_name, start, end) below, not on its own.
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL, db_index=False)
    sequence_name = models.CharField(max_length=255, blank=True, default="")
    # Allocated for an append (else for an overwrite): appends racing into a chunk
    # where nothing is used yet must all get the version the first one got.
    append = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["datasource", "start", "end", "version", "partition"],
                name="pending_segment_identity",
            )
        ]
        # No index on (datasource, start, end): the identity constraint's index
        # has that prefix and also orders each chunk by version and partition,
        # which allocation's probes need (a chunk's highest partition is one
        # backward step). With both, a planner without statistics picked the
        # short one and aggregated every allocation of a chunk instead.
        indexes = [
            # Allocation looks up what a task's sequence already got in a chunk.
            models.Index(fields=["task", "sequence_name", "start", "end"]),
        ]

    def __str__(self) -> str:
        return f"{self.datasource} {self.start}/{self.end} v{self.version} p{self.partition}"


class CommitKind(models.TextChoices):
    PUBLISH = "publish"
    MARK_USED = "mark_used"
    MARK_UNUSED = "mark_unused"
    KILL = "kill"
    ADMIN_EDIT = "admin_edit"


class CommitLogEntry(models.Model):
    """One change set: what a publish, mark-used/unused, kill or admin edit did."""

    seq = models.BigAutoField(primary_key=True)
    datasource = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    kind = models.CharField(max_length=16, choices=CommitKind.choices)
    added = models.JSONField(default=list)
    removed = models.JSONField(default=list)
    note = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["seq"]
        verbose_name_plural = "commit log entries"
        # Every lock grant reads a dataSource's newest entry: one index probe.
        indexes = [models.Index(fields=["datasource", "seq"])]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind} {self.datasource}"

    @property
    def actor(self) -> str:
        if self.task_id:
            return self.task_id
        return self.user.get_username() if self.user_id else "system"


class TimelineCheckpoint(models.Model):
    """The used segments of a dataSource right after commit `seq`, stored as
    `metastore.checkpoint_codec` bytes: timeline reads start from the newest
    checkpoint at or before the commit they want and replay only the log after
    it, instead of reading every segment row or the whole log. Derived data,
    written by the reads themselves (metastore.selectors); deleting checkpoints
    only makes the next read slower."""

    datasource = models.CharField(max_length=255)
    seq = models.BigIntegerField()
    segments = models.IntegerField()
    refs = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["datasource", "seq"], name="timeline_checkpoint_seq")
        ]

    def __str__(self) -> str:
        return f"{self.datasource} as of #{self.seq} ({self.segments} segments)"


class Worker(models.Model):
    """A live task worker and its capacity (Druid's worker with its task slots):
    it registers with a heartbeat, so the slots shown are those that run."""

    name = models.CharField(primary_key=True, max_length=255)  # "<host>:<pid>"
    nodename = models.CharField(max_length=255, blank=True, default="")
    queues = models.JSONField(default=list, blank=True)
    capacity = models.PositiveIntegerField()
    # Processes that run its tasks, as "<host>:<pid>" (a task's `worker`): the
    # worker itself with a thread pool, its pool processes with prefork.
    processes = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.capacity} slots)"


# --- auto-compaction (the Coordinator's compaction duty) ---------------------------

# Druid's defaults (DataSourceCompactionConfig, ClusterCompactionConfig).
COMPACTION_DEFAULT_PRIORITY = compaction_state.DEFAULT_PRIORITY
COMPACTION_DEFAULT_INPUT_BYTES = compaction_state.DEFAULT_INPUT_BYTES
COMPACTION_DEFAULT_SKIP_OFFSET = compaction_state.DEFAULT_SKIP_OFFSET
COMPACTION_DEFAULT_SLOT_RATIO = compaction_state.DEFAULT_SLOT_RATIO
COMPACTION_DEFAULT_MAX_SLOTS = compaction_state.DEFAULT_MAX_SLOTS


class CompactionConfig(models.Model):
    """Druid's DataSourceCompactionConfig: auto-compaction is on for `datasource`
    while this row exists. Not a foreign key: Druid accepts a config for a
    dataSource that does not exist yet. The JSON fields hold Druid's JSON, as
    validated (`metastore.compaction_config`); None means "as the segments are"."""

    datasource = models.CharField(max_length=255, unique=True)
    task_priority = models.IntegerField(default=COMPACTION_DEFAULT_PRIORITY)
    input_segment_size_bytes = models.BigIntegerField(default=COMPACTION_DEFAULT_INPUT_BYTES)
    max_rows_per_segment = models.BigIntegerField(null=True, blank=True)  # deprecated in Druid
    skip_offset_from_latest = models.CharField(
        max_length=64, default=COMPACTION_DEFAULT_SKIP_OFFSET
    )
    skip_intervals = models.JSONField(default=list, blank=True)  # Druid's skipIntervals
    tuning_config = models.JSONField(null=True, blank=True)
    granularity_spec = models.JSONField(null=True, blank=True)
    dimensions_spec = models.JSONField(null=True, blank=True)
    metrics_spec = models.JSONField(null=True, blank=True)
    transform_spec = models.JSONField(null=True, blank=True)
    io_config = models.JSONField(null=True, blank=True)
    task_context = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["datasource"]

    def __str__(self) -> str:
        return f"auto-compaction of {self.datasource}"


class CompactionClusterConfig(models.Model):
    """Druid's cluster-wide compaction config (one row). Its row is also the
    compaction duty's mutex: a run and every config write lock it, so a deleted
    config stops submissions at once and two runs never share out one slot."""

    slot_ratio = models.FloatField(default=COMPACTION_DEFAULT_SLOT_RATIO)
    max_slots = models.IntegerField(default=COMPACTION_DEFAULT_MAX_SLOTS)
    last_run_at = models.DateTimeField(null=True, blank=True)  # the duty's latest run
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "compaction cluster config"

    def __str__(self) -> str:
        return f"compaction slots: ratio {self.slot_ratio}, at most {self.max_slots}"


class CompactionConfigAudit(models.Model):
    """One change of a compaction config (Druid's config history entry)."""

    datasource = models.CharField(max_length=255, blank=True, default="", db_index=True)
    # The dataSource's config after the change (None: deleted, or a cluster change).
    compaction_config = models.JSONField(null=True, blank=True)
    global_config = models.JSONField(default=dict)
    author = models.CharField(max_length=255, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    ip = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.datasource or 'cluster'} compaction config @ {self.created_at}"


class RetentionRules(models.Model):
    """A dataSource's retention rules (or the `_default` rules every dataSource's
    rules are followed by), in order, in Druid's JSON shape
    (`metastore.duties.retention`). Written by `services.rules_set` only."""

    datasource = models.CharField(max_length=255, unique=True)
    rules = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["datasource"]
        verbose_name_plural = "retention rules"

    def __str__(self) -> str:
        return f"rules of {self.datasource} ({len(self.rules)})"


class RetentionRulesAudit(models.Model):
    """One change of a dataSource's rules, as Druid's audit log keeps it: the new
    rules, who (`X-Druid-Author`, or the user), why (`X-Druid-Comment`), from where."""

    key = models.CharField(max_length=255)
    payload = models.JSONField(default=list)
    author = models.CharField(max_length=255, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    ip = models.CharField(max_length=64, blank=True, default="")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["key", "created_at"]),
            models.Index(fields=["created_at"]),
        ]

    def __str__(self) -> str:
        return f"rules of {self.key} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class ApiToken(models.Model):
    """A user's API token, kept only as the SHA-256 digest of its key: the key is
    shown once, when issued (`metastore.services.api_token_issue`), and a stolen
    database gives no usable token. Keys are 160 random bits, so one fast hash is
    enough (as django-rest-knox and GitHub do); `prefix` tells tokens apart."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token"
    )
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user_id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
