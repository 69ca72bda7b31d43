"""Token issue for scripts, and the OpenAPI schema with its Swagger UI (staff only)."""

from __future__ import annotations

from django.contrib.auth import authenticate, user_logged_in, user_login_failed
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.shortcuts import render
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import NotAuthenticated, PermissionDenied, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle

from console.api.parsers import NulRefusingFormParser, NulRefusingMultiPartParser
from console.api.permissions import IsStaff, is_staff
from console.api.serializers import TokenSerializer
from console.api.tokens import api_token_issue

TOKEN_REFUSED = "Unable to sign in with these credentials, or the account is not a staff account."


class TokenRequest(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class StaffTokenView(ObtainAuthToken):
    """Exchange a staff account's username and password for its API token (created on first use).

    Send it as ``Authorization: Token <key>``. Worker and expert accounts get no token; they use the
    site's session. A wrong password and a non-staff account get the same answer and both count towards
    the sign-in lockout shared with the site and the admin (429 while locked out).
    """

    permission_classes = [AllowAny]
    authentication_classes: list = []
    parser_classes = [NulRefusingFormParser, NulRefusingMultiPartParser, JSONParser]  # ObtainAuthToken's, guarded
    # Per client address (NUM_PROXIES-aware), on top of the per-user lockout: slows spraying many usernames.
    throttle_classes = [AnonRateThrottle]

    @extend_schema(request=TokenRequest, responses={200: TokenSerializer}, auth=[], tags=["auth"],
                   summary="Obtain a staff API token")
    def post(self, request: Request, *args, **kwargs) -> Response:
        credentials = TokenRequest(data=request.data)
        credentials.is_valid(raise_exception=True)
        username = credentials.validated_data["username"]
        # The Django request, not DRF's wrapper, so the lockout middleware sees what the backend marked on it.
        http_request = request._request
        user = authenticate(request=http_request, username=username,
                            password=credentials.validated_data["password"])
        if user is not None and not is_staff(user):
            user_login_failed.send(sender=__name__, credentials={"username": username}, request=http_request)
            user = None
        if user is None or not user.is_active:
            raise ValidationError({"non_field_errors": [TOKEN_REFUSED]}, code="authorization")
        user_logged_in.send(sender=user.__class__, request=http_request, user=user)
        return Response({"token": api_token_issue(user=user)})


class SchemaView(SpectacularAPIView):
    permission_classes = [IsStaff]


class DocsView(SpectacularSwaggerSplitView):
    """Swagger UI (assets served locally by drf-spectacular-sidecar, its start script from ``?script`` so the
    page needs no inline code under the Content-Security-Policy); anonymous visitors are sent to sign in."""

    permission_classes = [IsStaff]

    def handle_exception(self, exc: Exception) -> HttpResponse:
        if isinstance(exc, NotAuthenticated):
            return redirect_to_login(self.request.get_full_path())
        if isinstance(exc, PermissionDenied) and "script" not in self.request.GET:
            # A person opened the docs in a browser: a page that says why, not a bare 403.
            return render(self.request, "access_denied.html", {
                "title": "The API documentation is for staff accounts",
                "explanation": "The study's REST API and its documentation are open to staff members only. "
                               "Ask the study team for a staff account if you need programmatic access.",
            }, status=403)
        return super().handle_exception(exc)
