"""Grading fixtures' building blocks: submitted episodes with stored files, rubrics that add up."""

from __future__ import annotations

from django.core.files.base import ContentFile

from grading.models import Criterion, Rubric
from grading.schemas import RUBRIC_CATEGORIES
from studyapp.models import Episode, EpisodeFile, Participant
from tests.factories import ConsentVersionFactory, EpisodeFactory, ParticipantFactory, StudyFactory

REPORT = b"Quarterly summary\nGrand total: 1,234,567\nPrepared for the finance team.\n"


def add_file(episode: Episode, name: str, data: bytes, kind: str = EpisodeFile.Kind.DELIVERABLE) -> EpisodeFile:
    row = EpisodeFile(episode=episode, kind=kind, name=name, size=len(data), sha256="0" * 64)
    row.file.save(name, ContentFile(data), save=False)
    row.save()
    return row


def submitted_episode(*, study=None, providers=("openai", "anthropic"), files=None, task=None,
                      logs=None, **episode_fields) -> Episode:
    """A submitted episode whose participant consented to `providers` receiving their files."""
    study = study or StudyFactory()
    consent = ConsentVersionFactory(study=study, version=study.consent_versions.count() + 1,
                                    llm_providers=list(providers))
    participant = ParticipantFactory(study=study, consent_version=consent, status=Participant.Status.WORKING)
    extra = {"task": task} if task is not None else {}
    episode_fields.setdefault("status", Episode.Status.SUBMITTED)
    episode = EpisodeFactory(participant=participant, study=study, **extra, **episode_fields)
    for name, data in (files if files is not None else {"report.txt": REPORT}).items():
        add_file(episode, name, data)
    for name, data in (logs or {}).items():
        add_file(episode, name, data, kind=EpisodeFile.Kind.LOG)
    return episode


def approved_rubric(task, *, per_category: int = 2, status: str = Rubric.Status.APPROVED,
                    origin: str = Rubric.Origin.EXPERT) -> Rubric:
    """A rubric version whose criteria add up (keys C1..Cn in category order)."""
    version = (task.rubrics.order_by("-version").values_list("version", flat=True).first() or 0) + 1
    rubric = Rubric.objects.create(task=task, version=version, status=status, origin=origin,
                                   details={"evaluation_notes": "Be strict.",
                                            "expected_specific_values": [{"item": "Total", "value": "1,234,567"}],
                                            "critical_requirements": ["Workbook delivered"]})
    order = 0
    for code, name, points in RUBRIC_CATEGORIES:
        for i in range(per_category):
            order += 1
            Criterion.objects.create(rubric=rubric, order=order, key=f"C{order}", category=code,
                                     description=f"{name} item {i + 1}", points=points / per_category,
                                     expected_value="as stated", evaluation_method="Compare with the prompt.")
    return rubric


def png_bytes() -> bytes:
    """A valid 1×1 PNG."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
            + chunk(b"IEND", b""))
