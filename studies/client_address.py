"""The client's address as the trusted proxies in front of the site report it."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def _valid(address: str) -> str | None:
    try:
        return str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return None


def client_address(request: HttpRequest) -> str | None:
    """Return the address of the client, never one the client can choose (None when there is none).

    Each trusted proxy appends the address it saw to ``X-Forwarded-For``, so with ``TRUSTED_PROXY_COUNT``
    proxies the client is the entry that many places from the right; anything further left was written
    by the client and is ignored. Without trusted proxies the header is ignored altogether. This is the
    rule DRF's ``NUM_PROXIES`` applies to its throttles, so sign-in lockouts and throttles agree.
    """
    remote = _valid(request.META.get("REMOTE_ADDR") or "")
    count = settings.TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if count <= 0 or not forwarded:
        return remote
    hops = [hop for hop in forwarded.split(",") if hop.strip()]
    if not hops:
        return remote
    return _valid(hops[-min(count, len(hops))]) or remote
