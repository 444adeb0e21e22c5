#!/bin/sh
# The secrets compose.yaml mounts: the Postgres password, the workers' configuration file
# (the store URL with that password) and a token file (one token a line). Run once.
set -eu
cd "$(dirname "$0")/.."
# The folder is yours alone; the files in it are readable by the containers' users
# (compose bind-mounts each file as it is: the image runs as uid 10001).
mkdir -p -m 700 secrets
umask 022
new() { python3 -c 'import secrets; print(secrets.token_urlsafe(32))'; }
[ -s secrets/pg_password ] || new > secrets/pg_password
printf 'store = "postgresql://llmc:%s@postgres:5432/llmc"\n' "$(cat secrets/pg_password)" \
  > secrets/llmc.toml
[ -s secrets/tokens ] || new > secrets/tokens
echo "Token for clients and the page: secrets/tokens"
