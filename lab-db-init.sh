#!/bin/sh
# The lab's database and its role (compose.yaml runs this once, when PostgreSQL's data folder is new, as the
# superuser, from /docker-entrypoint-initdb.d/). The lab connects as `ssdbench`, which owns the database `lab`
# and nothing else: it migrates and uses the lab's own tables, and cannot make roles or databases, read other
# databases, or run programs on the database's host, as a superuser can (docs/lab.md, Least privilege).
# webui/tests/test_lab_trust.py runs this file, as it is, on a real PostgreSQL.
set -eu
psql -v ON_ERROR_STOP=1 -v password="$LAB_DB_PASSWORD" --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
CREATE ROLE ssdbench LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'password';
CREATE DATABASE lab OWNER ssdbench;
REVOKE ALL ON DATABASE lab FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE lab TO ssdbench;
SQL
