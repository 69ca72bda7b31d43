"""Recognising log files: every format routed, broken or unknown files reported, never raised."""

from __future__ import annotations

import io

import pytest

from grading.transcripts import FileStatus, Format, detect, parse_log
from tests.factories.files import png_bytes
from tests.grading.transcripts.conftest import SAMPLES


@pytest.mark.parametrize(("name", "fmt"), [
    ("claude_code_session.jsonl", Format.CLAUDE_CODE), ("codex_rollout.jsonl", Format.CODEX),
    ("codex_legacy.jsonl", Format.CODEX), ("codex_legacy.json", Format.CODEX),
    ("gemini_checkpoint.json", Format.GEMINI), ("gemini_session.json", Format.GEMINI),
    ("terminal_transcript.txt", Format.TERMINAL), ("codex_reduced_rollout.jsonl", Format.CODEX),
])
def test_each_sample_is_recognised_by_content(parse_sample, name, fmt):
    assert parse_sample(name).format is fmt


def test_a_screenshot_is_listed_for_the_vision_coder():
    result = parse_log("step.png", io.BytesIO(png_bytes()))
    assert (result.format, result.status) == (Format.SCREENSHOT, FileStatus.SCREENSHOT)


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "empty"),
    (b"\x00\x01\x02binary\x00" * 50, "binary"),
    (b'{"type": "user", "message": {"role": "us', "not valid JSON"),
    (b'{"hello": "world"}\n{"other": 1}\n', "no supported agent"),
    (b'[{"a": 1}]', "no supported agent"),
])
def test_unreadable_files_are_reported_with_a_reason(data, reason):
    result = parse_log("log.jsonl", io.BytesIO(data))
    assert result.status is FileStatus.UNREADABLE and reason in result.note


def test_a_stream_that_fails_while_reading_is_reported_not_raised():
    class Failing(io.RawIOBase):
        def readable(self):
            return True

        def seekable(self):
            return False

        def readinto(self, buffer):
            raise OSError("disk went away")

    result = parse_log("broken.jsonl", Failing())
    assert result.status is FileStatus.UNREADABLE and "OSError" in result.note


def test_a_non_seekable_stream_is_parsed(parse_sample):
    from tests.grading.transcripts.conftest import SAMPLES

    class OneWay(io.RawIOBase):
        def __init__(self, data):
            self._data = io.BytesIO(data)

        def readable(self):
            return True

        def seekable(self):
            return False

        def readinto(self, buffer):
            chunk = self._data.read(len(buffer))
            buffer[: len(chunk)] = chunk
            return len(chunk)

    stream = io.BufferedReader(OneWay((SAMPLES / "codex_rollout.jsonl").read_bytes()))
    assert parse_log("r.jsonl", stream).user_prompts == 3


def test_a_first_record_longer_than_the_sniffed_head_is_still_recognised():
    import json

    long_prompt = {"type": "user", "sessionId": "s", "uuid": "a",
                   "message": {"role": "user", "content": "Here is the whole report: " + "lorem ipsum " * 20_000}}
    reply = {"type": "assistant", "uuid": "b", "message": {"id": "m", "role": "assistant", "content": "ok"}}
    data = (json.dumps(long_prompt) + "\n" + json.dumps(reply) + "\n").encode()
    result = parse_log("s.jsonl", io.BytesIO(data))
    assert (result.format, result.user_prompts, result.agent_turns) == (Format.CLAUDE_CODE, 1, 1)


def test_a_byte_order_mark_does_not_break_the_first_record():
    data = b'\xef\xbb\xbf{"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}\n'
    result = parse_log("s.jsonl", io.BytesIO(data))
    assert (result.user_prompts, result.bad_lines) == (1, 0)


@pytest.mark.parametrize("head_bytes", [64 * 1024, 200])
def test_the_upload_check_names_the_same_format_the_parser_finds_for_every_sample(monkeypatch, head_bytes):
    monkeypatch.setattr(detect, "HEAD_BYTES", head_bytes)
    for path in sorted(SAMPLES.iterdir()):
        data = path.read_bytes()
        parsed = detect.parse_log(path.name, io.BytesIO(data)).format
        assert detect.detect_log_format(io.BytesIO(data), len(data)) is parsed, path.name


@pytest.mark.parametrize("data", [b'{"a":' * 6000, b'{"a":' * 6000 + b"1" + b"}" * 6000, b"[" * 30000,
                                  b'{"type":"user","message":' * 3000 + b"\n"])
def test_deep_nesting_is_unknown_to_detection_and_unreadable_to_the_parser_never_an_error(data):
    assert detect.sniff_log_format(data, complete=True) is Format.UNKNOWN
    assert detect.detect_log_format(io.BytesIO(data), len(data)) is Format.UNKNOWN
    assert parse_log("deep.json", io.BytesIO(data)).status is FileStatus.UNREADABLE


def test_a_deep_line_in_a_session_file_is_one_bad_line_not_a_lost_file():
    good = (SAMPLES / "claude_code_session.jsonl").read_bytes()
    first, rest = good.split(b"\n", 1)
    result = parse_log("s.jsonl", io.BytesIO(first + b"\n" + b"[" * 5000 + b"\n" + rest))
    reference = parse_log("s.jsonl", io.BytesIO(good))
    assert result.format is Format.CLAUDE_CODE and result.status is reference.status
    assert result.bad_lines == reference.bad_lines + 1
    assert len(result.turns) == len(reference.turns)


def test_bounded_json_reads_brackets_inside_strings_and_shallow_values_as_json():
    from grading.transcripts import bounded_json

    assert bounded_json.loads('{"text": "' + "[{" * 500 + '"}') == {"text": "[{" * 500}
    value, depth = bounded_json.loads("[" * 100 + "]" * 100), 1
    while value:
        value, depth = value[0], depth + 1
    assert depth == 100  # well under the cap: decoded as is
    with pytest.raises(ValueError):
        bounded_json.loads("[" * (bounded_json.MAX_DEPTH + 1) + "]" * (bounded_json.MAX_DEPTH + 1))
