"""HTML from the package's Jinja2 templates, whole or as the fragment the page's refresh
asks for, with the headers every dashboard answer carries.

Every page extends ``base.html`` and puts what changes in its ``content`` block. The
page's script asks for the same URL every few seconds with the ``X-Allot-Fragment``
header and gets that block alone, which it puts in place of the old one: the page
refreshes without a reload, keeping its scroll position.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

import jinja2
from aiohttp import web

from coordinator.http.roles import PRINCIPAL

FRAGMENT_HEADER = "X-Allot-Fragment"
REFRESH_SECONDS = 5

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("coordinator.ui", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_templates.filters["utc"] = lambda seconds: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def render(
    request: web.Request, template: str, context: Mapping[str, Any], *, status: int = 200
) -> web.Response:
    """The page ``template`` with ``context`` (and, in its header, what the viewer's
    token may see), or only its ``content`` block when the page's refresh asks; never
    cached, never framed, and running only its own script."""
    page = _templates.get_template(template)
    nonce = secrets.token_urlsafe(16)
    viewer = request[PRINCIPAL].describe() if PRINCIPAL in request else ""
    values = {"refresh_seconds": REFRESH_SECONDS, "nonce": nonce, "viewer": viewer, **context}
    if request.headers.get(FRAGMENT_HEADER) == "1":
        block = page.blocks["content"]
        html = "".join(block(page.new_context(values)))
    else:
        html = page.render(values)
    response = web.Response(text=html, content_type="text/html", status=status)
    response.headers.update(
        {
            "Cache-Control": "no-store",
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "Content-Security-Policy": (
                "default-src 'none'; style-src 'unsafe-inline'; img-src data:;"
                f" script-src 'nonce-{nonce}'; connect-src 'self'; form-action 'self';"
                " frame-ancestors 'none'; base-uri 'none'"
            ),
        }
    )
    return response
