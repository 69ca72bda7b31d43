"""Word, PowerPoint and PDF deliverables: their text, tables, links and notes reach the judge."""

from __future__ import annotations

from grading.extract import extract_file
from tests.grading.extract.builders import (
    make_docx,
    make_encrypted_pdf,
    make_pdf,
    make_pptx,
)


def test_docx_keeps_paragraphs_and_tables_in_document_order() -> None:
    [part] = extract_file("memo.docx", make_docx())
    assert part.kind == "docx" and part.inspectable
    assert "# Market sizing memo" in part.text
    assert "4.2 million households" in part.text
    assert "| Region | Revenue |" in part.text and "| North | 1200 |" in part.text
    assert part.text.index("4.2 million") < part.text.index("| North | 1200 |") < part.text.index("Closing")
    assert "[Footer] Confidential draft" in part.text




def test_pptx_includes_slide_text_tables_links_and_speaker_notes() -> None:
    [part] = extract_file("plan.pptx", make_pptx())
    assert part.kind == "pptx" and part.inspectable
    assert "## Slide 1: Q3 launch plan" in part.text
    assert "Ship the pilot to 3 clinics" in part.text
    assert "https://example.org/pilot" in part.text
    assert "| Riverside | September |" in part.text
    assert "Speaker notes: Mention the churn risk before the budget slide." in part.text


def test_pdf_text_is_read_page_by_page() -> None:
    [part] = extract_file("valuation.pdf", make_pdf())
    assert part.kind == "pdf" and part.inspectable
    assert "## Page 1" in part.text and "Net present value: 4,210 USD" in part.text
    assert "## Page 2" in part.text and "payback in 18 months" in part.text


def test_password_protected_pdf_is_refused_as_encrypted() -> None:
    [part] = extract_file("sealed.pdf", make_encrypted_pdf("secret"))
    assert not part.inspectable
    assert "encrypted" in part.note
    assert "777" not in part.text


def test_pdf_encrypted_with_an_empty_password_is_still_read() -> None:
    [part] = extract_file("restricted.pdf", make_encrypted_pdf(""))
    assert part.inspectable
    assert "Sealed figure 777" in part.text
