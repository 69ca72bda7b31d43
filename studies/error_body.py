"""The JSON error shape of the API, shared with the middlewares that answer API requests before DRF does."""

from __future__ import annotations

from typing import Any


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}
