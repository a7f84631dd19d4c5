"""The coordinator: pure engines plus the service around them (HTTP API, agent hub, store)."""
