# One image for web, worker, beat and the migrate job.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.txt .
# torch's CPU build from PyTorch's CPU index first: PyPI's default Linux wheel is
# the CUDA build (several GB) that a CPU-only worker never uses.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
 && pip install --no-cache-dir -r requirements.txt
COPY . .
RUN REALICU_VAR_DIR=/tmp/build DJANGO_SECRET_KEY=build python manage.py collectstatic --noinput
# Not root: the processes own only /data (the volume), not the code.
RUN useradd --system --uid 10001 --home-dir /data realicu \
 && mkdir -p /data && chown realicu /data
USER realicu
EXPOSE 8000
# Process and thread counts come from gunicorn.conf.py (WEB_CONCURRENCY overrides).
CMD ["gunicorn", "-c", "gunicorn.conf.py", "--bind", "0.0.0.0:8000"]
