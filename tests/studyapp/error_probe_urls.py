"""The site's URLs plus one view that fails the way a real bug does, with personal data in reach (error tests)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from studyapp.urls import urlpatterns as site_urlpatterns


@csrf_exempt  # the CSRF header is sent all the same: the report must not carry it
def failing_view(request: HttpRequest) -> HttpResponse:
    client_address = request.META.get("REMOTE_ADDR")  # a local variable holding the client's IP
    email = request.POST.get("email")
    raise ConnectionError(f"could not reach db.internal:5432 while saving {email} for {client_address}")


urlpatterns = [path("error-probe/", failing_view), *site_urlpatterns]
