"""Every write to the metastore goes through a function here.

Each service owns its transaction. Lock decisions, allocation and publish for
one dataSource are serialized on that dataSource's lock (on PostgreSQL a
transaction-level advisory lock on its id, see `lockbox_sql._locked`; on
SQLite, IMMEDIATE transactions serialize writers), so two workers can never
both be granted incompatible locks, and a lock cannot be revoked while its task
publishes. The pure rules live in `metastore.locking` and `metastore.timeline`.

The functions live in a module per concern (tasks, locks, allocation,
publish, checkpoints, segments, retention, compaction_config, compaction_run, tokens,
workers); every public name is re-exported here.
"""

from metastore.services._common import (
    LOCK_POLL_SECONDS,
    Blocker,
    LockRevoked,
    LockTimeout,
    PublishError,
    ServiceError,
    TaskCanceled,
    TaskEnded,
    TaskNotClaimed,
    datasource_for_update,
    lock_request_json,
    lock_request_of,
    lock_spec,
    lock_spec_of,
    new_task_id,
)
from metastore.services.allocation import (
    Allocation,
    AllocationRequest,
    append_layout,
    pending_segments_prune,
    segments_allocate,
    segments_allocate_many,
    segments_allocate_overwrite,
)
from metastore.services.checkpoints import timeline_checkpoint_save
from metastore.services.compaction_config import (
    compaction_cluster_for_update,
    compaction_cluster_set,
    compaction_config_delete,
    compaction_config_set,
    compaction_run_mark,
)
from metastore.services.compaction_run import compaction_duty_run
from metastore.services.locks import (
    LockResult,
    lock_acquire,
    lock_decide,
    lock_release,
    lock_try_acquire,
    locks_acquire,
    locks_release_all,
    locks_try_acquire,
    segment_locks_acquire,
)
from metastore.services.publish import (
    NewSegment,
    segments_publish,
)
from metastore.services.retention import (
    RetentionRun,
    history_apply,
    retention_apply,
    rules_set,
)
from metastore.services.segments import (
    segment_admin_update,
    segments_kill,
    segments_mark_used,
)
from metastore.services.tasks import (
    SUPPORTED_TASK_TYPES,
    TaskSignals,
    task_cancel,
    task_claim,
    task_create,
    task_enqueue,
    task_enqueuer,
    task_finish,
    task_heartbeat,
    task_lock_mode,
    task_report_update,
    task_submit,
    task_validate,
)
from metastore.services.tokens import (
    TOKEN_PREFIX_CHARS,
    api_token_issue,
    api_token_revoke,
    token_digest,
)
from metastore.services.workers import worker_heartbeat, worker_stopped

__all__ = [
    "LOCK_POLL_SECONDS",
    "LockRevoked",
    "LockTimeout",
    "PublishError",
    "ServiceError",
    "TaskCanceled",
    "TaskEnded",
    "TaskNotClaimed",
    "datasource_for_update",
    "lock_request_of",
    "lock_spec",
    "lock_spec_of",
    "Blocker",
    "LockResult",
    "lock_decide",
    "lock_request_json",
    "new_task_id",
    "task_lock_mode",
    "task_validate",
    "task_create",
    "task_enqueue",
    "task_enqueuer",
    "task_submit",
    "task_claim",
    "TaskSignals",
    "task_heartbeat",
    "task_report_update",
    "task_finish",
    "task_cancel",
    "SUPPORTED_TASK_TYPES",
    "lock_acquire",
    "lock_try_acquire",
    "locks_acquire",
    "locks_try_acquire",
    "segment_locks_acquire",
    "lock_release",
    "locks_release_all",
    "Allocation",
    "AllocationRequest",
    "append_layout",
    "pending_segments_prune",
    "segments_allocate",
    "segments_allocate_many",
    "segments_allocate_overwrite",
    "NewSegment",
    "segments_publish",
    "timeline_checkpoint_save",
    "segments_mark_used",
    "segments_kill",
    "segment_admin_update",
    "compaction_cluster_for_update",
    "compaction_cluster_set",
    "compaction_config_delete",
    "compaction_config_set",
    "compaction_run_mark",
    "compaction_duty_run",
    "worker_heartbeat",
    "worker_stopped",
    "rules_set",
    "retention_apply",
    "history_apply",
    "RetentionRun",
    "TOKEN_PREFIX_CHARS",
    "api_token_issue",
    "api_token_revoke",
    "token_digest",
]
