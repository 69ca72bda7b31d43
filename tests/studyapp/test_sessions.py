"""The session engine reads exactly what Django's database engine reads: same rows, same expiry, same format."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.sessions.backends.db import SessionStore as DjangoStore
from django.contrib.sessions.models import Session
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studyapp.sessions import SessionStore

pytestmark = pytest.mark.django_db


def test_a_session_written_by_django_reads_back_in_one_query():
    original = DjangoStore()
    original["answer"] = {"q": [1, 2.5, "x\ty"]}
    original.save()
    store = SessionStore(original.session_key)
    with CaptureQueriesContext(connection) as queries:
        assert store["answer"] == {"q": [1, 2.5, "x\ty"]}
    assert len(queries) == 1
    assert store.session_key == original.session_key


def test_a_session_written_here_reads_back_with_django():
    store = SessionStore()
    store["n"] = 7
    store.save()
    assert DjangoStore(store.session_key)["n"] == 7


def test_an_expired_or_unknown_session_loads_empty_and_gets_a_new_key_on_save():
    store = SessionStore()
    store["n"] = 1
    store.save()
    Session.objects.filter(session_key=store.session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    expired = SessionStore(store.session_key)
    assert dict(expired.items()) == {}
    expired["n"] = 2
    expired.save()
    assert expired.session_key != store.session_key
    unknown = SessionStore("x" * 32)
    assert unknown.load() == {}
    assert unknown.session_key is None


def test_tampered_session_data_loads_empty():
    store = SessionStore()
    store["staff"] = True
    store.save()
    Session.objects.filter(session_key=store.session_key).update(session_data="e30:forged:signature")
    assert SessionStore(store.session_key).load() == {}
