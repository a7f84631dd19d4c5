"""The agent's runtime: make the host's Docker engine match the coordinator's desired
state. ``plan`` decides (pure); ``docker_engine`` talks to Docker in a thread pool;
``reconciler`` runs the loop that joins them."""
