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


# Families the project knows; any other is kept (a study may grade a new model line) but named in a warning,
# since a misspelt family silently matches no judge and no agent.
KNOWN_FAMILIES: frozenset[str] = frozenset({family for family, _ in FAMILY_WORDS} | {"other"})


def normalise_family(family: str | None) -> str:
    """Return a family as it is stored and compared: stripped and lower-cased ("" for none).

    Judges' and agents' families are matched for the self-preference term; ``" Claude "`` and ``"claude"``
    must be one family, so every write of a family goes through here.
    """
    return (family or "").strip().lower()


def unknown_families(families: set[str] | list[str]) -> list[str]:
    """Return the non-blank families (normalised) the project does not know, sorted."""
    return sorted({normalise_family(f) for f in families} - KNOWN_FAMILIES - {""})


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
        return normalise_family(family)
    return family_from_name(model) or PROVIDER_FAMILIES.get(provider.strip().lower(), provider.strip().lower())


def tom_coder_problem(entries: object) -> str | None:
    """Say what is wrong with a ToM judge pair (two entries of different families), or None when it is usable.

    The paper checks its ToM coder against a second model family; two judges of one family would agree for the
    wrong reason (shared training), so the pair is refused rather than silently accepted.
    """
    if not isinstance(entries, list) or len(entries) != 2:
        return ("name exactly two ToM judges, e.g. [{\"provider\": \"openai\", \"model\": \"gpt-4.1\"}, "
                "{\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-6\"}]")
    families = []
    for entry in entries:
        if not isinstance(entry, dict) or not str(entry.get("provider") or "").strip() \
                or not str(entry.get("model") or "").strip():
            return f'each ToM judge needs "provider" and "model", got {entry!r}'
        families.append(judge_family(provider=str(entry["provider"]), model=str(entry["model"]),
                                     family=str(entry.get("family") or "")))
    if families[0] == families[1]:
        return (f"both ToM judges are of the {families[0]} family; choose two judges of different model families "
                "so their agreement is not a shared bias")
    return None
