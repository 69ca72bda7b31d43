"""Form and multipart parsers that refuse NUL characters, the API's default for every view.

The site's NUL guard (``studies.null_characters``) reads multipart bodies only for views that are not
CSRF-exempt, and every DRF view is: DRF parses the body itself, after authentication. A text field of a
multipart upload (a study slug beside the file) would otherwise reach a query with its NUL and PostgreSQL
would refuse it with a server error. These parsers check every field name, value and file name as they parse,
so any view that accepts a form or an upload answers 400 naming the field, whatever its serializer does.
"""

from __future__ import annotations

from typing import Any

from django.http import QueryDict
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import DataAndFiles, FormParser, MultiPartParser

from studies.null_characters import form_nul_fields


class NulRefusingFormParser(FormParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> QueryDict:
        data = super().parse(stream, media_type, parser_context)
        _refuse(form_nul_fields(data))
        return data


class NulRefusingMultiPartParser(MultiPartParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None
              ) -> DataAndFiles:
        parsed = super().parse(stream, media_type, parser_context)
        _refuse(form_nul_fields(parsed.data, parsed.files))
        return parsed


def _refuse(fields: dict[str, list[str]]) -> None:
    if fields:
        raise ValidationError(fields)
