"""Which kombu transport, and which TLS options, a Redis broker URL gets (read by settings, so kept light).

Both ``redis://`` and ``rediss://`` (Redis over TLS) use ``studyapp.redis_transport:Transport``, the transport
whose restore path survives a broker restart: a TLS broker restarts like any other. Naming a transport of our
own hides the ``rediss`` scheme from kombu, which would otherwise turn TLS on by itself (and then without
checking the server's certificate). So a ``rediss://`` URL gets TLS options here: those its query gives
(``ssl_cert_reqs``, ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, which kombu reads from the URL and
which win), else a verified certificate (``ssl_cert_reqs=required``, against the system's CAs).
"""

from __future__ import annotations

import ssl

SURVIVING_TRANSPORT = "studyapp.redis_transport:Transport"
REDIS_SCHEMES = ("redis://", "rediss://")


def surviving_transport(url: str) -> str | None:
    """The transport path for a Redis broker URL, None for any other broker (kombu picks by scheme)."""
    return SURVIVING_TRANSPORT if url.lower().startswith(REDIS_SCHEMES) else None


def broker_tls(url: str) -> dict | None:
    """TLS options for a ``rediss://`` broker URL (kombu lets the URL's own ``ssl_*`` parameters override)."""
    if not url.lower().startswith("rediss://"):
        return None
    return {"ssl_cert_reqs": ssl.CERT_REQUIRED}
