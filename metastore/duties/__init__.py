"""The Coordinator's duties (auto-compaction, retention, history, kill): each
decision a pure function over facts read from the metastore, each action
through the services."""
