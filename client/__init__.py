"""Clients of the coordinator's HTTP API; nothing here imports the coordinator.

- ``leases``: ``LeaseClient``, the capacity lease client for asyncio applications;
- ``rate_limiter``: ``RateLimiter``, which spends a lease's capacity as a rate;
- ``api``: ``ApiClient``, the small synchronous client ``allotctl`` uses;
- ``answers``: ``AnswerDecoder``, which reads the API's answers as the structs of
  ``shared.api``, ignoring fields a newer coordinator added.
"""
