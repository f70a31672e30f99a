"""gunicorn settings of RealICU Web (read from the working directory, or with
``gunicorn -c gunicorn.conf.py``); WEB_CONCURRENCY and GUNICORN_THREADS override
the sizes.

Sized for latency of the small, frequent requests (draft saves every few seconds
per physician) next to heavy page renders: Python threads of one process share
one interpreter lock, so a save waiting for its database answers queues behind
a render in the same process; separate processes are scheduled by the kernel,
which favours the one that mostly waits. Hence a few processes per core with
few threads each, rather than many threads in few processes.

Each process is uvicorn on an asyncio loop (realicu_web.webserver) serving
Django's ASGI handler (realicu_web.handler): headers and bodies arrive on the
loop, within deadlines, before a request takes one of the process's
``threads``, so slow or stalled clients hold sockets, not threads (issue 31).
"""

import multiprocessing
import os

_cores = multiprocessing.cpu_count()

wsgi_app = "realicu_web.asgi:application"
worker_class = "realicu_web.webserver.Worker"
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * _cores + 1))
# Requests running Django's (synchronous) code at once in each process; the
# others wait on the loop, their bodies already read.
threads = int(os.environ.get("GUNICORN_THREADS", 2))
# Connections a process takes requests from at once; beyond, 503. Each holds at
# most 256 KB of a body in memory while it arrives (larger bodies spool to disk).
worker_connections = int(os.environ.get("REALICU_WEB_MAX_CONNECTIONS", 1000))
# Longer than the 2 s between a physician's draft saves, so a browser's idle
# connection is not closed just as it is reused.
keepalive = 10
timeout = 60
graceful_timeout = 20
