"""Shared test setup: the package on sys.path, one local kgym cluster.

The cluster (a kgym-broker and one CPU kgym-worker from $KGYM_BUILD_DIR,
default build/) starts on first use and stops at exit, so every test module
shares it. Tests that need it skip, saying why, when the binaries are
missing.
"""

import atexit
import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import kgym                      # noqa: E402
from kgym.local import LocalCluster, binaries, find_build_dir  # noqa: E402

_cluster = None
_lock = threading.Lock()

#  Cheap settings: one correctness trial, short timing.
FAST = {"trials": 1, "timed": 2, "warmup": 0}
CHECK = {"trials": 1, "check_only": True}


def build_dir():
    return find_build_dir(os.environ.get("KGYM_BUILD_DIR") or os.path.join(REPO, "build"))


def require_binaries():
    try:
        binaries(build_dir())
    except FileNotFoundError as exc:
        raise unittest.SkipTest(str(exc))


def python_backend():
    """True when this build's workers have the python backend (PyTorch
    tasks): kgym-worker --help lists its backends."""
    import subprocess
    require_binaries()
    worker = os.path.join(str(build_dir()), "worker", "kgym-worker")
    out = subprocess.run([worker, "--help"], capture_output=True, text=True, timeout=30)
    #  Each backend's line ends with its languages: "... (c, python)".
    import re
    return re.search(r"\((?:[a-z]+, )*python(?:, [a-z]+)*\)", out.stdout + out.stderr) is not None


def cluster():
    """The shared cluster (started on first call)."""
    global _cluster
    require_binaries()
    with _lock:
        if _cluster is None:
            c = LocalCluster(workers=1, build_dir=build_dir())
            c.start()
            atexit.register(c.stop)
            _cluster = c
        return _cluster


def free_port(exclude=()):
    """A free TCP port on 127.0.0.1 below the kernel's ephemeral range, for a
    broker that restarts on the same port: a client reconnecting to a port
    inside the ephemeral range can connect to itself (TCP self-connect) and
    hold the port while the broker is down."""
    import random
    import socket
    for _ in range(200):
        port = random.randint(20000, 30000)
        if port in exclude:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


def candidate(task, name):
    return kgym.example_candidates(task)[name]


def completion_of(cand, lang="c"):
    """A bundled candidate as a model would write it."""
    import json
    plan = {k: v for k, v in cand.items() if k != "source"}
    return "```%s\n%s\n```\n```json\n%s\n```\n" % (lang, cand["source"], json.dumps(plan))
