"""The Coordinator's duties (SPEC §9): decisions pure, actions through the services."""
