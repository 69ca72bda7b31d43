"""ZIP archives and Office containers: member checks, zip-bomb limits, nested archives."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from grading.extract.limits import CHUNK_BYTES, RATIO_FLOOR, ExtractLimits
from grading.extract.results import ExtractedPart, display_name
from grading.extract.sources import Context, Sink, Source, describe, make_part, refused
from studies.archives import zip_member_problem
from studies.byte_format import human_bytes

# The dispatcher (`dispatch.extract_source`) each member goes through; passed in, as it imports this module.
Extractor = Callable[..., list[ExtractedPart]]


@dataclass
class ZipBudget:
    """Shared by an archive and everything nested in it, so nesting cannot multiply the limits."""

    members_left: int
    bytes_left: int


def extract_zip(
    name: str,
    src: Source,
    ctx: Context,
    *,
    depth: int,
    budget: ZipBudget | None,
    note: str,
    extract: Extractor,
) -> list[ExtractedPart]:
    """List an archive, then extract each member through `extract` within the shared archive limits."""
    limits = ctx.limits
    if depth > limits.max_zip_depth:
        return [
            refused(
                name, src.size, f"refused: archive nested more than {limits.max_zip_depth} levels deep", "zip"
            )
        ]
    if budget is None:
        budget = ZipBudget(limits.max_zip_members, limits.max_zip_total_bytes)
    with src.open() as fh, zipfile.ZipFile(fh) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        listing = Sink(limits.max_chars)
        listing.add(f"Archive with {len(infos)} file(s):")
        for info in infos:
            if not listing.add(f"- {display_name(info.filename)} ({human_bytes(info.file_size)})"):
                break
        parts = [ctx.keep(make_part(name, "zip", src.size, listing, note=note))]
        for index, info in enumerate(infos):
            if budget.members_left <= 0:
                rest = len(infos) - index
                parts.append(
                    refused(
                        f"{name}/...",
                        0,
                        f"refused: {rest} further member(s) beyond the limit of "
                        f"{limits.max_zip_members} archive members",
                        "zip",
                    )
                )
                break
            budget.members_left -= 1
            parts.extend(_extract_member(name, zf, info, ctx, depth, budget, extract))
    return parts


def _extract_member(
    archive: str,
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    ctx: Context,
    depth: int,
    budget: ZipBudget,
    extract: Extractor,
) -> list[ExtractedPart]:
    limits = ctx.limits
    member = f"{archive}/{info.filename}"
    problem = zip_member_problem(info)
    if problem:
        return [refused(member, info.file_size, f"refused: unsafe archive member: it {problem}")]
    if info.flag_bits & 0x1:
        return [refused(member, info.file_size, "refused: encrypted archive member")]
    ratio_cap = max(RATIO_FLOOR, int(info.compress_size * limits.max_zip_ratio))
    declared = info.file_size
    if declared > ratio_cap:
        ratio = declared / max(info.compress_size, 1)
        return [
            refused(
                member,
                declared,
                f"refused: compression ratio {ratio:.0f}:1 exceeds "
                f"{limits.max_zip_ratio:.0f}:1 (possible zip bomb)",
            )
        ]
    if declared > limits.max_file_bytes:
        return [
            refused(
                member, declared, f"refused: larger than the {human_bytes(limits.max_file_bytes)} limit per file"
            )
        ]
    if declared > budget.bytes_left:
        return [
            refused(
                member,
                declared,
                f"refused: archive exceeds {human_bytes(limits.max_zip_total_bytes)} uncompressed in total",
            )
        ]
    cap = min(ratio_cap, limits.max_file_bytes, budget.bytes_left)
    try:
        data = _read_bounded(zf, info, cap)
    except Exception as exc:  # CRC errors, truncated streams, unsupported compression
        return [refused(member, declared, f"could not be read: {describe(exc)}")]
    if data is None:  # the header understated the size: treat the liar as a bomb
        budget.bytes_left -= cap
        return [
            refused(
                member,
                declared,
                "refused: uncompressed data exceeds its declared size or the "
                "archive limits (possible zip bomb)",
            )
        ]
    budget.bytes_left -= len(data)
    return extract(member, Source(data=data), ctx, depth=depth, budget=budget)


def _read_bounded(zf: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes | None:
    """Read a member in chunks and stop as soon as it passes `cap`; None means it did."""
    out = bytearray()
    with zf.open(info) as fh:
        while chunk := fh.read(min(CHUNK_BYTES, cap + 1 - len(out))):
            out += chunk
            if len(out) > cap:
                return None
    return bytes(out)


def office_container_problem(src: Source, limits: ExtractLimits) -> str | None:
    """Office files are ZIPs too: refuse ones whose parts would inflate past the archive limits."""
    with src.open() as fh, zipfile.ZipFile(fh) as zf:
        infos = zf.infolist()
        if len(infos) > 20 * limits.max_zip_members:
            return f"refused: {len(infos)} internal parts is implausibly many for an Office file"
        total = sum(i.file_size for i in infos)
        if total > limits.max_zip_total_bytes:
            return (
                f"refused: unpacks to {human_bytes(total)}, over the {human_bytes(limits.max_zip_total_bytes)} "
                "limit (possible zip bomb)"
            )
    return None
