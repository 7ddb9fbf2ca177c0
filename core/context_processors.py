from django.conf import settings

from .roles import user_role


def meridian(request):
    """Values every page template needs: the user's role and the product mode."""
    return {"meridian_role": user_role(getattr(request, "user", None)), "meridian_env": settings.MERIDIAN_ENV}
