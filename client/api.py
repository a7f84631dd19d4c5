"""A small synchronous client for the coordinator's API (a CLI needs no event loop)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from shared.text import table

TIMEOUT_SECONDS = 10.0


class ApiClientError(Exception):
    """What went wrong, in words fit for the terminal. An error the coordinator answered
    also keeps its parts (``status`` 0 when there was no answer), for a caller that can
    say it in its own user's terms."""

    def __init__(
        self,
        text: str,
        *,
        status: int = 0,
        code: str = "",
        message: str = "",
        details: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.details: Mapping[str, object] = details or {}


class ApiClient:
    def __init__(self, server: str, token: str) -> None:
        self.server = server.rstrip("/")
        self._token = token

    def get(self, path: str) -> bytes:
        """The body of a successful GET; an HTTP error raises with the server's message."""
        return self._send(urllib.request.Request(self.server + path))

    def post(self, path: str, body: object) -> bytes:
        """The body of a successful POST of ``body`` as JSON."""
        return self._send_json("POST", path, body)

    def put(self, path: str, body: object) -> bytes:
        return self._send_json("PUT", path, body)

    def patch(self, path: str, body: object) -> bytes:
        return self._send_json("PATCH", path, body)

    def delete(self, path: str) -> bytes:
        return self._send(urllib.request.Request(self.server + path, method="DELETE"))

    def _send_json(self, method: str, path: str, body: object) -> bytes:
        request = urllib.request.Request(
            self.server + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method=method,
        )
        return self._send(request)

    def _send(self, request: urllib.request.Request) -> bytes:
        request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as error:
            raise _answered(error) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ApiClientError(
                f"cannot reach the coordinator at {self.server}: {reason}"
            ) from None


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _answered(error: urllib.error.HTTPError) -> ApiClientError:
    """The coordinator's JSON error (its message, code and the numbers in its details),
    or the bare HTTP status when the answer is not one."""
    try:
        detail = json.loads(error.read())["error"]
        message, code = str(detail["message"]), str(detail["code"])
    except (ValueError, KeyError, TypeError):
        text = f"the coordinator answered HTTP {error.code} {error.reason}"
        return ApiClientError(text, status=error.code)
    details = detail.get("details")
    details = details if isinstance(details, dict) else {}
    text = f"{message} ({error.code} {code})"
    if details:
        text += "\n" + describe_details(details)
    return ApiClientError(text, status=error.code, code=code, message=message, details=details)


def describe_details(details: Mapping[str, object]) -> str:
    """An error's ``details`` (a refusal's reason and numbers) one per line, indented
    under the message: ``  items:  resource=cpu used=1 request=0.5 max=1``."""
    rows = [(f"{key}:", _detail(value)) for key, value in details.items()]
    return "\n".join("  " + line for line in table(None, rows).splitlines())


def _detail(value: object) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={_scalar(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return "; ".join(_detail(item) for item in value) or "-"
    return _scalar(value)


def _scalar(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)  # numbers, true/false, null, and anything nested
