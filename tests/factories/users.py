"""Users, with roles granted the way the sign-up and staff flows grant them."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from studies.roles import grant_role


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "pw-correct-horse")

    @factory.post_generation
    def roles(self, create: bool, extracted, **kwargs) -> None:  # noqa: ARG002
        for role in extracted or ():
            grant_role(self, role)
