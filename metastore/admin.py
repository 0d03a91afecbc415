"""The Django admin. Everything is read-only except what goes through services:
segment used flag / location / shard spec edits, mark used/unused, task cancel,
API tokens (issued, rotated, revoked through services; only their digest is kept)."""

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.template.response import TemplateResponse

from metastore import services
from metastore.compaction_state import validate_compaction_config
from metastore.druid.errors import SpecError
from metastore.models import (
    ApiToken,
    CommitLogEntry,
    CompactionConfig,
    CompactionConfigAudit,
    DataSource,
    PendingSegment,
    RetentionRules,
    RetentionRulesAudit,
    Segment,
    Task,
    TaskLock,
)
from metastore.strict_json import StrictJSONFormField


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(DataSource)
class DataSourceAdmin(ReadOnlyAdmin):
    list_display = ["name", "created_at", "last_version"]
    search_fields = ["name"]


@admin.register(Segment)
class SegmentAdmin(admin.ModelAdmin):
    formfield_overrides = {models.JSONField: {"form_class": StrictJSONFormField}}  # issue 15
    list_display = [
        "id",
        "datasource",
        "start",
        "end",
        "version",
        "partition",
        "minor_version",
        "num_rows",
        "size_bytes",
        "used",
        "tombstone",
    ]
    list_filter = ["used", "tombstone", "datasource"]
    search_fields = ["id"]
    editable_fields = ("used", "location", "shard_spec")
    actions = ["mark_unused", "mark_used"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields if f.name not in self.editable_fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # segments are removed by kill tasks, never deleted by hand

    def save_model(self, request, obj, form, change):
        changed = {
            name: form.cleaned_data[name]
            for name in form.changed_data
            if name in self.editable_fields
        }
        if changed:
            services.segment_admin_update(segment=obj, fields=changed, user=request.user)

    def _mark(self, request, queryset, used: bool):
        count = 0
        by_ds: dict[str, list[str]] = {}
        for seg_id, ds in queryset.values_list("id", "datasource__name"):
            by_ds.setdefault(ds, []).append(seg_id)
        for ds, ids in by_ds.items():
            entry = services.segments_mark_used(
                datasource=ds, used=used, segment_ids=ids, user=request.user
            )
            count += len((entry.added if used else entry.removed) if entry else [])
        self.message_user(request, f"{count} segments marked {'used' if used else 'unused'}")

    @admin.action(description="Mark selected segments unused")
    def mark_unused(self, request, queryset):
        self._mark(request, queryset, used=False)

    @admin.action(description="Mark selected segments used")
    def mark_used(self, request, queryset):
        self._mark(request, queryset, used=True)


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ["id", "type", "datasource", "status", "priority", "created_at", "ended_at"]
    list_filter = ["status", "type"]
    search_fields = ["id", "datasource"]
    actions = ["cancel"]

    def has_change_permission(self, request, obj=None):
        return obj is None  # the list (and its actions) but no edit form

    @admin.action(description="Cancel selected tasks")
    def cancel(self, request, queryset):
        for task in queryset:
            try:
                services.task_cancel(task_id=task.id, user=request.user)
            except services.ServiceError as exc:
                self.message_user(request, str(exc), level=messages.WARNING)


@admin.register(TaskLock)
class TaskLockAdmin(ReadOnlyAdmin):
    list_display = [
        "datasource",
        "start",
        "end",
        "type",
        "granularity",
        "version",
        "priority",
        "task",
        "revoked",
        "revoked_by",
    ]
    list_filter = ["type", "revoked", "datasource"]


@admin.register(CommitLogEntry)
class CommitLogEntryAdmin(ReadOnlyAdmin):
    list_display = ["seq", "datasource", "kind", "task", "user", "created_at"]
    list_filter = ["kind", "datasource"]


@admin.register(PendingSegment)
class PendingSegmentAdmin(ReadOnlyAdmin):
    list_display = ["datasource", "start", "end", "version", "partition", "task", "sequence_name"]


# Rules are edited through the Druid API or the console's rules page (previewed,
# audited): here they are read only.
@admin.register(RetentionRules)
class RetentionRulesAdmin(ReadOnlyAdmin):
    list_display = ["datasource", "rules", "updated_at"]


@admin.register(RetentionRulesAudit)
class RetentionRulesAuditAdmin(ReadOnlyAdmin):
    list_display = ["key", "author", "comment", "ip", "created_at"]
    list_filter = ["key"]


# --- API tokens: stored as digests; a key is shown once, when issued -------------------------


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "expires_at"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Issue (add: shows the key once), rotate (an action: new keys, shown once),
    revoke (delete) and expire tokens. Only the prefix and the owner are listed:
    the key itself is nowhere to show."""

    form = ApiTokenForm
    list_display = ["key_prefix", "user", "created_at", "expires_at"]
    search_fields = ["user__username", "prefix"]
    actions = ["rotate"]

    def get_fields(self, request, obj=None):
        return (
            ["user", "expires_at"]
            if obj is None
            else ["user", "prefix", "created_at", "expires_at"]
        )

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else ["user", "prefix", "created_at"]

    @admin.display(description="key", ordering="prefix")
    def key_prefix(self, obj) -> str:
        return f"{obj.prefix}…"

    def save_model(self, request, obj, form, change):
        if change:  # only the expiry can change
            obj.save(update_fields=["expires_at"])
            return
        token, key = services.api_token_issue(
            user=form.cleaned_data["user"], expires_at=form.cleaned_data.get("expires_at")
        )
        obj.pk, obj.digest, obj.prefix, obj.created_at = (
            token.pk,
            token.digest,
            token.prefix,
            token.created_at,
        )
        request._strata_new_keys = [(token.user, key)]

    def delete_model(self, request, obj):
        services.api_token_revoke(user=obj.user)

    def delete_queryset(self, request, queryset):
        for token in queryset.select_related("user"):
            services.api_token_revoke(user=token.user)

    def _show_keys(self, request, keys):
        # Shown once, in this response only: never stored in a message or a cookie.
        context = {
            **self.admin_site.each_context(request),
            "title": "API token created" if len(keys) == 1 else "API tokens rotated",
            "new_keys": keys,
            "opts": self.opts,
        }
        return TemplateResponse(request, "admin/token_created.html", context)

    def response_add(self, request, obj, post_url_continue=None):
        return self._show_keys(request, request._strata_new_keys)

    @admin.action(description="Rotate selected tokens (new keys, shown once)")
    def rotate(self, request, queryset):
        keys = []
        for token in queryset.select_related("user"):
            new, key = services.api_token_issue(user=token.user, expires_at=token.expires_at)
            keys.append((new.user, key))
        return self._show_keys(request, keys)


# --- auto-compaction configs: edited through the services, validated as Druid does ---------

_DRUID_TO_FIELD = {
    "dataSource": "datasource",
    "taskPriority": "task_priority",
    "inputSegmentSizeBytes": "input_segment_size_bytes",
    "maxRowsPerSegment": "max_rows_per_segment",
    "skipOffsetFromLatest": "skip_offset_from_latest",
    "skipIntervals": "skip_intervals",
    "tuningConfig": "tuning_config",
    "granularitySpec": "granularity_spec",
    "dimensionsSpec": "dimensions_spec",
    "metricsSpec": "metrics_spec",
    "transformSpec": "transform_spec",
    "ioConfig": "io_config",
    "taskContext": "task_context",
}


def _druid_json(data: dict) -> dict:
    return {druid: data.get(field) for druid, field in _DRUID_TO_FIELD.items()}


class CompactionConfigForm(forms.ModelForm):
    class Meta:
        model = CompactionConfig
        fields = list(_DRUID_TO_FIELD.values())
        field_classes = {
            name: StrictJSONFormField
            for name in _DRUID_TO_FIELD.values()
            if name.endswith(("_config", "_spec", "_context", "_intervals"))
        }

    def clean(self):
        data = super().clean()
        try:
            validate_compaction_config(_druid_json(data))
        except SpecError as exc:
            field = _DRUID_TO_FIELD.get(exc.field.split(".")[0].split("[")[0])
            raise forms.ValidationError(
                {field: f"{exc.field}: {exc.message}"} if field in self.fields else exc.message
            ) from None
        return data


@admin.register(CompactionConfig)
class CompactionConfigAdmin(admin.ModelAdmin):
    form = CompactionConfigForm
    list_display = ["datasource", "task_priority", "skip_offset_from_latest", "updated_at"]
    search_fields = ["datasource"]

    def save_model(self, request, obj, form, change):
        saved = services.compaction_config_set(
            data=_druid_json(form.cleaned_data),
            author=request.user.get_username(),
            comment="edited in the admin",
            ip=request.META.get("REMOTE_ADDR", ""),
        )
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        services.compaction_config_delete(
            datasource=obj.datasource, author=request.user.get_username(), comment="admin"
        )

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(CompactionConfigAudit)
class CompactionConfigAuditAdmin(ReadOnlyAdmin):
    list_display = ["datasource", "author", "comment", "ip", "created_at"]
    list_filter = ["datasource"]
