"""Who may use the agent socket, and as which node: the one authorizer of ``/v1/agent``.

    authorizer = AgentAuthorizer(join_token=token, client_ca=True)
    problem = authorizer.admission_problem(request)      # before the upgrade; None: admitted
    names = authorizer.certified(request)                # what the peer's certificate allows
    refusal = authorizer.hello_refusal(hello, names)     # may this hello's sender be its node?

Without a client CA (``tls_client_ca_file``) an agent shows that it belongs to the
cluster with the shared join token, before the upgrade and again in its hello, and may
register as any node. With one, its client certificate (verified against that CA during
the TLS handshake) is its credential, after Kubernetes' node authorizer: the upgrade
needs a certificate, the join token is not asked for, and the hello must name a node
the certificate names (its DNS subject alternative names, or its common name when it has
none). A hello naming another node learns nothing of that node: it is refused before
anything is registered or sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from coordinator.http.auth import bearer_token, token_matches
from coordinator.services.nodes import node_name_problem
from shared.protocol import HelloHead
from shared.tls import certified_names


@dataclass(frozen=True, kw_only=True)
class AgentRefusal:
    """Why a hello's sender may not register: ``code`` for the error frame and the
    metric, ``message`` for the agent and the log; ``node``, when set, is the node whose
    event records the refusal."""

    code: str
    message: str
    node: str | None = None


class AgentAuthorizer:
    def __init__(self, *, join_token: str, client_ca: bool) -> None:
        self._join_token = join_token
        self._client_ca = client_ca

    def admission_problem(self, request: web.Request) -> str | None:
        """Why ``request`` may not open the agent socket (for a 401), or None."""
        if self._client_ca:
            if not self.certified(request):
                return (
                    "the agent socket needs a client certificate signed by the cluster's"
                    " client CA (agent settings tls_cert_file and tls_key_file)"
                )
            return None
        if not token_matches(bearer_token(request), (self._join_token,)):
            return "missing or invalid join token"
        return None

    def certified(self, request: web.Request) -> frozenset[str] | None:
        """The node names the peer's verified certificate allows; None without a client
        CA, when any name is allowed."""
        if not self._client_ca:
            return None
        transport = request.transport
        return certified_names(None if transport is None else transport.get_extra_info("peercert"))

    def hello_refusal(
        self, hello: HelloHead, certified: frozenset[str] | None
    ) -> AgentRefusal | None:
        """Why the sender of ``hello`` may not register as ``hello.node``, or None."""
        if certified is None:
            if token_matches(hello.token, (self._join_token,)):
                return None
            return AgentRefusal(
                code="unauthorized", message="the hello carries an invalid join token"
            )
        if hello.node in certified:
            return None
        return AgentRefusal(
            code="node_not_certified",
            message=f"this agent's certificate is for {', '.join(sorted(certified))},"
            f" not for node {hello.node!r}",
            node=hello.node if node_name_problem(hello.node) is None else None,
        )
