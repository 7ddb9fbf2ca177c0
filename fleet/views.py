"""Fleet pages."""

from django.views.generic import TemplateView


class IndexView(TemplateView):
    template_name = "fleet/index.html"
