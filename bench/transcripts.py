"""Bench: parse a ~50 MB Claude Code session file (or Codex rollout); print size, wall time, RSS growth, load.

Why: a worker parses whatever session file a participant uploads before coding the log; the parse must
stream (memory bounded whatever the file size) and stay fast. The file mixes prompts, multi-part agent
messages, tool calls with large results, side chains and thinking, like a long real session. Parsing runs
in a fresh child process, so the RSS growth (peak `ru_maxrss` minus RSS before parsing) is the parser's.
Goal: <= 2 s and <= 100 MB growth. `--format codex` writes an enveloped Codex rollout instead, whose
dialogue and tool events mirror the response items (the parser reads it twice: a light pass for the
mirrored texts, then the parse).

    python bench/transcripts.py [--target-mb 50] [--format claude_code|codex] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WORDS = ["quarter", "revenue", "region", "forecast", "sheet", "column", "formula", "check", "total", "margin",
         "draft", "memo", "client", "table", "summary", "update", "review", "budget", "plan"]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def write_session(path: Path, target_bytes: int, seed: int = 11) -> int:
    """Write a Claude Code session of about `target_bytes`; return the number of lines."""
    rng = random.Random(seed)
    lines = 0
    second = 0
    with path.open("w", encoding="utf-8") as out:
        def emit(record: dict) -> None:
            nonlocal lines, second
            second += rng.randint(1, 40)
            record.update(sessionId="bench", cwd="/home/w/p", version="1.0.98", uuid=f"u{lines}",
                          timestamp=f"2025-06-02T{10 + second // 3600 % 12:02d}:{second // 60 % 60:02d}:"
                                    f"{second % 60:02d}.000Z")
            out.write(json.dumps(record) + "\n")
            lines += 1

        turn = 0
        while out.tell() < target_bytes:
            turn += 1
            side = turn % 7 == 0
            emit({"type": "user", "isSidechain": side, "message": {"role": "user", "content": _words(rng, 40)}})
            for call in range(rng.randint(1, 4)):
                mid = f"msg_{turn}_{call}"
                emit({"type": "assistant", "isSidechain": side, "message": {"id": mid, "role": "assistant", "content": [
                    {"type": "thinking", "thinking": _words(rng, 60), "signature": "x" * 40},
                    {"type": "text", "text": _words(rng, 80)}]}})
                emit({"type": "assistant", "isSidechain": side, "message": {"id": mid, "role": "assistant", "content": [
                    {"type": "tool_use", "id": f"t{turn}{call}", "name": "Read", "input": {"file_path": "/a/b.py"}}]}})
                emit({"type": "user", "isSidechain": side, "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"t{turn}{call}", "content": _words(rng, 900)}]}})
    return lines


def write_rollout(path: Path, target_bytes: int, seed: int = 11) -> int:
    """Write a Codex CLI rollout of about `target_bytes` with mirrored events; return the number of lines."""
    rng = random.Random(seed)
    lines = 0
    second = 0
    with path.open("w", encoding="utf-8") as out:
        def emit(kind: str, payload: dict) -> None:
            nonlocal lines, second
            second += rng.randint(1, 40)
            stamp = f"2025-06-02T{10 + second // 3600 % 12:02d}:{second // 60 % 60:02d}:{second % 60:02d}.000Z"
            out.write(json.dumps({"timestamp": stamp, "type": kind, "payload": payload}) + "\n")
            lines += 1

        emit("session_meta", {"id": "bench", "cwd": "/home/w/p", "originator": "codex_cli_rs", "cli_version": "0.57.0"})
        turn = 0
        while out.tell() < target_bytes:
            turn += 1
            prompt = _words(rng, 40)
            emit("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": prompt}]})
            emit("event_msg", {"type": "user_message", "message": prompt, "images": []})
            for call in range(rng.randint(1, 4)):
                emit("response_item", {"type": "reasoning", "summary": [{"type": "summary_text",
                                                                        "text": _words(rng, 30)}]})
                emit("response_item", {"type": "function_call", "name": "shell", "call_id": f"c{turn}{call}",
                                       "arguments": json.dumps({"command": ["bash", "-lc", "cat a.py"]})})
                emit("event_msg", {"type": "exec_command_begin", "call_id": f"c{turn}{call}", "command": ["cat"]})
                emit("event_msg", {"type": "exec_command_end", "call_id": f"c{turn}{call}", "exit_code": 0})
                emit("response_item", {"type": "function_call_output", "call_id": f"c{turn}{call}",
                                       "output": _words(rng, 900)})
            reply = _words(rng, 80)
            emit("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": reply}]})
            emit("event_msg", {"type": "agent_message", "message": reply})
            emit("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": turn}}})
    return lines


def _child(path: str) -> None:
    from grading.transcripts import parse_log, transcript_metrics

    def status_kb(field: str) -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))

    before = status_kb("VmRSS")
    assert status_kb("VmHWM") <= before + 1024, "the peak before parsing would hide the parser's growth"
    started = time.perf_counter()
    with open(path, "rb") as handle:
        result = parse_log(Path(path).name, handle)
    metrics = transcript_metrics([result])
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    with open(path, "rb") as handle:
        parse_log(Path(path).name, handle)
    heap_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"seconds": elapsed, "rss_growth_mb": (peak - before) / 1024, "heap_peak_mb": heap_peak / 2**20,
                      "status": str(result.status),
                      "records": result.records, "user_prompts": metrics.user_prompts,
                      "tool_calls": metrics.tool_calls, "turns_kept": len(result.turns),
                      "truncated": metrics.truncated}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-mb", type=float, default=50)
    parser.add_argument("--format", choices=("claude_code", "codex"), default="claude_code")
    parser.add_argument("--keep", type=Path, help="Write the session file into this folder and keep it.")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        path = folder / "session.jsonl"
        writer = write_rollout if args.format == "codex" else write_session
        lines = writer(path, int(args.target_mb * 2**20))
        size_mb = path.stat().st_size / 2**20
        out = subprocess.run([sys.executable, __file__, "--child", str(path)], check=True, capture_output=True,
                             text=True, cwd=ROOT)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
    label = "Codex rollout" if args.format == "codex" else "Claude Code session"
    print(f"{label}: {size_mb:.1f} MB, {lines} lines; machine load {os.getloadavg()[0]:.1f} "
          f"(1 min, {os.cpu_count()} cores)")
    print(f"parse + metrics: {figures['seconds']:.2f} s (goal <= 2 s)")
    print(f"RSS growth: {figures['rss_growth_mb']:.1f} MB (goal <= 100 MB); Python heap peak while parsing "
          f"{figures['heap_peak_mb']:.1f} MB")
    print(f"records {figures['records']}, user prompts {figures['user_prompts']}, tool calls {figures['tool_calls']}, "
          f"turns kept {figures['turns_kept']} (text bounded: {figures['truncated']}), status {figures['status']}")


if __name__ == "__main__":
    main()
