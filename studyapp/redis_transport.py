"""kombu's Redis transport with a restore path that survives a broker restart.

When the connection to Redis drops while a worker holds an unacknowledged message, the worker closes its
channel and returns ("restores") the message to its queue. kombu 5.7 disconnects the channel's connection pool
before it restores, and rebuilding the pool then reads the parameters of a connection that is already gone:
``AttributeError: 'NoneType' object has no attribute 'hostname'``, which Celery treats as unrecoverable and the
worker exits. Here the channel restores while its pool still exists, and a restore that fails for any reason
is logged instead of raised. A message that could not be restored is not lost to the work it stood for: it
stays in the transport's unacknowledged set (returned after the visibility timeout if the broker kept it), and
the database's leases and the reconciliation sweep finish its work either way (docs/grading-reliability.md).

With the transport option ``fail_fast`` (set in settings; the worker process turns it off for its own consumer,
studyapp/celery.py) the channel's connections are studyapp.redis_breaker's: a publish to a hung broker waits for
one socket timeout, and kombu's reconnection attempt after it (and every publish for a few seconds, and the
cache's calls to the same server) fails at once instead of waiting again.

Selected by ``CELERY_BROKER_TRANSPORT`` in settings for ``redis://`` and ``rediss://`` (TLS) broker URLs
(studyapp.broker_transport).
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from studyapp import redis_breaker

logger = logging.getLogger(__name__)


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client: Any = None) -> None:
        try:
            super().restore_unacked(client)
        except Exception as exc:  # never let a failed restore take the worker down
            delivered: Any = self._delivered  # a dict of delivery tag → message once the channel consumed
            logger.warning("could not return %d unacknowledged message(s) to the broker (%s: %s); their work is "
                           "recovered by its lease and the reconciliation sweep", len(delivered),
                           type(exc).__name__, exc)
            # Forget them here as a successful restore does (the broker's unacknowledged set still has them if
            # it survived); kombu asserts the set is empty once restored.
            delivered.clear()


    def ack(self, delivery_tag: Any) -> None:
        try:
            super().ack(delivery_tag)
        except Exception as exc:  # the channel closed under the task (broker restart): the ack cannot be sent
            self._forget(delivery_tag, "acknowledge", exc)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue=requeue)
        except Exception as exc:
            self._forget(delivery_tag, "reject", exc)

    def _forget(self, delivery_tag: Any, what: str, exc: Exception) -> None:
        logger.warning("could not %s message %s on a closed broker connection (%s: %s); if the broker still has "
                       "it, it is delivered again after the visibility timeout and finds its work done", what,
                       delivery_tag, type(exc).__name__, exc)
        virtual.QoS.ack(self, delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = QoS
    fail_fast = False
    from_transport_options = (*kombu_redis.Channel.from_transport_options, "fail_fast")  # type: ignore[assignment]

    @property
    def connection_class(self) -> type:  # type: ignore[override]
        return redis_breaker.FailFastConnection if self.fail_fast else kombu_redis.redis.Connection

    @property
    def connection_class_ssl(self) -> type:  # type: ignore[override]
        return redis_breaker.FailFastSSLConnection if self.fail_fast else kombu_redis.redis.SSLConnection

    def close(self) -> None:
        # Restore while the connection pool still exists (the parent disconnects it first, then restores).
        if not self.closed and self._qos is not None:
            self._qos.restore_unacked_once()
        super().close()


class Transport(kombu_redis.Transport):
    Channel = Channel
