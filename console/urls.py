from django.urls import path

from . import views

app_name = "console"

urlpatterns = [
    path("", views.OverviewView.as_view(), name="overview"),
    path("audit/", views.AuditLogView.as_view(), name="audit-list"),
    path("audit/<int:pk>/", views.AuditEntryView.as_view(), name="audit-detail"),
    path("jobs/", views.JobListView.as_view(), name="job-list"),
    path("jobs/<int:pk>/", views.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.JobCancelView.as_view(), name="job-cancel"),
]
