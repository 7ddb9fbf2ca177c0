"""Node config pages."""

from django.views.generic import TemplateView


class IndexView(TemplateView):
    template_name = "nodeconfig/index.html"
