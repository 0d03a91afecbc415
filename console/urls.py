from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from console import (
    api,
    compaction_api,
    compaction_views,
    overview_views,
    rules_views,
    security,
    slot_views,
    views,
)

router = DefaultRouter()
router.trailing_slash = "/?"  # SPEC §7 paths have no trailing slash; accept both
router.register("tasks", api.TaskViewSet, basename="task")
router.register("datasources", api.DataSourceViewSet, basename="datasource")

console_patterns = [
    path("", overview_views.overview, name="overview"),
    path("tasks", views.tasks_page, name="tasks"),
    path("tasks/submit", views.task_submit, name="task-submit"),
    path("tasks/new", views.task_new, name="task-new"),
    path("tasks/<str:task_id>", views.task_page, name="task"),
    path("tasks/<str:task_id>/cancel", views.task_cancel, name="task-cancel"),
    path("locks", views.locks_page, name="locks"),
    path("compaction", compaction_views.compaction_page, name="compaction"),
    path("slots", slot_views.task_slots_fragment, name="slots"),
    path("datasources", views.datasources_page, name="datasources"),
    path("datasources/<str:name>", views.datasource_page, name="datasource"),
    path("datasources/<str:name>/actions", views.datasource_action, name="datasource-action"),
    path("datasources/<str:name>/commits/<int:seq>", views.commit_page, name="commit"),
    path("datasources/<str:name>/rules", rules_views.rules_page, name="rules"),
    path("datasources/<str:name>/segments/<path:segment_id>", views.segment_page, name="segment"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", security.ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/v1/locks", api.LockListView.as_view(), name="api-locks"),
    path("api/v1/slots", api.SlotsView.as_view(), name="api-slots"),
    path("api/v1/segments", api.SegmentListView.as_view(), name="api-segments"),
    path("api/v1/", include(compaction_api.urlpatterns)),
    path("api/v1/", include(router.urls)),
    path("", include("console.task_log_api")),
    path("", include("console.druid")),
    path("", include("console.druid_compaction")),
    path("", include("console.druid_native")),
    path("", include("console.druid_rules")),
    path("", include("console.druid_read")),
    path("", include("console.druid_cluster")),
    path("", include("console.query_api")),
    path("", include("console.query_views")),
    path("", include("console.segment_views")),
    path("", include("console.overview_views")),
    path("", include((console_patterns, "console"))),
]

handler400 = api.handler400
handler403 = api.handler403
handler404 = api.handler404
handler500 = api.handler500
