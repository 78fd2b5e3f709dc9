#!/bin/sh
# Run once by Patroni on the member that initialises the cluster (bootstrap.post_bootstrap),
# as the superuser: the role and database banditd uses. $1 is a connection string to the new
# primary. (Patroni 3.0 dropped bootstrap.users, so roles are created here.)
set -eu
psql "$1" -v ON_ERROR_STOP=1 -v pw="$BANDIT_DB_PASSWORD" <<'SQL'
CREATE ROLE bandit LOGIN PASSWORD :'pw';
CREATE DATABASE bandit OWNER bandit;
SQL
