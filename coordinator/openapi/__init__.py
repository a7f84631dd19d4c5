"""The OpenAPI 3.1 document of the coordinator's HTTP API, served at ``/v1/openapi.json``.

- ``operations``: one entry per route: its bodies, who may call it, its errors;
- ``schemas``: the JSON Schemas no struct gives (plain dicts handlers build);
- ``examples``: an example of every body, taken from the tests and a test coordinator;
- ``document``: the document built from those three, and its route.
"""
