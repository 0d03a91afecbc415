"""Druid's Overlord and Coordinator HTTP API, over Strata's services and selectors.

A Druid user's scripts (`POST /druid/indexer/v1/task`, poll `.../status`, read
`.../reports`) run unchanged: the request and response shapes are Druid's (see
Druid's "Tasks API", "Data management API" and "Legacy metadata API" reference
pages). Everything is a thin edge: writes go through `metastore.services`,
reads through `metastore.selectors`, authenticated like the rest of the API
(plus HTTP Basic, which Druid's own clients use).

Where Strata differs, the shape stays Druid's and the difference is named:
a CANCELED task reports Druid's `FAILED` with its reason in `errorMsg`; a task
waiting for a lock reports `statusCode` RUNNING and `runnerStatusCode` WAITING,
as Druid's waiting tasks do.
"""

from __future__ import annotations

from datetime import datetime

from django.http import Http404
from django.urls import re_path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from console import druid_schema as ds_schema
from console.api import error_body
from console.druid_schema import druid_responses
from console.security import MAX_LIST_ITEMS, StrataBasicAuthentication, parse_natural
from metastore import locking, selectors, services
from metastore.druid.errors import SpecError
from metastore.intervals import Interval, format_ts
from metastore.models import Segment, Task, TaskLock, TaskStatus

# --- shapes --------------------------------------------------------------------------

_EPOCH_TEXT = "1970-01-01T00:00:00.000Z"

# Strata status -> (Druid statusCode, Druid runnerStatusCode)
_DRUID_STATUS = {
    TaskStatus.PENDING: ("RUNNING", "PENDING"),
    TaskStatus.WAITING: ("RUNNING", "WAITING"),
    TaskStatus.RUNNING: ("RUNNING", "RUNNING"),
    TaskStatus.SUCCESS: ("SUCCESS", "NONE"),
    TaskStatus.FAILED: ("FAILED", "NONE"),
    TaskStatus.CANCELED: ("FAILED", "NONE"),
}

# Druid's `state` filter -> Strata statuses
_STATES = {
    "running": (TaskStatus.RUNNING,),
    "waiting": (TaskStatus.WAITING,),
    "pending": (TaskStatus.PENDING,),
    "complete": (TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.CANCELED),
}


def druid_ts(value: datetime | None) -> str:
    return format_ts(value) if value is not None else _EPOCH_TEXT


def _duration_ms(task: Task) -> int:
    if task.started_at is None or task.ended_at is None:
        return -1
    return int((task.ended_at - task.started_at).total_seconds() * 1000)


def _location(task: Task) -> dict:
    host = task.worker.rsplit(":", 1)[0] if task.worker else None
    return {"host": host, "port": -1, "tlsPort": -1}


def _error_msg(task: Task) -> str | None:
    if task.status == TaskStatus.CANCELED:
        return f"canceled: {task.error}" if task.error else "canceled"
    return task.error or None


def task_status_json(task: Task) -> dict:
    """A task as Druid's task list and `task/{id}/status` show it."""
    code, runner = _DRUID_STATUS[task.status]
    return {
        "id": task.id,
        "groupId": task.group_id,
        "type": task.type,
        "createdTime": druid_ts(task.created_at),
        "queueInsertionTime": druid_ts(task.created_at),
        "statusCode": code,
        "status": code,
        "runnerStatusCode": runner,
        "duration": _duration_ms(task),
        "location": _location(task),
        "dataSource": task.datasource,
        "errorMsg": _error_msg(task),
    }


def _ingestion_state(task: Task) -> str:
    if task.status in (TaskStatus.PENDING, TaskStatus.WAITING):
        return "NOT_STARTED"
    if task.status == TaskStatus.RUNNING:
        return "BUILD_SEGMENTS"
    return "COMPLETED"


def _row_stats(report: dict) -> dict:
    stats = report.get("rowStats") or {}
    processed_bytes = int(report.get("ingest/task/bytes/processed") or 0)
    build = {
        "processed": int(stats.get("processed") or 0),
        "processedBytes": processed_bytes,
        "processedWithError": int(stats.get("processedWithError") or 0),
        "thrownAway": int(stats.get("thrownAway") or 0),
        "unparseable": int(stats.get("unparseable") or 0),
    }
    empty = {key: 0 for key in build}
    return {"determinePartitions": empty, "buildSegments": build}


def task_report_json(task: Task) -> dict:
    """Druid's `ingestionStatsAndErrors` report; while the task runs it shows the
    current state, phase and progress (the row counts arrive when a phase ends)."""
    report = task.report or {}
    samples = report.get("parseExceptionSamples") or []
    return {
        "ingestionStatsAndErrors": {
            "type": "ingestionStatsAndErrors",
            "taskId": task.id,
            "payload": {
                "ingestionState": _ingestion_state(task),
                "unparseableEvents": {"buildSegments": samples} if samples else {},
                "rowStats": _row_stats(report),
                "errorMsg": _error_msg(task),
                "segmentAvailabilityConfirmed": False,
                "segmentAvailabilityWaitTimeMs": 0,
                # Strata's own fields, beside Druid's: live phase and progress.
                "phase": task.phase,
                "progress": task.progress,
                "segmentsPublished": report.get("segmentsPublished"),
                # A replace's or compaction's read point per interval (SPEC §8),
                # only on the reports of tasks that rewrite intervals.
                **({"readAsOf": report["readAsOf"]} if "readAsOf" in report else {}),
            },
        }
    }


def lock_json(lock: TaskLock) -> dict:
    """A lock as Druid's TaskLock serializes (`granularity` timeChunk | segment)."""
    out = {
        "granularity": "segment" if lock.granularity == locking.SEGMENT else "timeChunk",
        "type": lock.type,
        "groupId": lock.group_id,
        "dataSource": lock.datasource,
        "interval": str(lock.interval),
        "version": lock.version,
        "priority": lock.priority,
        "revoked": lock.revoked,
    }
    if lock.granularity == locking.SEGMENT:
        out["partitionId"] = lock.partition
    return out


def _names(items) -> str:
    return ",".join(str(item.get("name")) for item in items or () if isinstance(item, dict))


def segment_json(seg: Segment) -> dict:
    """A segment as Druid's DataSegment serializes."""
    schema = getattr(seg, "schema", None) or {}
    out = {
        "dataSource": seg.datasource.name,
        "interval": str(seg.interval),
        "version": seg.version,
        "loadSpec": {"type": "tombstone"}
        if seg.tombstone
        else {"type": "local", "path": seg.location},
        "dimensions": _names(schema.get("dimensions")),
        "metrics": _names(schema.get("metrics")),
        "shardSpec": seg.shard_spec or {"type": "numbered", "partitionNum": seg.partition},
        "binaryVersion": 9,
        "size": seg.size_bytes,
        "identifier": seg.id,
        "id": seg.id,
    }
    compaction_state = getattr(seg, "compaction_state", None)
    if compaction_state:
        out["lastCompactionState"] = compaction_state
    return out


def druid_error(
    message: str, http_status: int = status.HTTP_400_BAD_REQUEST, *, field: str | None = None
) -> Response:
    """Druid's `{"error": "..."}`, with the API's `field` and `message` beside it."""
    return Response(error_body(message, field), status=http_status)


def _id_list(value, field: str, what: str) -> list[str]:
    """A JSON array of at most MAX_LIST_ITEMS strings (ids or versions)."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(field, f"must be an array of {what}")
    if len(value) > MAX_LIST_ITEMS:
        raise SpecError(field, f"{len(value)} {what}; at most {MAX_LIST_ITEMS} in one request")
    return value


# --- views ---------------------------------------------------------------------------


class DruidView(APIView):
    """Authenticated like the rest of the API; Druid's clients also send HTTP Basic."""

    authentication_classes = [
        *api_settings.DEFAULT_AUTHENTICATION_CLASSES,
        StrataBasicAuthentication,
    ]

    def handle_exception(self, exc):
        # Druid answers bad requests with {"error": "..."}; keep the field it names.
        if isinstance(exc, SpecError):
            return druid_error(exc.message, field=exc.field)
        if isinstance(exc, services.ServiceError):
            return druid_error(str(exc))
        if isinstance(exc, Http404):
            return druid_error(str(exc), status.HTTP_404_NOT_FOUND)
        return super().handle_exception(exc)


def task_or_404(task_id: str) -> Task:
    task = selectors.task_get(task_id=task_id)
    if task is None:
        raise Http404(f"Cannot find any task with id: [{task_id}]")
    return task


class TaskSubmit(DruidView):
    """POST /druid/indexer/v1/task: a task spec -> {"task": id}."""

    @extend_schema(
        request=ds_schema.TASK_SPEC_REQUEST,
        responses=druid_responses({200: ds_schema.DruidTaskId}, 400, 413, 415),
    )
    def post(self, request):
        if not isinstance(request.data, dict):
            raise SpecError("(body)", "the request body must be a JSON object (a task spec)")
        task = services.task_submit(spec=request.data, user=request.user)
        return Response({"task": task.id})


class TaskPayload(DruidView):
    """GET /druid/indexer/v1/task/{id}: {"task": id, "payload": spec}."""

    @extend_schema(
        parameters=[ds_schema.PATH_TASK_ID],
        responses=druid_responses({200: ds_schema.DruidTaskPayload}, 404),
    )
    def get(self, request, task_id):
        task = task_or_404(task_id)
        payload = {
            **task.spec,
            "id": task.id,
            "groupId": task.group_id,
            "dataSource": task.datasource,
        }
        payload.setdefault("context", {})
        return Response({"task": task.id, "payload": payload})


class TaskStatusView(DruidView):
    @extend_schema(
        parameters=[ds_schema.PATH_TASK_ID],
        responses={
            **druid_responses({200: ds_schema.DruidTaskStatusResponse}),
            404: ds_schema.DruidTaskStatusResponse,
        },
    )
    def get(self, request, task_id):
        task = selectors.task_get(task_id=task_id)
        if task is None:
            return Response({"task": task_id, "status": None}, status=status.HTTP_404_NOT_FOUND)
        return Response({"task": task.id, "status": task_status_json(task)})


class TaskReports(DruidView):
    @extend_schema(
        parameters=[ds_schema.PATH_TASK_ID],
        responses=druid_responses({200: ds_schema.REPORT}, 404),
    )
    def get(self, request, task_id):
        return Response(task_report_json(task_or_404(task_id)))


class TaskShutdown(DruidView):
    @extend_schema(
        parameters=[ds_schema.PATH_TASK_ID],
        request=None,
        responses=druid_responses({200: ds_schema.DruidTaskId}, 404),
    )
    def post(self, request, task_id):
        task = task_or_404(task_id)
        if not task.is_active:
            return druid_error(
                f"task {task_id} is no longer running ({task.status})", status.HTTP_404_NOT_FOUND
            )
        services.task_cancel(task_id=task_id, user=request.user)
        return Response({"task": task_id})


def _created_interval(request) -> Interval | None:
    value = request.query_params.get("createdTimeInterval")
    if not value:
        return None
    try:
        return Interval.parse(value.replace("_", "/"))
    except ValueError as exc:
        raise SpecError("createdTimeInterval", f"malformed interval {value!r}: {exc}") from None


_MAX_TASKS_LISTED = 5000


class TaskList(DruidView):
    """GET /druid/indexer/v1/tasks?state=&datasource=&type=&max=&createdTimeInterval=
    (and the runningTasks, pendingTasks, waitingTasks, completeTasks shortcuts)."""

    state: str | None = None

    @extend_schema(
        parameters=ds_schema.TASK_LIST_PARAMS,
        responses=druid_responses({200: ds_schema.DruidTaskStatus(many=True)}, 400),
    )
    def get(self, request):
        state = self.state or request.query_params.get("state")
        if state is not None:
            state = state.lower()
            if state not in _STATES:
                raise SpecError("state", f"invalid state {state!r}; accepted: {', '.join(_STATES)}")
        tasks = selectors.tasks_list(
            statuses=_STATES[state] if state else None,
            datasource=request.query_params.get("datasource"),
            type=request.query_params.get("type"),
            created=_created_interval(request),
        )
        max_param = request.query_params.get("max")
        if max_param is not None:
            most = parse_natural(max_param)
            if most is None:
                raise SpecError("max", "must be a non-negative integer")
            if state == "complete":
                tasks = tasks[: min(most, _MAX_TASKS_LISTED)]
        return Response([task_status_json(t) for t in tasks[:_MAX_TASKS_LISTED]])


class TaskListByState(TaskList):
    """runningTasks, pendingTasks, waitingTasks, completeTasks: the state is the URL's."""

    @extend_schema(
        parameters=[p for p in ds_schema.TASK_LIST_PARAMS if p.name != "state"],
        responses=druid_responses({200: ds_schema.DruidTaskStatus(many=True)}, 400),
    )
    def get(self, request):
        return super().get(request)


class TaskStatusBulk(DruidView):
    """POST /druid/indexer/v1/taskStatus: [ids] -> {id: status} (unknown ids left out)."""

    strata_role = "viewer"  # a read, sent as POST

    @extend_schema(
        request=ds_schema.TASK_IDS,
        responses=druid_responses(
            {200: ds_schema.BULK_STATUS},
            400,
            413,
            415,
        ),
    )
    def post(self, request):
        ids = _id_list(request.data, "(body)", "task ids")
        tasks = selectors.tasks_with_ids(ids=ids)
        return Response(
            {
                t.id: {
                    "id": t.id,
                    "status": _DRUID_STATUS[t.status][0],
                    "duration": _duration_ms(t),
                    "errorMsg": _error_msg(t),
                    "location": _location(t),
                }
                for t in tasks
            }
        )


def _lock_filters(data) -> list[dict]:
    """Druid's LockFilterPolicy list: [{"datasource", "priority"?, "intervals"?, "context"?}]."""
    if not isinstance(data, list) or not data:
        raise SpecError("(body)", "give a non-empty JSON array of lock filter policies")
    if len(data) > MAX_LIST_ITEMS:
        raise SpecError("(body)", f"{len(data)} policies; at most {MAX_LIST_ITEMS} in one request")
    policies = []
    for i, item in enumerate(data):
        where = f"[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("datasource"), str):
            raise SpecError(f"{where}.datasource", "each policy names a datasource")
        priority = item.get("priority")
        if priority is None:  # null is absent, as Jackson reads it
            priority = 0
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise SpecError(f"{where}.priority", "must be an integer")
        intervals = []
        raw_intervals = item.get("intervals")
        raw_intervals = [] if raw_intervals is None else raw_intervals
        if not isinstance(raw_intervals, list):
            raise SpecError(f"{where}.intervals", "must be a list of intervals")
        for j, text in enumerate(raw_intervals):
            try:
                intervals.append(Interval.parse(text))
            except (ValueError, TypeError) as exc:
                raise SpecError(f"{where}.intervals[{j}]", f"malformed interval: {exc}") from None
        context = item.get("context")
        context = {} if context is None else context
        if not isinstance(context, dict):
            raise SpecError(f"{where}.context", "must be an object")
        # A task that would take a REPLACE lock (concurrent locks) is not blocked by
        # APPEND locks, so Druid leaves them out for it.
        ignore_append = locking.ignores_append_locks(context)
        policies.append(
            {
                "datasource": item["datasource"],
                "priority": priority,
                "intervals": intervals,
                "ignore_append": ignore_append,
            }
        )
    return policies


def _matching_locks(policies: list[dict]) -> dict[str, list[TaskLock]]:
    held: dict[str, list[TaskLock]] = {}
    for lock in selectors.locks_list(datasources={p["datasource"] for p in policies}):
        held.setdefault(lock.datasource, []).append(lock)
    out: dict[str, list[TaskLock]] = {}
    for policy in policies:
        locks = [
            lock
            for lock in held.get(policy["datasource"], ())
            if not lock.revoked
            and lock.priority >= policy["priority"]
            and not (policy["ignore_append"] and lock.type == locking.APPEND)
            and (
                not policy["intervals"]
                or any(lock.interval.overlaps(iv) for iv in policy["intervals"])
            )
        ]
        if locks:
            out.setdefault(policy["datasource"], []).extend(locks)
    return out


class ActiveLocks(DruidView):
    """POST /druid/indexer/v1/activeLocks: [policy] -> {"datasourceToLocks": {ds: [lock]}}."""

    strata_role = "viewer"

    @extend_schema(
        request=ds_schema.LOCK_FILTERS,
        responses=druid_responses({200: ds_schema.DruidActiveLocks}, 400, 413, 415),
    )
    def post(self, request):
        found = _matching_locks(_lock_filters(request.data))
        return Response(
            {
                "datasourceToLocks": {
                    ds: [lock_json(lk) for lk in locks] for ds, locks in found.items()
                }
            }
        )


class LockedIntervals(DruidView):
    """POST /druid/indexer/v1/lockedIntervals/v2: [policy] -> {ds: [interval]}."""

    strata_role = "viewer"

    @extend_schema(
        request=ds_schema.LOCK_FILTERS,
        responses=druid_responses(
            {
                200: {
                    "type": "object",
                    "additionalProperties": ds_schema.NAMES,
                }
            },
            400,
            413,
            415,
        ),
    )
    def post(self, request):
        found = _matching_locks(_lock_filters(request.data))
        out = {}
        for ds, locks in found.items():
            seen: list[str] = []
            for lock in locks:
                text = str(lock.interval)
                if text not in seen:
                    seen.append(text)
            out[ds] = seen
        return Response(out)


class MarkSegments(DruidView):
    """POST .../datasources/{ds}/markUsed | markUnused with {"interval", "versions"?}
    or {"segmentIds"} -> {"numChangedSegments": n}."""

    used: bool = False

    @extend_schema(
        parameters=[ds_schema.PATH_DATASOURCE],
        request=ds_schema.MARK_REQUEST,
        responses=druid_responses({200: ds_schema.DruidChanged}, 400, 404, 413, 415),
    )
    def post(self, request, datasource):
        if not selectors.datasource_exists(name=datasource):
            raise Http404(f"no dataSource {datasource}")
        data = request.data
        if not isinstance(data, dict):
            raise SpecError("(body)", "give a JSON object with interval or segmentIds")
        interval_text, ids, versions = (
            data.get("interval"),
            data.get("segmentIds"),
            data.get("versions"),
        )
        if (interval_text is None) == (ids is None):
            raise SpecError("interval", "give exactly one of interval or segmentIds")
        if ids is not None:
            ids = _id_list(ids, "segmentIds", "segment ids")
        if versions is not None:
            if ids is not None:
                raise SpecError("versions", "versions go with an interval, not with segmentIds")
            versions = _id_list(versions, "versions", "version strings")
        interval = None
        if interval_text is not None:
            try:
                interval = Interval.parse(interval_text)
            except (ValueError, TypeError) as exc:
                raise SpecError("interval", f"malformed interval: {exc}") from None
        if versions is not None:
            # Segments wholly inside the interval, at one of the versions.
            ids = selectors.segment_ids_within(
                datasource=datasource, interval=interval, versions=versions
            )
            interval = None
            if not ids:
                return Response({"numChangedSegments": 0})
        entry = services.segments_mark_used(
            datasource=datasource,
            used=self.used,
            interval=interval,
            segment_ids=ids,
            user=request.user,
        )
        changed = len((entry.added if self.used else entry.removed) if entry else [])
        return Response({"numChangedSegments": changed})


# --- Coordinator metadata --------------------------------------------------------------


def druid_flag(request, name: str) -> bool:
    """Druid's flag parameters are present-or-absent (`?full`), or `=true`/`=false`."""
    if name not in request.query_params:
        return False
    value = request.query_params.get(name, "").lower()
    if value not in ("", "true", "false", "1", "0"):
        raise SpecError(name, "a flag: give it alone, or =true / =false")
    return value not in ("false", "0")


class MetadataDataSources(DruidView):
    """GET /druid/coordinator/v1/metadata/datasources[?full]: names of dataSources with
    used segments, or with `full` each with its used segments."""

    @extend_schema(
        parameters=[ds_schema.FULL],
        responses=druid_responses(
            {
                200: {
                    "anyOf": [
                        ds_schema.NAMES,
                        {"type": "array", "items": ds_schema.DATASOURCE_FULL},
                    ]
                }
            },
        ),
    )
    def get(self, request):
        names = [s.name for s in selectors.datasources_list() if s.segments]
        if not druid_flag(request, "full"):
            return Response(names)
        created = selectors.datasources_created(names=names)
        out = []
        for name in names:
            segs = selectors.segments_for(datasource=name, with_datasource=True)
            out.append(
                {
                    "name": name,
                    "properties": {"created": druid_ts(created.get(name))},
                    "segments": [segment_json(s) for s in segs],
                }
            )
        return Response(out)


class MetadataDataSourceSegments(DruidView):
    """GET /druid/coordinator/v1/metadata/datasources/{ds}/segments[?full]."""

    @extend_schema(
        parameters=[ds_schema.PATH_DATASOURCE, ds_schema.FULL],
        responses=druid_responses(
            {
                200: {
                    "anyOf": [
                        ds_schema.NAMES,
                        {"type": "array", "items": ds_schema.SEGMENT},
                    ]
                }
            },
            404,
        ),
    )
    def get(self, request, datasource):
        if not selectors.datasource_exists(name=datasource):
            raise Http404(f"no dataSource {datasource}")
        segs = selectors.segments_for(datasource=datasource, with_datasource=True)
        if druid_flag(request, "full"):
            return Response([segment_json(s) for s in segs])
        return Response([s.id for s in segs])


class MetadataSegments(DruidView):
    """GET /druid/coordinator/v1/metadata/segments[?includeOvershadowedStatus][&datasources=]:
    every used segment; with the flag, [{"dataSegment", "overshadowed"}] where
    overshadowed means fully overshadowed (visible at no instant)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("includeOvershadowedStatus", ds_schema.FLAG),
            OpenApiParameter(
                "datasources", {"type": "array", "items": ds_schema.TEXT}, explode=True
            ),
        ],
        responses=druid_responses(
            {
                200: {
                    "anyOf": [
                        {"type": "array", "items": ds_schema.SEGMENT},
                        {"type": "array", "items": ds_schema.SEGMENT_STATUS},
                    ]
                }
            },
        ),
    )
    def get(self, request):
        wanted = request.query_params.getlist("datasources")
        names = wanted or [s.name for s in selectors.datasources_list() if s.segments]
        with_status = druid_flag(request, "includeOvershadowedStatus")
        out = []
        for name in names:
            segs = selectors.segments_for(datasource=name, with_datasource=True)
            if not with_status:
                out.extend(segment_json(s) for s in segs)
                continue
            hidden = selectors.timeline_for(datasource=name).fully_overshadowed()
            out.extend(
                {"dataSegment": segment_json(s), "overshadowed": s.id in hidden} for s in segs
            )
        return Response(out)


_ID = r"(?P<task_id>[^/]+)"
_DS = r"(?P<datasource>[^/]+)"

urlpatterns = [
    re_path(r"^druid/indexer/v1/task/?$", TaskSubmit.as_view()),
    re_path(rf"^druid/indexer/v1/task/{_ID}/status/?$", TaskStatusView.as_view()),
    re_path(rf"^druid/indexer/v1/task/{_ID}/reports/?$", TaskReports.as_view()),
    re_path(rf"^druid/indexer/v1/task/{_ID}/shutdown/?$", TaskShutdown.as_view()),
    re_path(rf"^druid/indexer/v1/task/{_ID}/?$", TaskPayload.as_view()),
    re_path(r"^druid/indexer/v1/tasks/?$", TaskList.as_view()),
    re_path(r"^druid/indexer/v1/runningTasks/?$", TaskListByState.as_view(state="running")),
    re_path(r"^druid/indexer/v1/pendingTasks/?$", TaskListByState.as_view(state="pending")),
    re_path(r"^druid/indexer/v1/waitingTasks/?$", TaskListByState.as_view(state="waiting")),
    re_path(r"^druid/indexer/v1/completeTasks/?$", TaskListByState.as_view(state="complete")),
    re_path(r"^druid/indexer/v1/taskStatus/?$", TaskStatusBulk.as_view()),
    re_path(r"^druid/indexer/v1/activeLocks/?$", ActiveLocks.as_view()),
    re_path(r"^druid/indexer/v1/lockedIntervals/v2/?$", LockedIntervals.as_view()),
    *(
        re_path(
            rf"^druid/{service}/v1/datasources/{_DS}/{verb}/?$", MarkSegments.as_view(used=used)
        )
        for service in ("indexer", "coordinator")
        for verb, used in (("markUnused", False), ("markUsed", True))
    ),
    re_path(r"^druid/coordinator/v1/metadata/datasources/?$", MetadataDataSources.as_view()),
    re_path(
        rf"^druid/coordinator/v1/metadata/datasources/{_DS}/segments/?$",
        MetadataDataSourceSegments.as_view(),
    ),
    re_path(r"^druid/coordinator/v1/metadata/segments/?$", MetadataSegments.as_view()),
]
