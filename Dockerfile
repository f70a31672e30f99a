# One image for web, worker, housekeeping and the migrate job.
# BASE_IMAGE: any Debian-based image with Python 3.11 and its venv module.
# Where no image registry can be reached, scripts/image_build.sh makes one
# with debootstrap from Debian's packages and builds this file on it.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
# The app's packages go to a venv: Debian's own Python refuses pip installs
# into its site-packages (PEP 668), and the venv behaves the same on any base.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
WORKDIR /app
# torch's CPU build from PyTorch's CPU index first: PyPI's default Linux wheel is
# the CUDA build (several GB) that a CPU-only worker never uses. WHEELS: a
# folder of wheels mounted at build time (buildah bud --volume) to install
# from instead, with no index at all (scripts/image_build.sh fills it).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG WHEELS=""
COPY requirements.txt .
RUN python3 -m venv /opt/venv \
 && if [ -n "${WHEELS}" ]; then \
      pip install --no-cache-dir --no-index --find-links "${WHEELS}" -r requirements.txt; \
    else \
      pip install --no-cache-dir torch==2.13.0 --index-url "${TORCH_INDEX_URL}" \
      && pip install --no-cache-dir -r requirements.txt; \
    fi
COPY . .
RUN REALICU_VAR_DIR=/tmp/build DJANGO_SECRET_KEY=build python manage.py collectstatic --noinput \
 && rm -rf /tmp/build
# Not root: the processes own only /data (the volume), not the code.
RUN groupadd --system --gid 10001 realicu \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data realicu \
 && mkdir -p /data && chown 10001:10001 /data
USER 10001:10001
EXPOSE 8000
# Process and thread counts come from gunicorn.conf.py (WEB_CONCURRENCY overrides).
CMD ["gunicorn", "-c", "gunicorn.conf.py", "--bind", "0.0.0.0:8000"]
