"""gunicorn settings for the production web server (the Dockerfile's CMD and the compose `web` service).

Threaded workers (gthread): the worker's main loop keeps reporting to the arbiter while a request thread
reads a slow upload, so ``timeout`` only catches a worker that is really stuck and never cuts off a worker
uploading a 2 GB recording over a slow line. Each worker serves ``threads`` requests at once, so a few slow
clients cannot occupy the whole server the way they occupied three sync workers. Request bodies are
streamed by Django to a temporary file (``FILE_UPLOAD_MAX_MEMORY_SIZE``), so memory per upload stays small.

Every value can be changed through the environment (``GUNICORN_*``) without rebuilding the image.
"""

import os


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _cpus() -> int:
    """CPUs this process may run on (a container's CPU set, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
worker_class = "gthread"
# Sized from the machine. A page costs a few milliseconds of Python, under the GIL, so one process uses at most
# one core: one process per CPU plus one keeps every core busy while another process waits for PostgreSQL or
# Redis. Threads are for waiting, not for CPU: 8 per process cover the database waits and a few slow uploads
# when gunicorn faces clients directly (behind the proxy, deploy/nginx.conf, uploads arrive already buffered).
# On 2 CPUs: 3 workers × 8 threads = 24 requests at once, each with its own database connection
# (CONN_MAX_AGE): keep workers × threads well below PostgreSQL's max_connections with the Celery workers.
workers = _int("GUNICORN_WORKERS", _cpus() + 1)
threads = _int("GUNICORN_THREADS", 8)
# Connections waiting for a free thread queue in the kernel (backlog); under overload a request that waited
# longer than OVERLOAD_QUEUE_SECONDS there is answered "busy, retrying" at once (studyapp/overload.py, which
# reads the arrival stamp the proxy sets) instead of being served late.
backlog = _int("GUNICORN_BACKLOG", 2048)
# Heartbeat timeout of a worker process (not of a request): a worker whose main loop is blocked this long
# is restarted.
timeout = _int("GUNICORN_TIMEOUT", 120)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 60)
# Longer than a participant's pause between two clicks: a client that reuses a connection the server is just
# closing gets "connection reset" on its POST (5 s produced such resets in the launch bench). Idle kept-alive
# connections cost a gthread worker no thread, only a slot of worker_connections.
keepalive = _int("GUNICORN_KEEPALIVE", 75)
# Connections a worker accepts and keeps waiting for a free thread, beyond the ones being served.
worker_connections = _int("GUNICORN_WORKER_CONNECTIONS", 1000)
# Workers are not recycled by default. A recycled worker closes the connections its clients keep alive, and a
# request already sent on one is lost ("connection reset"): in the launch bench every connection failure fell
# within seconds of a restart, and each restart took a worker out for about 20 s on a busy machine. Worker
# memory stayed flat over a launch without it. Set GUNICORN_MAX_REQUESTS (e.g. 50000) to recycle anyway if a
# dependency is ever found leaking; the jitter is then half the period, so workers that served the same load
# do not all restart at once (with ±10 % all three restarted within 3 s and nothing was served for 25 s).
max_requests = _int("GUNICORN_MAX_REQUESTS", 0)
max_requests_jitter = _int("GUNICORN_MAX_REQUESTS_JITTER", max_requests // 2)
# Django is imported once in the arbiter and workers are forked from it: a replacement worker serves within
# milliseconds instead of re-importing everything on a machine that is busy serving a launch.
preload_app = os.environ.get("GUNICORN_PRELOAD", "1") != "0"


def post_worker_init(worker) -> None:
    """Import what the first requests would import lazily (the Redis cache client, the Celery broker transport)
    before the worker's threads serve anything: under a launch burst two threads importing the same module at
    once met it half-initialised ("cannot import name … from partially initialized module 'redis.client'")
    and answered 500."""
    from celery import current_app
    from django.core.cache import caches

    for cache in caches.all(initialized_only=False):
        cache.get("gunicorn-worker-warm-up")
    current_app.connection_for_write().transport_cls  # noqa: B018 - resolves and imports the transport class


# Prometheus (studyapp/metrics.py): with PROMETHEUS_MULTIPROC_DIR set, every worker process writes its request
# histograms there and /metrics adds them up. The folder is emptied at start (old files would add stale
# counts) and a dead worker's live-gauge files are marked.
def on_starting(server) -> None:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder, exist_ok=True)


def child_exit(server, worker) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
