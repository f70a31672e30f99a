"""gunicorn settings of RealICU Web (read from the working directory, or with
``gunicorn -c gunicorn.conf.py``); WEB_CONCURRENCY and GUNICORN_THREADS override
the sizes.

Sized for latency of the small, frequent requests (draft saves every few seconds
per physician) next to heavy page renders: Python threads of one process share
one interpreter lock, so a save waiting for its database answers queues behind
a render in the same process; separate processes are scheduled by the kernel,
which favours the one that mostly waits. Hence a few processes per core with
few threads each, rather than many threads in few processes.
"""

import multiprocessing
import os

_cores = multiprocessing.cpu_count()

wsgi_app = "realicu_web.wsgi"
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * _cores + 1))
threads = int(os.environ.get("GUNICORN_THREADS", 2))
# Longer than the 2 s between a physician's draft saves, so a browser's idle
# connection is not closed just as it is reused.
keepalive = 10
timeout = 60
graceful_timeout = 20
