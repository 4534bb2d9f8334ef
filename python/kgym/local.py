"""LocalCluster: a kgym-broker and N kgym-worker processes on loopback.

For tests, examples and trying things out on one machine:

    with LocalCluster(workers=1, backend="cpu") as cluster:
        client = kgym.Client(cluster.endpoint)

Binaries come from a meson build folder: build_dir, else $KGYM_BUILD_DIR,
else build/ at the repository root.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path


def find_build_dir(build_dir=None):
    """The build folder to take binaries from (it may not exist)."""
    if build_dir:
        return Path(build_dir)
    env = os.environ.get("KGYM_BUILD_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "build"


def binaries(build_dir=None):
    """(broker, worker) paths; FileNotFoundError naming what is missing."""
    root = find_build_dir(build_dir)
    broker = root / "broker" / "kgym-broker"
    worker = root / "worker" / "kgym-worker"
    missing = [str(p) for p in (broker, worker) if not os.access(p, os.X_OK)]
    if missing:
        raise FileNotFoundError("kgym binaries not found: %s (build with `meson setup build && "
                                "ninja -C build`, or set KGYM_BUILD_DIR)" % ", ".join(missing))
    return broker, worker


class LocalCluster:
    """A broker on 127.0.0.1 (ephemeral ports unless given) and `workers`
    worker processes of `backend`. Logs go to files under a temporary
    folder (self.logs_dir), removed by stop() unless keep_logs."""

    def __init__(self, workers=1, backend="cpu", *, build_dir=None, slots=None, heartbeat_ms=None,
                 client_port=None, worker_port=None, broker_args=(), worker_args=(),
                 keep_logs=False, start_timeout_s=20.0):
        self.broker_bin, self.worker_bin = binaries(build_dir)
        self.n_workers = workers
        self.backend = backend
        self.slots = slots
        self.heartbeat_ms = heartbeat_ms
        self.client_port = client_port
        self.worker_port = worker_port
        self.broker_args = list(broker_args)
        self.worker_args = list(worker_args)
        self.keep_logs = keep_logs
        self.start_timeout_s = start_timeout_s
        self.logs_dir = None
        self.broker = None
        self.workers = []
        self.endpoint = None
        self.worker_endpoint = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _spawn(self, argv, log_name):
        log = open(os.path.join(self.logs_dir, log_name), "wb")
        try:
            # Same process group as the caller: a Ctrl-C, or a test harness
            # killing the group, stops the cluster too.
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            log.close()

    def _wait_log(self, name, pattern, proc):
        path = os.path.join(self.logs_dir, name)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            m = re.search(pattern, text)
            if m:
                return m
            if proc.poll() is not None:
                raise RuntimeError("%s exited with %s:\n%s" % (name, proc.returncode, text[-2000:]))
            time.sleep(0.02)
        raise RuntimeError("%s did not start within %.0f s" % (name, self.start_timeout_s))

    def start_broker(self):
        """Start (or restart, on the same ports) the broker. To restart, give
        explicit ports below the kernel's ephemeral range (the default `*`
        picks from 49152 up): a peer reconnecting to a port in that range
        can connect to itself and hold the port while the broker is down."""
        cport = self.client_port or "*"
        wport = self.worker_port or "*"
        argv = [str(self.broker_bin), "--clients", "tcp://127.0.0.1:%s" % cport,
                "--workers", "tcp://127.0.0.1:%s" % wport]
        if self.heartbeat_ms:
            argv += ["--heartbeat", str(self.heartbeat_ms)]
        self.broker = self._spawn(argv + self.broker_args, "broker.log")
        m = self._wait_log("broker.log", r"clients on (\S+), workers on ([^\s,]+)[,\n]", self.broker)
        self.endpoint, self.worker_endpoint = m.group(1), m.group(2)
        self.client_port = int(self.endpoint.rsplit(":", 1)[1])
        self.worker_port = int(self.worker_endpoint.rsplit(":", 1)[1])

    def start(self):
        self.logs_dir = tempfile.mkdtemp(prefix="kgym-local-")
        try:
            self.start_broker()
            for i in range(self.n_workers):
                self.add_worker()
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self):
        i = len(self.workers)
        argv = [str(self.worker_bin), "--broker", self.worker_endpoint, "--backend", self.backend,
                "--name", "local-%d" % i, "--cache", os.path.join(self.logs_dir, "cache-%d" % i)]
        if self.slots:
            argv += ["--slots", str(self.slots)]
        if self.heartbeat_ms:
            argv += ["--heartbeat", str(self.heartbeat_ms)]
        name = "worker-%d.log" % i
        proc = self._spawn(argv + self.worker_args, name)
        self.workers.append(proc)
        self._wait_log(name, r"serving", proc)
        return proc

    @staticmethod
    def _end(proc, timeout=5.0):
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def stop_broker(self):
        self._end(self.broker)

    def pause_broker(self):
        """SIGSTOP the broker: it stays bound but answers nothing."""
        self.broker.send_signal(signal.SIGSTOP)

    def resume_broker(self):
        self.broker.send_signal(signal.SIGCONT)

    def stop(self):
        for proc in self.workers:
            self._end(proc)
        self.workers = []
        if self.broker is not None and self.broker.poll() is None:
            try:
                self.broker.send_signal(signal.SIGCONT)
            except OSError:
                pass
        self._end(self.broker)
        self.broker = None
        if self.logs_dir and not self.keep_logs:
            shutil.rmtree(self.logs_dir, ignore_errors=True)

    def log(self, name="broker.log"):
        with open(os.path.join(self.logs_dir, name), "rb") as f:
            return f.read().decode("utf-8", "replace")
