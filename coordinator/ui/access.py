"""Who looks at the dashboard: the API's tokens, from a login form or a proxy.

A page is shown to a request that carries
- an ``Authorization: Bearer <token>`` header (a proxy in front that adds it), or
- the session cookie that logging in at ``/ui/login`` with a token set: HttpOnly (no
  script reads it), SameSite=Strict (no other site's page sends it, which is the CSRF
  defence: every page but the login form only reads) and Secure over TLS.
The token's principal is the API's (``coordinator.http.auth.api_principals``), so a
namespace token sees on the dashboard what the API shows it. A wrong token is refused
like one at the API: counted, logged and held back (``AuthRefusals``). Anyone else is
sent to the login form. Sessions are in memory (``coordinator.ui.sessions``): a restart
logs everyone out.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

from coordinator.http.auth import bearer_token, principal_for
from coordinator.http.errors import Handler
from coordinator.http.roles import PRINCIPAL, Principal
from coordinator.keys import REFUSALS
from coordinator.ui.rendering import render
from coordinator.ui.sessions import Sessions
from shared.logs import get_logger

log = get_logger("allot.coordinator.ui")

HOME = "/ui/"
LOGIN = "/ui/login"
SESSION_COOKIE = "allot_session"


Principals = tuple[tuple[str, Principal], ...]


def signed_in(principals: Principals, sessions: Sessions) -> Middleware:
    """Puts the viewer's principal on the request (``roles.principal_of`` reads it), or
    answers: 401 for a wrong bearer header, a redirect to the login form otherwise."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == LOGIN:
            return await handler(request)
        header = bearer_token(request)
        if header is not None:
            principal = principal_for(header, principals)
            if principal is None:
                await request.config_dict[REFUSALS].refused("api_token", request.remote or "")
                return render(request, "refused.html", {}, status=401)
        else:
            principal = sessions.principal(request.cookies.get(SESSION_COOKIE, ""))
            if principal is None:
                raise web.HTTPSeeOther(f"{LOGIN}?next={quote(request.path_qs)}")
        request[PRINCIPAL] = principal
        return await handler(request)

    return check


def login_routes(principals: Principals, sessions: Sessions) -> list[web.RouteDef]:
    async def form(request: web.Request) -> web.StreamResponse:
        return render(request, "login.html", {"next": _next(request.query.get("next"))})

    async def log_in(request: web.Request) -> web.StreamResponse:
        if not _same_origin(request):
            return render(request, "refused.html", {}, status=403)
        fields = await request.post()
        token, wanted = fields.get("token"), fields.get("next")
        after = _next(wanted if isinstance(wanted, str) else None)
        presented = token.strip() if isinstance(token, str) else ""
        principal = principal_for(presented or None, principals)
        if principal is None:
            await request.config_dict[REFUSALS].refused("api_token", request.remote or "")
            problem = "That token is not one this coordinator accepts."
            return render(request, "login.html", {"next": after, "problem": problem}, status=401)
        response = web.HTTPSeeOther(after)
        response.set_cookie(
            SESSION_COOKIE,
            sessions.open(principal),
            path=HOME,
            max_age=int(sessions.lifetime_s),
            httponly=True,
            samesite="Strict",
            secure=request.secure,
        )
        log.info("dashboard login", source=request.remote, who=principal.describe())
        raise response

    async def log_out(request: web.Request) -> web.StreamResponse:
        sessions.close(request.cookies.get(SESSION_COOKIE, ""))
        response = web.HTTPSeeOther(LOGIN)
        response.del_cookie(SESSION_COOKIE, path=HOME)
        raise response

    # Paths within the dashboard's application, which is mounted at HOME.
    return [web.get("/login", form), web.post("/login", log_in), web.get("/logout", log_out)]


def _next(wanted: str | None) -> str:
    """Where to go after logging in: a dashboard page, never another site."""
    if wanted is None or not wanted.startswith(HOME) or "//" in wanted or "\\" in wanted:
        return HOME
    return wanted


def _same_origin(request: web.Request) -> bool:
    """False when the browser says the form was posted from another site's page."""
    origin = request.headers.get("Origin")
    return origin is None or urlsplit(origin).netloc == request.host
