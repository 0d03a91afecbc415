"""Reads shared by the console, the REST API, the duties and the workers, one
module per concern (HackSoft's selectors; bounded query counts, no writes —
`services.checkpoints` stores the timeline checkpoints):

- `timeline`: the current timeline of a dataSource (one immutable snapshot per
  commit seq, shared by every reader) and one as of a past commit;
- `states`: what the console draws from a timeline (visibility per chunk, segment);
- `visibility`: segments, rows and bytes by visibility;
- `datasources`, `segments`, `tasks`, `locks`, `workers`, `commits`: those entities;
- `users`: an API token or a user with the roles they hold (authentication);
- `segment_list`, `overview`: the console's Segments view and home page;
- `compaction`, `retention`: the facts the Coordinator's duties decide on.

The entity modules' public names are re-exported here (`selectors.timeline_for`);
the console views and the duties import theirs from the module (`selectors.compaction`)."""

from __future__ import annotations

from metastore.selectors.commits import (
    CommitChange,
    commit_after,
    commit_before,
    commit_change,
    commit_entry,
    commit_neighbours,
    commits_for,
    state_around,
)
from metastore.selectors.datasources import (
    DataSourceRow,
    DataSourceSummary,
    datasource_exists,
    datasource_get,
    datasource_known,
    datasource_names,
    datasources_created,
    datasources_list,
    datasources_overview,
    metric_types,
)
from metastore.selectors.locks import (
    active_locks,
    locks_list,
    locks_of_task,
)
from metastore.selectors.segments import (
    SegmentView,
    locations_under,
    pending_allocations,
    segment_detail,
    segment_facts,
    segment_ids_within,
    segment_schemas,
    segment_views,
    segments_extent,
    segments_for,
    segments_span,
    segments_to_mark,
    segments_with_ids,
    unpublished_allocations,
    unpublished_allocations_of,
    unused_segments_in,
    unused_span,
    used_segment,
    visible_columns,
)
from metastore.selectors.states import (
    chunk_rows,
    state_rows,
    timeline_state,
)
from metastore.selectors.tasks import (
    TASK_GROUPS,
    TASK_SORTS,
    TaskGroup,
    active_tasks_of,
    has_active_tasks,
    pending_task_ids,
    stale_active_tasks,
    task_get,
    tasks_blocked_by,
    tasks_count,
    tasks_grouped,
    tasks_list,
    tasks_table,
    tasks_waiting,
    tasks_with_ids,
)
from metastore.selectors.timeline import (
    last_commit_seq,
    timeline_caches_clear,
    timeline_for,
    used_ids_as_of,
)
from metastore.selectors.users import api_token_with_roles, user_with_roles
from metastore.selectors.visibility import (
    MIXED_BY_ID_MAX,
    SHOWN,
    STATES,
    Tally,
    VisibilityCounts,
    visibility_counts,
)
from metastore.selectors.workers import (
    LiveWorker,
    TaskSlot,
    TaskSlots,
    live_workers,
    task_slots,
)

__all__ = [
    "api_token_with_roles",
    "user_with_roles",
    "CommitChange",
    "DataSourceRow",
    "DataSourceSummary",
    "LiveWorker",
    "MIXED_BY_ID_MAX",
    "SHOWN",
    "STATES",
    "SegmentView",
    "TASK_GROUPS",
    "TASK_SORTS",
    "Tally",
    "TaskGroup",
    "TaskSlot",
    "TaskSlots",
    "VisibilityCounts",
    "active_locks",
    "active_tasks_of",
    "chunk_rows",
    "commit_after",
    "commit_before",
    "commit_change",
    "commit_entry",
    "commit_neighbours",
    "commits_for",
    "state_around",
    "datasource_exists",
    "datasource_get",
    "datasource_known",
    "datasource_names",
    "datasources_created",
    "datasources_list",
    "datasources_overview",
    "has_active_tasks",
    "last_commit_seq",
    "live_workers",
    "locations_under",
    "locks_list",
    "locks_of_task",
    "metric_types",
    "pending_allocations",
    "pending_task_ids",
    "segment_detail",
    "segment_facts",
    "segment_views",
    "segments_extent",
    "segments_for",
    "segments_span",
    "segments_to_mark",
    "segment_ids_within",
    "segment_schemas",
    "segments_with_ids",
    "used_segment",
    "stale_active_tasks",
    "state_rows",
    "task_get",
    "task_slots",
    "tasks_blocked_by",
    "tasks_grouped",
    "tasks_list",
    "tasks_table",
    "tasks_count",
    "tasks_waiting",
    "tasks_with_ids",
    "timeline_caches_clear",
    "timeline_for",
    "timeline_state",
    "unpublished_allocations",
    "unpublished_allocations_of",
    "unused_segments_in",
    "unused_span",
    "used_ids_as_of",
    "visibility_counts",
    "visible_columns",
]
