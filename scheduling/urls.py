from django.urls import path

from . import views
from .cpu import views as cpu_views

app_name = "scheduling"

urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
    # Part A: unified scheduling (policies, templates, bindings, import, preview, simulator, webhook)
    path("policies/new/", views.PolicyCreateView.as_view(), name="policy-create"),
    path("policies/<str:name>/", views.PolicyDetailView.as_view(), name="policy-detail"),
    path("policies/<str:name>/edit/", views.PolicyEditView.as_view(), name="policy-edit"),
    path("policies/<str:name>/rollback/", views.PolicyRollbackView.as_view(), name="policy-rollback"),
    path("policies/<str:name>/delete/", views.PolicyDeleteView.as_view(), name="policy-delete"),
    path("templates/<str:kind>/new/", views.TemplateCreateView.as_view(), name="template-create"),
    path("templates/<str:kind>/<str:name>/", views.TemplateDetailView.as_view(), name="template-detail"),
    path("templates/<str:kind>/<str:name>/edit/", views.TemplateEditView.as_view(), name="template-edit"),
    path("templates/<str:kind>/<str:name>/rollback/", views.TemplateRollbackView.as_view(), name="template-rollback"),
    path("templates/<str:kind>/<str:name>/delete/", views.TemplateDeleteView.as_view(), name="template-delete"),
    path("bindings/new/", views.BindingCreateView.as_view(), name="binding-create"),
    path("bindings/<int:pk>/", views.BindingDetailView.as_view(), name="binding-detail"),
    path("bindings/<int:pk>/edit/", views.BindingEditView.as_view(), name="binding-edit"),
    path("bindings/<int:pk>/rollback/", views.BindingRollbackView.as_view(), name="binding-rollback"),
    path("bindings/<int:pk>/delete/", views.BindingDeleteView.as_view(), name="binding-delete"),
    path("import/", views.ImportView.as_view(), name="import"),
    path("preview/", views.PreviewView.as_view(), name="preview"),
    path("simulator/", views.SimulatorView.as_view(), name="simulator"),
    path("webhook/", views.WebhookView.as_view(), name="webhook"),
    # Part B: CPU co-location (scheduling/cpu/views.py)
    path("cpu/", cpu_views.CPUFleetView.as_view(), name="cpu-fleet"),
    path("cpu/what-if/", cpu_views.CPUWhatIfView.as_view(), name="cpu-what-if"),
    path("cpu/nodes/<int:pk>/", cpu_views.CPUNodeView.as_view(), name="cpu-node"),
    path("cpu/nodes/<int:pk>/allocate/", cpu_views.CPUAllocateView.as_view(), name="cpu-allocate"),
    path("cpu/nodes/<int:pk>/place-shared/", cpu_views.CPUSharedView.as_view(), name="cpu-place-shared"),
    path("cpu/nodes/<int:pk>/release/", cpu_views.CPUReleaseView.as_view(), name="cpu-release"),
    path("cpu/nodes/<int:pk>/release-isolate/", cpu_views.CPUReleaseIsolateView.as_view(), name="cpu-release-isolate"),
]
