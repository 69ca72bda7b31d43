"""Alter a signed token so that it is certain to differ from the original."""


def tampered(token: str, *, position: int = -2) -> str:
    """Return ``token`` with the character at ``position`` swapped for a different one.

    Setting a character to a fixed letter leaves the token unchanged whenever it already was that letter
    (one run in 64 for a base64 signature), so the replacement is chosen from the character itself.
    """
    if not token:
        raise ValueError("token: nothing to tamper with")
    index = position % len(token)
    replacement = "B" if token[index] == "A" else "A"
    altered = token[:index] + replacement + token[index + 1:]
    assert altered != token
    return altered


def tampered_link(link: str) -> str:
    """Return a signed link (``…/<token>/``) whose token's signature was altered."""
    return tampered(link.rstrip("/")) + "/"
