"""Staff API tokens: the one write behind the token endpoint."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from rest_framework.authtoken.models import Token


@transaction.atomic
def api_token_issue(*, user: AbstractBaseUser) -> str:
    """Return the staff account's API token, creating it on first use (one token per account)."""
    token, _ = Token.objects.get_or_create(user=user)
    return token.key
