#!/usr/bin/env bash
# Make sure what the test suite needs is installed and running: PostgreSQL and
# Redis on 127.0.0.1, and Debian's Chromium for the browser tests. Starts what is
# installed but stopped, installs what is missing (needs root, as on CI).
set -euo pipefail

apt_updated=0
apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "cannot install $*: no apt-get on this machine" >&2; return 1
  fi
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# PostgreSQL
if ! port_open 5432; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    echo "installing PostgreSQL"; apt_install postgresql
    conf=$(ls -d /etc/postgresql/*/main | head -1)
    sed -i 's/^\(host\|local\).*$/# &/' "$conf/pg_hba.conf"
    printf 'local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n' >> "$conf/pg_hba.conf"
  fi
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
  for _ in $(seq 30); do port_open 5432 && break; sleep 1; done
fi
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE test" >/dev/null

# Redis
if ! port_open 6379; then
  command -v redis-server >/dev/null || { echo "installing Redis"; apt_install redis-server; }
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
    --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 30); do port_open 6379 && break; sleep 1; done
fi

# Chromium for the browser tests (Playwright drives the system browser).
if ! command -v chromium >/dev/null; then
  echo "installing Chromium"; apt_install chromium
fi
echo "services ready: PostgreSQL, Redis, Chromium"
