"""A small synchronous client for the coordinator's API (a CLI needs no event loop)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_SECONDS = 10.0


class ApiClientError(Exception):
    """What went wrong, in words fit for the terminal."""


class ApiClient:
    def __init__(self, server: str, token: str) -> None:
        self.server = server.rstrip("/")
        self._token = token

    def get(self, path: str) -> bytes:
        """The body of a successful GET; an HTTP error raises with the server's message."""
        return self._send(urllib.request.Request(self.server + path))

    def post(self, path: str, body: object) -> bytes:
        """The body of a successful POST of ``body`` as JSON."""
        request = urllib.request.Request(
            self.server + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        return self._send(request)

    def _send(self, request: urllib.request.Request) -> bytes:
        request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as error:
            raise ApiClientError(_error_message(error)) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ApiClientError(
                f"cannot reach the coordinator at {self.server}: {reason}"
            ) from None


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _error_message(error: urllib.error.HTTPError) -> str:
    try:
        detail = json.loads(error.read())["error"]
        return f"{detail['message']} ({error.code} {detail['code']})"
    except (ValueError, KeyError, TypeError):
        return f"the coordinator answered HTTP {error.code} {error.reason}"
