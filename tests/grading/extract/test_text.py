"""Delimited tables, plain text, Markdown, JSON and HTML."""

from __future__ import annotations

from grading.extract import extract_file, extract_files


def test_csv_and_tsv_render_as_table_rows() -> None:
    parts = extract_files(
        [("scores.csv", b'name,score\nAda,91\n"Lee, J",88\n'), ("scores.tsv", b"name\tscore\nBob\t77\n")]
    ).parts
    assert "| Ada | 91 |" in parts[0].text and "| Lee, J | 88 |" in parts[0].text
    assert parts[0].kind == "csv" and parts[1].kind == "csv"
    assert "| Bob | 77 |" in parts[1].text


def test_semicolon_delimited_csv_is_sniffed() -> None:
    [part] = extract_file("eu.csv", b"name;amount\nAda;1,50\nBo;2,75\n")
    assert "| Ada | 1,50 |" in part.text


def test_markdown_json_and_plain_text_are_kept_verbatim() -> None:
    parts = extract_files(
        [
            ("README.md", b"# Findings\n- churn fell to 4%\n"),
            ("result.json", b'{"irr": 0.142, "npv": 4210}'),
            ("notes.txt", "Caf\u00e9 revenue \u20ac12k".encode()),
            ("windows.txt", b"Caf\xe9 \x80 5"),
        ]
    ).parts
    assert "- churn fell to 4%" in parts[0].text
    assert '"npv": 4210' in parts[1].text
    assert "Caf\u00e9 revenue \u20ac12k" in parts[2].text
    assert parts[3].text == "Caf\u00e9 \u20ac 5"  # legacy Windows-1252 export, not binary


def test_html_is_reduced_to_text_but_keeps_link_targets() -> None:
    html = (
        b"<html><head><style>p{color:red}</style><script>var token='s3cret'</script></head><body>"
        b"<h1>Pricing</h1><p>See <a href='https://example.org/pricing'>our price list</a> today.</p>"
        b"<table><tr><td>Basic</td><td>$10</td></tr></table></body></html>"
    )
    [part] = extract_file("site.html", html)
    assert "our price list (https://example.org/pricing)" in part.text
    assert "Pricing" in part.text and "Basic | $10" in part.text
    assert "s3cret" not in part.text and "color:red" not in part.text
