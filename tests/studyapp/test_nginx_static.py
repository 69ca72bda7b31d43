"""The documented proxy (deploy/nginx.conf, Debian's nginx, run as root like the compose image, so its workers
read files as another user) in front of the project: it serves what ``collectstatic`` wrote, the "busy" page
when gunicorn cannot answer, never an upload, and POSTs pass Django's CSRF origin check without
``DJANGO_CSRF_TRUSTED_ORIGINS``."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.templatetags.static import static
from django.test import override_settings
from django.utils.functional import empty

from tests.conftest import ROOT

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (make nginx)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A folder nginx's unprivileged workers may traverse (pytest's tmp_path is private to its owner)."""
    folder = Path(tempfile.mkdtemp(prefix="nginx-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def collected(public_dir, settings) -> Iterator[Path]:
    """``collectstatic`` as production runs it (hashed, compressed names), with the production settings' storage
    options, for the project's own files (the bundled admin assets take minutes to compress)."""
    root = public_dir / "static"
    production = {**settings.STORAGES["staticfiles"],
                  "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}
    with override_settings(STORAGES={**settings.STORAGES, "staticfiles": production}, STATIC_ROOT=root,
                           DEBUG=False, STATICFILES_FINDERS=["django.contrib.staticfiles.finders.FileSystemFinder"]):
        from django.contrib.staticfiles.storage import staticfiles_storage

        staticfiles_storage._wrapped = empty
        call_command("collectstatic", "--noinput", "-v", "0")
        yield root
        staticfiles_storage._wrapped = empty


@contextmanager
def _nginx(static_root: Path, upstream_port: int, work: Path) -> Iterator[str]:
    """Run deploy/nginx.conf with only its deployment-specific names replaced (upstream, port, folders)."""
    port = _free_port()
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    for old, new in (("server web:8000;", f"server 127.0.0.1:{upstream_port};"),
                     ("listen 80;", f"listen 127.0.0.1:{port};"),
                     ("/srv/static", str(static_root)),
                     ("/tmp/nginx-body", str(work / "body"))):
        assert old in conf, old
        conf = conf.replace(old, new)
    conf = conf.replace("worker_processes auto;", "worker_processes 1;")
    path = work / "nginx.conf"
    path.write_text(conf)
    process = subprocess.Popen([NGINX, "-c", str(path), "-p", str(work), "-e", str(work / "error.log"), "-g",
                                f"daemon off; pid {work / 'nginx.pid'}; error_log {work / 'error.log'};"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode()
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGQUIT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def work_dir(public_dir) -> Path:
    folder = public_dir / "nginx"
    folder.mkdir()
    return folder


def test_collected_files_are_world_readable_and_served_with_one_cache_header(collected, work_dir):
    hashed = static("favicon.svg")
    assert re.search(r"\.[0-9a-f]{12}\.svg$", hashed)
    for path in collected.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o004, f"{path} is {oct(mode)}: a proxy running as another user cannot read it"
    with _nginx(collected, _free_port(), work_dir) as base:
        response = requests.get(base + hashed, timeout=10)
        assert response.status_code == 200 and response.content == (ROOT / "static" / "favicon.svg").read_bytes()
        assert response.raw.headers.getlist("Cache-Control") == ["public, max-age=31536000, immutable"]
        plain = requests.get(base + "/static/favicon.svg", timeout=10)
        assert plain.status_code == 200 and "immutable" not in plain.headers["Cache-Control"]


def test_the_busy_page_is_served_when_gunicorn_cannot_answer(collected, work_dir):
    closed = _free_port()  # nothing listens: every proxied request fails to connect
    with _nginx(collected, closed, work_dir) as base:
        response = requests.get(base + "/my-study/", timeout=30)
    assert response.status_code == 502 and "very busy" in response.text
    assert response.headers["Retry-After"] == "5"


@pytest.mark.django_db(transaction=True)
def test_uploads_are_never_served_by_the_proxy_and_posts_pass_the_csrf_origin_check(collected, work_dir,
                                                                                    live_server, settings):
    from django.core.files.storage import default_storage

    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    settings.CSRF_TRUSTED_ORIGINS = []
    name = default_storage.save("episodes/secret-upload.txt", ContentFile(b"private deliverable"))
    location = Path(default_storage.path(name))
    assert stat.S_IMODE(location.stat().st_mode) == 0o600
    # Django's live test server answers MEDIA_URL from MEDIA_ROOT by itself (a test-harness convenience that
    # gunicorn does not have); pointed at an empty folder, what the upstream answers is the project's alone.
    settings.MEDIA_ROOT = work_dir / "live-server-media-handler"
    upstream = int(live_server.url.rsplit(":", 1)[1])
    with _nginx(collected, upstream, work_dir) as base:
        for path in (f"/_private-media-not-served/{name}", f"/media/{name}", f"/static/../media/{name}",
                     f"/static/%2e%2e/media/{name}", f"/{name}"):
            response = requests.get(base + path, timeout=10)
            assert b"private deliverable" not in response.content and response.status_code != 200, path
        session = requests.Session()
        page = session.get(base + "/accounts/login/", timeout=10)
        assert page.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        posted = session.post(base + "/accounts/login/", data={
            "csrfmiddlewaretoken": token, "username": "nobody", "password": "wrong"},
            headers={"Origin": base, "Referer": base + "/accounts/login/"}, timeout=10, allow_redirects=False)
    # Past the CSRF check (a refusal is a 403 page): the form itself answers that the password is wrong.
    assert posted.status_code == 200 and "correct username and password" in posted.text, posted.status_code
