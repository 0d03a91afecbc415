import os

from django.core.asgi import get_asgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_asgi_application()

# Load the URL table (and the views, the API schema and the sketch libraries it
# imports) while the server starts, not during its first request (~0.3 s).
get_resolver().url_patterns  # noqa: B018
