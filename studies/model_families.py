"""Which model family an agent or a judge model belongs to, guessed from its names as a default.

A judge may favour work produced with its own family's models (self-preference), so the judge-aware rating
needs each agent's and each judge's family. They are study data -- ``Agent.family`` and the ``family`` of a
judge entry, both editable by staff -- and this guess only fills them in when they are blank. The guess reads
the model version first (Manus runs its own model line; Claude Code runs Claude), then the product and name.
"""

from __future__ import annotations

import re

# Family, then the words that name it; the first family whose word appears (as a word prefix) wins.
FAMILY_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("anthropic", ("claude", "anthropic", "sonnet", "opus", "haiku")),
    ("openai", ("gpt", "openai", "codex", "chatgpt", "o1", "o3", "o4")),
    ("google", ("gemini", "google", "bard", "gemma")),
    ("meta", ("llama", "meta")),
    ("mistral", ("mistral", "mixtral", "codestral", "devstral")),
    ("deepseek", ("deepseek",)),
    ("xai", ("grok", "xai")),
    ("alibaba", ("qwen",)),
    ("manus", ("manus",)),
)
PROVIDER_FAMILIES = {"openai": "openai", "anthropic": "anthropic", "google": "google", "gemini": "google",
                     "mistral": "mistral", "xai": "xai", "deepseek": "deepseek"}


def family_from_name(*names: str) -> str:
    """Return the family the first name that mentions one belongs to, or "" when none does."""
    for name in names:
        words = re.split(r"[^a-z0-9]+", (name or "").lower())
        for family, prefixes in FAMILY_WORDS:
            if any(word.startswith(prefix) for word in words if word for prefix in prefixes):
                return family
    return ""


def judge_family(*, provider: str, model: str, family: str = "") -> str:
    """Return a judge's family: as configured, else from its model name, else from its provider."""
    if family.strip():
        return family.strip().lower()
    return family_from_name(model) or PROVIDER_FAMILIES.get(provider.strip().lower(), provider.strip().lower())
