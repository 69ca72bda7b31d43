#!/usr/bin/env bash
# Back up the database and the private files: scripts/backup.sh DEST_FOLDER
#
# Reads DATABASE_URL (PostgreSQL) and the private files folder MEDIA_DIR (default: $VAR_DIR/media, VAR_DIR
# defaulting to ./var). Writes DEST/database.dump (pg_dump custom format), DEST/private-files.tar.gz and
# DEST/SHA256SUMS. The database is dumped first: a file uploaded during the backup is then at worst an extra
# file no row points to, never a row whose file is missing. The dump holds personal data, password hashes and
# tokens: every file is written 0600 in a 0700 folder (owner only), whatever the caller's umask. See
# docs/operations.md.
set -euo pipefail
umask 077

dest=${1:?usage: scripts/backup.sh DEST_FOLDER}
: "${DATABASE_URL:?set DATABASE_URL to the PostgreSQL database to back up}"
case "$DATABASE_URL" in postgres://*|postgresql://*) ;; *) echo "backup.sh: DATABASE_URL must be PostgreSQL" >&2; exit 2;; esac
media=${MEDIA_DIR:-${VAR_DIR:-var}/media}

mkdir -p "$dest"
chmod 0700 "$dest"  # a folder that existed before keeps no wider access than the files in it
# One consistent snapshot of the whole database (pg_dump runs in a single repeatable-read transaction).
pg_dump --format=custom --no-owner --no-privileges --file "$dest/database.dump" "$DATABASE_URL"
if [ -d "$media" ]; then
  tar -C "$media" -czf "$dest/private-files.tar.gz" .
else
  tar -czf "$dest/private-files.tar.gz" --files-from /dev/null  # no upload yet: an empty archive
fi
(cd "$dest" && sha256sum database.dump private-files.tar.gz > SHA256SUMS)
chmod 0600 "$dest/database.dump" "$dest/private-files.tar.gz" "$dest/SHA256SUMS"  # files left by an earlier run
echo "backup written to $dest ($(du -sh "$dest" | cut -f1))"
