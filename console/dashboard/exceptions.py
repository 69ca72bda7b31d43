"""Domain errors of the staff dashboard; views show their message to the staff member."""

from __future__ import annotations


class DashboardError(Exception):
    """A dashboard request that cannot be carried out; the message says why, in plain words."""


class JobRefused(DashboardError):
    """A background job that cannot be requested or run (no data, no permission, unknown kind)."""
