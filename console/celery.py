"""The Celery application. Workers run `celery -A console worker`."""

import os

from celery import Celery

from console import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

broker.install()  # survive a Redis restart while a task runs (see console/broker.py)

app = Celery("strata")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
