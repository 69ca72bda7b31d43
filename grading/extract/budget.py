"""Share the judge's character budget fairly between parts and mark every cut in the text."""

from __future__ import annotations

from collections.abc import Sequence

from grading.extract.results import ExtractedPart, display_name


def _allocate(demands: Sequence[int], budget: int) -> list[int]:
    """Water-fill: every part may use an equal share; what small parts leave over goes to the large ones."""
    alloc = [0] * len(demands)
    left, remaining = budget, len(demands)
    for i in sorted(range(len(demands)), key=demands.__getitem__):
        alloc[i] = min(demands[i], left // remaining)
        left -= alloc[i]
        remaining -= 1
    return alloc


def apply_budget(parts: list[ExtractedPart], budget: int) -> bool:
    """Cut texts to a fair share of the budget; return whether anything was cut."""
    demands = [len(p.text) for p in parts]
    if sum(demands) <= budget:
        return False
    cut = False
    for part, allowed in zip(parts, _allocate(demands, budget), strict=True):
        if len(part.text) <= allowed:
            continue
        complete = not part.truncated
        if len(part._sections) > 1:
            shares = _allocate([len(s) for s in part._sections], allowed - len(part._sections) + 1)
            part._sections = [
                cut_text(section, share, part.name, complete=complete) if len(section) > share else section
                for section, share in zip(part._sections, shares, strict=True)
            ]
            part.text = "\n".join(part._sections)
        else:
            _cut_part(part, allowed)
        part.truncated = cut = True
    return cut


def _cut_part(part: ExtractedPart, allowed: int) -> None:
    """Cut a part to `allowed` characters; a second cut still counts what was omitted from the original."""
    if part._cut_state is None:
        part._cut_state = (len(part.text), not part.truncated, len(part.text))
    source_chars, complete, kept = part._cut_state
    content = part.text[:kept]
    keep = max(0, allowed - len(_marker(source_chars, part.name, complete=complete)) - 1)
    newline = content.rfind("\n", 0, keep)
    if newline > keep * 0.8:  # end on a whole line when that loses little
        keep = newline
    part.text = f"{content[:keep]}\n{_marker(source_chars - keep, part.name, complete=complete)}".lstrip("\n")
    part._cut_state = (source_chars, complete, keep)


def _marker(omitted: int, name: str, *, complete: bool) -> str:
    amount = f"{omitted}" if complete else f"at least {omitted}"
    return f"[[TRUNCATED: {amount} characters omitted from {display_name(name)}]]"


def cut_text(text: str, allowed: int, name: str, *, complete: bool) -> str:
    reserve = len(_marker(len(text), name, complete=complete)) + 1
    keep = max(0, allowed - reserve)
    newline = text.rfind("\n", 0, keep)
    if newline > keep * 0.8:  # end on a whole line when that loses little
        keep = newline
    return f"{text[:keep]}\n{_marker(len(text) - keep, name, complete=complete)}".lstrip("\n")
