"""A small synchronous client for the coordinator's API (a CLI needs no event loop).

With several coordinators (``server`` lists them, comma-separated) a request refused a
connection, or answered 503 ``not_leader`` (by a standby that knows no leader yet), goes
to the next; a standby's ``307`` is followed with the same method, body and
token, and the leader it names is used for the client's later requests.

An ``https://`` coordinator is verified against ``ca_file`` (PEM) when one is given,
else against the system's CAs; a certificate that fails says so ("certificate").
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from shared.servers import Servers, split_servers
from shared.text import table

TIMEOUT_SECONDS = 10.0
MAX_REDIRECTS = 3
NOT_LEADER_WAIT_SECONDS = 0.5  # a standby that knows no leader yet: an election is on


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


class _KeepRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows a 307 only for GET, and would keep no body; ``_send`` does it."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _opener(ca_file: str | None) -> urllib.request.OpenerDirector:
    """An opener that leaves redirects to ``_send`` and trusts ``ca_file`` (or the
    system's CAs); ``ApiClientError`` when the CA file cannot be used."""
    try:
        tls = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ApiClientError(f"cannot use the CA file {ca_file}: {reason}") from None
    return urllib.request.build_opener(_KeepRedirects, urllib.request.HTTPSHandler(context=tls))


class ApiClient:
    def __init__(self, server: str, token: str, *, ca_file: str | None = None) -> None:
        self._servers = Servers(split_servers(server) or [server])
        self._token = token
        self._opener = _opener(ca_file)

    @property
    def server(self) -> str:
        """The coordinator the next request goes to."""
        return self._servers.current

    def get(self, path: str) -> bytes:
        """The body of a successful GET; an HTTP error raises with the server's message."""
        return self._send("GET", path)

    def post(self, path: str, body: object) -> bytes:
        """The body of a successful POST of ``body`` as JSON."""
        return self._send_json("POST", path, body)

    def put(self, path: str, body: object) -> bytes:
        return self._send_json("PUT", path, body)

    def patch(self, path: str, body: object) -> bytes:
        return self._send_json("PATCH", path, body)

    def delete(self, path: str) -> bytes:
        return self._send("DELETE", path)

    def _send_json(self, method: str, path: str, body: object) -> bytes:
        return self._send(method, path, json.dumps(body).encode())

    def _send(self, method: str, path: str, data: bytes | None = None) -> bytes:
        redirects = 0
        unreachable = 0  # coordinators in a row that gave no usable answer
        while True:
            try:
                return self._send_once(method, self.server + path, data)
            except urllib.error.HTTPError as error:
                location = error.headers.get("Location", "")
                if error.code in (307, 308) and location and redirects < MAX_REDIRECTS:
                    redirects += 1
                    self._servers.follow(location.removesuffix(path))
                    continue
                answered = _answered(error)
                if answered.code != "not_leader" or unreachable + 1 >= self._servers.count:
                    raise answered from None
                time.sleep(NOT_LEADER_WAIT_SECONDS)
            except (urllib.error.URLError, OSError) as error:
                reason = getattr(error, "reason", error)
                # Only a request never sent goes to the next coordinator: one cut off once
                # sent may have been applied, and the caller must hear so.
                never_sent = isinstance(reason, ConnectionRefusedError)
                if not never_sent or unreachable + 1 >= self._servers.count:
                    raise ApiClientError(
                        f"cannot reach the coordinator at {self.server}: {_said(reason)}"
                    ) from None
            unreachable += 1
            self._servers.failed()

    def _send_once(self, method: str, url: str, data: bytes | None) -> bytes:
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with self._opener.open(request, timeout=TIMEOUT_SECONDS) as response:
            body: bytes = response.read()
            return body


def _said(reason: object) -> str:
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"its certificate is not trusted: {reason.verify_message} (see --ca-file)"
    return str(reason)


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
