"""OpenAPI generation: every operation documents the error answers the API can give, in its one error shape.

Any operation may answer 400 (a parameter or body field of the wrong type or holding a NUL character), 401/403
(no or insufficient credentials), 404 (no such object, or a page past the last), 429 (throttled) and, for an
operation that takes a body, 415 (a body of a media type it does not parse), all with
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
BODY_ERROR_ANSWERS = {
    "415": "The request body's media type (Content-Type) is missing or not one this operation accepts.",
}


class ApiAutoSchema(AutoSchema):
    def _get_filter_parameters(self):
        from console.api.filters import EMPTY_MEANS_NO_FILTER

        parameters = super()._get_filter_parameters()
        for parameter in parameters:
            description = parameter.get("description", "")
            parameter["description"] = f"{description}\n\n{EMPTY_MEANS_NO_FILTER}" if description \
                else EMPTY_MEANS_NO_FILTER
        return parameters

    def _get_response_bodies(self, direction="response"):
        from console.api.serializers import ErrorSerializer

        responses = super()._get_response_bodies(direction)
        answers = {**ERROR_ANSWERS, **(BODY_ERROR_ANSWERS if self.method in ("POST", "PUT", "PATCH") else {})}
        for code, description in answers.items():
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
        if getattr(serializer, "schema_closed", False):
            schema["additionalProperties"] = False
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
