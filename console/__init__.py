"""Strata's Django project package: settings, URLs, the Celery app, console views and REST API."""

from .celery import app as celery_app

__all__ = ["celery_app"]
