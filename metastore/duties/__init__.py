"""The Coordinator's duties (auto-compaction, retention, history, kill): each
decision a pure function over facts read from the metastore (this package
imports neither the services nor the selectors: they import it), each action
through the services (`services.compaction_run`, `services.retention`) or a
worker module (`workers.kill_duty`)."""
