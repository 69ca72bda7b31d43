#!/usr/bin/env bash
# Restore a backup made by scripts/backup.sh: scripts/restore.sh BACKUP_FOLDER
#
# Restores into DATABASE_URL, which must name an existing, EMPTY PostgreSQL database (create it first:
# createdb …), and unpacks the private files into MEDIA_DIR (default: $VAR_DIR/media), which must be empty or
# missing. Checks the backup's checksums first; stops at the first error. See docs/operations.md.
set -euo pipefail

src=${1:?usage: scripts/restore.sh BACKUP_FOLDER}
: "${DATABASE_URL:?set DATABASE_URL to the empty PostgreSQL database to restore into}"
media=${MEDIA_DIR:-${VAR_DIR:-var}/media}

(cd "$src" && sha256sum --check --quiet SHA256SUMS)
tables=$(psql "$DATABASE_URL" -Atc "select count(*) from pg_tables where schemaname = 'public'")
if [ "$tables" != "0" ]; then
  echo "restore.sh: the target database already has $tables tables; restore into an empty database" >&2
  exit 2
fi
if [ -d "$media" ] && [ -n "$(ls -A "$media")" ]; then
  echo "restore.sh: $media is not empty; restore the private files into an empty folder" >&2
  exit 2
fi
pg_restore --no-owner --no-privileges --exit-on-error --dbname "$DATABASE_URL" "$src/database.dump"
mkdir -p "$media"
tar -C "$media" -xzf "$src/private-files.tar.gz"
echo "restored $src into the database and $media"
