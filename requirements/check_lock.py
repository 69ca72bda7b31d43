"""Keep the lock files honest: stamp them with a digest of pyproject's requirements, and fail when they differ.

`make lock` runs this with `--write` after `uv pip compile`; `make check` runs it without, so a change to the
dependencies in pyproject.toml that was not followed by `make lock` fails CI instead of silently testing the
old pins. Only the requirement lists are hashed, so editing tool settings in pyproject does not stale the lock.
Standard library only: it runs before the virtualenv exists.
"""

import argparse
import hashlib
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = [ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "dev.txt"]
MARKER = "# pyproject-requirements-sha256: "


def requirements_digest(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """Digest of requires-python, dependencies and every extra (order-insensitive, whitespace-insensitive)."""
    project = tomllib.loads(pyproject.read_text())["project"]

    def norm(reqs: list[str]) -> list[str]:
        return sorted("".join(r.split()).lower() for r in reqs)

    data = {
        "requires-python": project.get("requires-python", ""),
        "dependencies": norm(project.get("dependencies", [])),
        "optional-dependencies": {k: norm(v) for k, v in sorted(project.get("optional-dependencies", {}).items())},
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def recorded_digest(lock: Path) -> str | None:
    for line in lock.read_text().splitlines():
        if line.startswith(MARKER):
            return line[len(MARKER):].strip()
    return None


def write_digest(lock: Path, digest: str) -> None:
    """Put the marker right after uv's header comment (replacing an older one)."""
    lines = [line for line in lock.read_text().splitlines() if not line.startswith(MARKER)]
    at = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    lines.insert(at, MARKER + digest)
    lock.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="stamp the lock files instead of checking them")
    args = parser.parse_args(argv)
    digest = requirements_digest()
    stale = []
    for lock in LOCKS:
        if args.write:
            write_digest(lock, digest)
        elif not lock.exists() or recorded_digest(lock) != digest:
            stale.append(lock.relative_to(ROOT))
    if stale:
        names = ", ".join(str(p) for p in stale)
        print(f"{names}: out of date with pyproject.toml's requirements; run `make lock` and commit.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
