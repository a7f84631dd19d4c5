"""The rule every secret allot takes (join token, API tokens) must meet, in one place, so
both daemons refuse a weak one with the same words before they start anything."""

from __future__ import annotations

MIN_TOKEN_LENGTH = 16
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def token_problem(name: str, token: str) -> str | None:
    """Why ``token`` (the setting ``name``) cannot be used, or None. Never echoes it."""
    if not token:
        return f"{name} must be set: a secret of at least {MIN_TOKEN_LENGTH} characters"
    if len(token) < MIN_TOKEN_LENGTH:
        return (
            f"{name} has {len(token)} characters; a token needs at least {MIN_TOKEN_LENGTH}"
            f" (make one with: {MAKE_ONE})"
        )
    return None
