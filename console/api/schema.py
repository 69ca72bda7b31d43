"""OpenAPI generation: every operation documents the error answers the API can give, in its one error shape.

Any operation may answer 400 (a parameter or body field of the wrong type or holding a NUL character), 401/403
(no or insufficient credentials), 404 (no such object, or a page past the last) and 429 (throttled), all with
the body of :class:`console.api.serializers.ErrorSerializer`. Operations that declare their own answer for
one of these codes keep it.

Read-only fields lose DRF's ``allow_blank``, so a model text field that may be blank (``skip_reason``,
``overall``, ``share_url``, …) would be documented as never empty although the API answers ``""``; the
schema admits the empty string for those.
"""

from __future__ import annotations

from django.core.exceptions import FieldDoesNotExist
from django.db import models
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

ERROR_ANSWERS = {
    "400": "A query parameter or body field is invalid; `fields` names each one.",
    "401": "No valid credentials were given.",
    "403": "The credentials do not allow this operation.",
    "404": "No such object (or page), or it is not visible to the caller.",
    "429": "Too many requests; retry after the number of seconds in the Retry-After header.",
}


class ApiAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction="response"):
        from console.api.serializers import ErrorSerializer

        responses = super()._get_response_bodies(direction)
        for code, description in ERROR_ANSWERS.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(ErrorSerializer, description=description), code, ["application/json"], direction)
        return responses

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (direction == "response" and isinstance(field, serializers.ChoiceField) and "enum" in schema
                and "" not in schema["enum"] and _may_be_blank(field)):
            schema = {**schema, "enum": [*schema["enum"], ""]}
        return schema

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if direction != "response":
            return schema
        properties = schema.get("properties", {})
        for name, field in serializer.fields.items():
            prop = properties.get(field.field_name or name)
            if prop and prop.get("type") == "string" and "format" in prop and _may_be_blank(field):
                prop["anyOf"] = [{"format": prop.pop("format")}, {"maxLength": 0}]
        return schema


def _may_be_blank(field) -> bool:
    """True when the field shows a model text field that may hold the empty string."""
    if getattr(field, "allow_blank", False):
        return True
    model = getattr(getattr(getattr(field, "parent", None), "Meta", None), "model", None)
    source = getattr(field, "source", "")
    if model is None or not source or "." in source or source == "*":
        return False
    try:
        model_field = model._meta.get_field(source)
    except FieldDoesNotExist:
        return False
    return isinstance(model_field, models.CharField | models.TextField) and model_field.blank
