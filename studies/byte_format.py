"""Human-readable byte sizes for messages (no Django imports; templates keep Django's ``filesizeformat``)."""

from __future__ import annotations

__all__ = ["human_bytes"]


def human_bytes(n: float) -> str:
    """Return "1 byte", "512 bytes", "1.5 KiB", "200.0 MiB" or "16.0 GiB" (powers of 1024, named as such)."""
    if n < 1024:
        count = int(n)
        return "1 byte" if count == 1 else f"{count} bytes"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"
