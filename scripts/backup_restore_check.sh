#!/usr/bin/env bash
# Prove a backup restores: back up DATABASE_URL and its private files, restore them into a fresh database and
# folder, then export every study from both and compare the exports and the private files byte for byte.
#
#   DATABASE_URL=postgres://…/study VAR_DIR=var scripts/backup_restore_check.sh
#
# The fresh database (<name>_restore_check_<pid>, on the same server) and the work folder are removed at the
# end (KEEP_WORK=1 keeps the folder). Every study is exported with the same --exported-at time, so equal data
# gives equal bytes. The check's exports are recorded in each database's audit log like any export.
# Exit 0 when everything matches. See docs/operations.md.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${DATABASE_URL:?set DATABASE_URL to the PostgreSQL database to check (e.g. the demo)}"
python=${PYTHON:-python}
source_var=${VAR_DIR:-var}
source_media=${MEDIA_DIR:-$source_var/media}
work=$(mktemp -d "${TMPDIR:-/tmp}/backup-restore-check.XXXXXX")
fresh_url=$("$python" -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path=p.path.rstrip("/") + "_restore_check_" + sys.argv[2])))' "$DATABASE_URL" "$$")
fresh_name=$("$python" -c 'import sys, urllib.parse as u; print(u.urlsplit(sys.argv[1]).path.lstrip("/"))' "$fresh_url")

cleanup() {
  psql "$DATABASE_URL" -qc "DROP DATABASE IF EXISTS \"$fresh_name\"" >/dev/null 2>&1 || true
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "work folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "1/4 backing up"
MEDIA_DIR="$source_media" scripts/backup.sh "$work/backup"

echo "2/4 restoring into a fresh database $fresh_name"
psql "$DATABASE_URL" -qc "CREATE DATABASE \"$fresh_name\""
mkdir -p "$work/restored-var"
DATABASE_URL="$fresh_url" MEDIA_DIR="$work/restored-var/media" scripts/restore.sh "$work/backup"

echo "3/4 exporting every study from both"
# Export ids are keyed by the secret key: the restored site must run with the same DJANGO_SECRET_KEY (kept
# apart from the backup, docs/operations.md). Without one set, the embedded default keeps it in $VAR_DIR.
if [ -z "${DJANGO_SECRET_KEY:-}" ] && [ -f "$source_var/secret_key" ]; then
  DJANGO_SECRET_KEY=$(cat "$source_var/secret_key")
fi
export DJANGO_SECRET_KEY
stamp=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
slugs=$(psql "$DATABASE_URL" -Atc "select slug from studyapp_study order by slug")
[ -n "$slugs" ] || { echo "no study to export: nothing would be compared" >&2; exit 1; }
mkdir -p "$work/exports/source" "$work/exports/restored"
for slug in $slugs; do
  DATABASE_URL="$DATABASE_URL" VAR_DIR="$source_var" "$python" manage.py export_study "$slug" \
    --output "$work/exports/source/$slug.zip" --exported-at "$stamp" >/dev/null
  DATABASE_URL="$fresh_url" VAR_DIR="$work/restored-var" "$python" manage.py export_study "$slug" \
    --output "$work/exports/restored/$slug.zip" --exported-at "$stamp" >/dev/null
done

echo "4/4 comparing byte for byte"
failed=0
for slug in $slugs; do
  if cmp -s "$work/exports/source/$slug.zip" "$work/exports/restored/$slug.zip"; then
    echo "  export $slug: identical ($(stat -c %s "$work/exports/source/$slug.zip") bytes)"
  else
    echo "  export $slug: DIFFERENT" >&2; failed=1
  fi
done
if [ -d "$source_media" ]; then
  if diff -r -q "$source_media" "$work/restored-var/media" >/dev/null; then
    echo "  private files: identical ($(find "$source_media" -type f | wc -l) files)"
  else
    diff -r -q "$source_media" "$work/restored-var/media" >&2 || true; failed=1
  fi
fi
if [ "$failed" = 0 ]; then echo "backup and restore check passed"; else echo "backup and restore check FAILED" >&2; fi
exit "$failed"
