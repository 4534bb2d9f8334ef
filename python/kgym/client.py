"""kgym.Client: submit (task, candidate) jobs to a kgym broker, get Results.

Threading model
---------------
One I/O thread per client and process owns the DEALER socket (ZeroMQ
sockets are not thread-safe). Callers on any thread, or on any asyncio
loop, hand it commands through a queue and a wake-up pipe; it resolves
concurrent.futures.Future objects, which asyncio code awaits through
asyncio.wrap_future (so every running loop works, and none is needed).
Done-callbacks of those futures run on the I/O thread: keep them short.

The zmq Context is created on first use, once per process, never at
import. After a fork (multiprocessing, Ray and friends) the child gets a
fresh context, socket and I/O thread on its first call; jobs the parent had
in flight are not the child's and resolve as internal_error ("forked") if
the child looks at them. A Client pickles as its settings, so it can be
shipped to worker processes.

Outcomes
--------
Every submitted job resolves to a Result (kgym.result), failures included:
a verdict from a worker has error == ""; a client-side failure has status
"invalid" (the job cannot be graded: no kernel in the completion, no task,
too large, refused by the broker) or "internal_error" (timeout, broker
lost, client closed, cancelled) with reward None and `error` naming it.
Futures never hold exceptions; a cancelled future raises CancelledError
as usual, and as_completed / astream turn it into a "cancelled" Result.
grade() and agrade() raise a KgymError carrying the Result when `error` is
set, unless raise_on_error=False; a kernel's own failure (compile_error,
incorrect, ...) never raises.

Cancellation: the protocol (docs/protocol.md, version 1) has no CANCEL
command yet. A cancelled or timed-out job is resolved here at once, its
in-flight slot is freed, and its ref is remembered so that a late RESULT is
dropped; the broker still runs it to the end. When the protocol grows a
CANCEL, _IO._cancel is where it gets sent.

Liveness: while it has work, the client sends HEARTBEAT every heartbeat_s;
the broker answers each one. When nothing has come from the broker for
liveness * heartbeat_s, the client closes its socket and connects a fresh
one (a new peer to the broker), resubmits the jobs that were not yet
ACCEPTED, and fails the accepted ones as internal_error "broker_lost"
(their results would go to the old connection), or resubmits those too
with resubmit_accepted=True. After give_up_s of silence every pending job
fails as "broker_lost".
"""

import asyncio
import concurrent.futures
import heapq
import itertools
import logging
import math
import os
import queue
import re
import threading
import time
import uuid
import weakref
from collections import OrderedDict, deque

from . import _wire as W
from .extract import Extraction, extract
from .result import Result
from .tasks import TaskError, make_job, resolve_task, split_opts, task_backend

log = logging.getLogger("kgym")
log.addHandler(logging.NullHandler())       # a library: the application decides what to show

__all__ = ["Client", "KgymFuture", "KgymError", "KgymTimeout", "BrokerLost", "BrokerRefused",
           "InvalidJob", "KgymBusy", "ClientClosed"]


# ---------------------------------------------------------------- errors

class KgymError(Exception):
    """A client-side failure; .result is the Result it produced (or None)."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class KgymTimeout(KgymError, TimeoutError):
    """No result within timeout_s."""


class BrokerLost(KgymError, ConnectionError):
    """The broker stopped answering, or the client was closed or forked."""


class BrokerRefused(KgymError):
    """The broker answered ERROR for the job."""


class InvalidJob(KgymError, ValueError):
    """The job cannot be graded: no kernel in the completion, no task, too large."""


class KgymBusy(KgymError):
    """max_inflight jobs are in flight and the submit was non-blocking."""


class ClientClosed(KgymError, RuntimeError):
    """The client was closed."""


_ERROR_CLASS = {"timeout": KgymTimeout, "broker_lost": BrokerLost, "closed": BrokerLost,
                "forked": BrokerLost, "broker_refused": BrokerRefused, "broker_error": BrokerRefused,
                "extract": InvalidJob, "task": InvalidJob, "encode": InvalidJob,
                "too_large": InvalidJob, "bad_result": KgymError, "cancelled": KgymError}


def error_for(result):
    """The KgymError a failed Result stands for."""
    cls = _ERROR_CLASS.get(result.error, KgymError)
    return cls("%s: %s" % (result.error, result.message), result)


# ---------------------------------------------------------------- per-process zmq

_zmq = None
_ctx = None
_ctx_pid = None
_ctx_lock = threading.Lock()
_graveyard = []         # objects inherited across a fork: never closed in the child
_clients = weakref.WeakSet()


def _zmq_module():
    global _zmq
    if _zmq is None:
        import zmq
        _zmq = zmq
    return _zmq


def _context():
    """This process's zmq Context, created on first use."""
    global _ctx, _ctx_pid
    zmq = _zmq_module()
    with _ctx_lock:
        if _ctx is None or _ctx_pid != os.getpid():
            if _ctx is not None:
                _graveyard.append(_ctx)
            _ctx = zmq.Context()
            _ctx_pid = os.getpid()
        return _ctx


def _after_fork_in_child():
    global _ctx_lock, _default_lock
    _ctx_lock = threading.Lock()
    _default_lock = threading.Lock()
    for client in list(_clients):
        client._reinit_locks()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------- slots

class _Slots:
    """Counting semaphore that threads and asyncio tasks can both wait on."""

    def __init__(self, size):
        self.size = size
        self.reset()

    def reset(self):
        self._cond = threading.Condition(threading.Lock())
        self._free = self.size
        self._waiters = []          # (loop, asyncio future)

    @property
    def free(self):
        return self._free

    def try_acquire(self):
        with self._cond:
            if self._free > 0:
                self._free -= 1
                return True
            return False

    def acquire(self, timeout=None):
        with self._cond:
            if not self._cond.wait_for(lambda: self._free > 0, timeout):
                return False
            self._free -= 1
            return True

    def release(self):
        with self._cond:
            self._free = min(self.size, self._free + 1)
            self._cond.notify()
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_wake_async, fut)
            except RuntimeError:        # that loop is closed
                pass

    async def acquire_async(self):
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                if self._free > 0:
                    self._free -= 1
                    return
                fut = loop.create_future()
                self._waiters.append((loop, fut))
            await fut


def _wake_async(fut):
    if not fut.done():
        fut.set_result(None)


# ---------------------------------------------------------------- futures and jobs

class KgymFuture(concurrent.futures.Future):
    """A concurrent.futures.Future whose result is a Result. Attributes: ref
    (the client's job number), index (position in a batch), tag, group,
    trajectory."""

    def __init__(self, ref=0, index=None, tag=None, group=None, trajectory=None):
        super().__init__()
        self.ref = ref
        self.index = index
        self.tag = tag
        self.group = group
        self.trajectory = trajectory

    def outcome(self, timeout=None):
        """The Result, never an exception: a cancelled future gives a
        "cancelled" Result."""
        try:
            return self.result(timeout)
        except concurrent.futures.CancelledError:
            return Result.failure("cancelled", "cancelled by the caller", tag=self.tag,
                                  group=self.group, trajectory=self.trajectory, index=self.index)


class _Job:
    __slots__ = ("ref", "future", "body", "header", "tag", "group", "trajectory", "index",
                 "t0", "timeout_s", "deadline", "accepted", "job_id", "sent", "retries", "resend")

    def __init__(self, ref, future, body, header, tag, group, trajectory, index, timeout_s):
        self.ref = ref
        self.future = future
        self.body = body
        self.header = header
        self.tag = tag
        self.group = group
        self.trajectory = trajectory
        self.index = index
        self.t0 = time.monotonic()
        self.timeout_s = timeout_s
        self.deadline = None
        self.accepted = False
        self.job_id = None
        self.sent = False
        self.retries = 0
        self.resend = False

    def meta(self):
        return dict(tag=self.tag, group=self.group, trajectory=self.trajectory, index=self.index,
                    job=self.job_id)


_ENDPOINT = re.compile(r"^(tcp://[^\s:]+:(\d+|\*)|ipc://\S+|inproc://\S+)$")
_END = object()


# ---------------------------------------------------------------- the I/O side

class _IO:
    """Everything one process's I/O thread owns. Only post() is called from
    other threads."""

    def __init__(self, cfg, pid):
        self.cfg = cfg
        self.pid = pid
        self.client_id = uuid.uuid4().hex
        self.cmdq = queue.SimpleQueue()
        self.post_lock = threading.Lock()
        self.open = True                # commands are taken (the wake pipe is open)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.thread = threading.Thread(target=self._main, name="kgym-io", daemon=True)
        self.sock = None
        self.poller = None
        self.jobs = {}                  # ref -> _Job (pending: not resolved)
        self.unsent = deque()
        self.deadlines = []             # heap (deadline, ref)
        self.retries = []               # heap (when, ref): ERROR 429 backoff
        self.abandoned = OrderedDict()  # ref -> time: cancelled or timed out after sending
        self.probes = []                # (future, t0, deadline)
        self.stop = False
        self.closing = False
        self.close_deadline = None
        self.close_event = None
        self.fatal = None
        now = time.monotonic()
        self.last_heard = None
        self.last_hb = 0.0
        self.busy_since = now
        self.connected_at = now
        self.next_reconnect = 0.0
        self.backoff = 1
        self.send_blocked = False
        self.counts = dict(submitted=0, accepted_total=0, completed=0, timeouts=0, cancelled=0,
                           late_results=0, stray=0, malformed=0, reconnects=0, resubmitted=0,
                           overloaded=0)
        self.handlers = {W.ACCEPTED: self._on_accepted, W.RESULT: self._on_result,
                         W.ERROR: self._on_error, W.HEARTBEAT: self._on_heartbeat}

    # -- any thread

    def post(self, cmd):
        """Hand the I/O thread a command. After the thread has stopped, a
        submit or health command is answered here instead."""
        with self.post_lock:
            if self.open:
                self.cmdq.put(cmd)
                try:
                    os.write(self.wake_w, b"\0")
                except (BlockingIOError, OSError):
                    pass
                return
        why = self.fatal or "the client was closed"
        if cmd[0] == "submit":
            self._resolve(cmd[1], Result.failure("broker_lost" if self.fatal else "closed", why,
                                                 **cmd[1].meta()))
        elif cmd[0] == "health" and not cmd[1].done():
            cmd[1].set_result(dict(ok=False, endpoint=self.cfg["endpoint"], error=why))
        elif cmd[0] == "close" and cmd[3] is not None:
            cmd[3].set()

    def start(self):
        self.thread.start()

    # -- I/O thread

    def _main(self):
        zmq = _zmq_module()
        try:
            self.poller = zmq.Poller()
            self.poller.register(self.wake_r, zmq.POLLIN)
            self._open_socket()
            while not self.stop:
                timeout = self._poll_timeout(time.monotonic())
                try:
                    events = dict(self.poller.poll(timeout))
                except zmq.ZMQError as exc:
                    if exc.errno == getattr(zmq, "EINTR", 4):
                        continue
                    raise
                if self.wake_r in events:
                    self._drain_wake()
                self._commands()
                if self.stop:
                    break
                if self.sock is not None and self.sock in events:
                    self._read()
                self._tick(time.monotonic())
        except Exception as exc:            # a bug: fail loudly, never hang callers
            log.exception("kgym client I/O thread failed")
            self.fatal = "kgym client I/O thread failed: %s" % exc
        finally:
            self._shutdown()

    def _open_socket(self):
        zmq = _zmq_module()
        sock = _context().socket(zmq.DEALER)
        sock.setsockopt(zmq.SNDHWM, W.HWM)
        sock.setsockopt(zmq.RCVHWM, W.HWM)
        sock.setsockopt(zmq.MAXMSGSIZE, W.MAX_MSG_SIZE)
        sock.setsockopt(zmq.LINGER, W.DEALER_LINGER_MS)
        try:
            sock.connect(self.cfg["endpoint"])
        except zmq.ZMQError as exc:
            sock.close(0)
            self.fatal = "cannot connect to %s: %s" % (self.cfg["endpoint"], exc)
            log.error("kgym: %s", self.fatal)
            return
        self.sock = sock
        self.poller.register(sock, zmq.POLLIN)

    def _close_socket(self, linger):
        if self.sock is None:
            return
        try:
            self.poller.unregister(self.sock)
        except KeyError:
            pass
        self.sock.close(linger)
        self.sock = None

    def _drain_wake(self):
        try:
            while os.read(self.wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _send(self, command, header=None, body=None):
        """True when queued to the socket; False when it would block."""
        if self.sock is None:
            return False
        zmq = _zmq_module()
        try:
            self.sock.send_multipart(W.pack(command, header, body), zmq.NOBLOCK, copy=False)
            return True
        except zmq.Again:
            return False

    def _busy(self):
        return bool(self.jobs or self.probes)

    def _poll_timeout(self, now):
        if self.send_blocked and self.unsent:
            return 10
        times = []
        if self.deadlines:
            times.append(self.deadlines[0][0])
        if self.retries:
            times.append(self.retries[0][0])
        if self.unsent and self.sock is not None:
            times.append(now)
        if self.probes:
            times.append(min(p[2] for p in self.probes))
        if self._busy():
            hb = self.cfg["heartbeat_s"]
            times.append(self.last_hb + hb)
            quiet = max(self.last_heard or 0.0, self.busy_since, self.connected_at)
            times.append(max(quiet + hb * self.cfg["liveness"], self.next_reconnect))
            times.append(max(self.last_heard or 0.0, self.busy_since) + self.cfg["give_up_s"])
        if self.closing and self.close_deadline is not None:
            times.append(self.close_deadline)
        if self.abandoned:
            times.append(now + 60.0)
        if not times:
            return None
        return max(0, int(math.ceil((min(times) - now) * 1000)))

    def _commands(self):
        while True:
            try:
                cmd = self.cmdq.get_nowait()
            except queue.Empty:
                return
            kind = cmd[0]
            if kind == "submit":
                self._submit(cmd[1])
            elif kind == "cancel":
                self._cancel(cmd[1])
            elif kind == "health":
                self._health(cmd[1], cmd[2])
            elif kind == "close":
                _, wait, timeout_s, event = cmd
                self.close_event = event
                if wait and self.jobs:
                    self.closing = True
                    self.close_deadline = time.monotonic() + (timeout_s or 0)
                else:
                    self.stop = True
                    return

    def _submit(self, job):
        now = time.monotonic()
        if job.future.done():                   # cancelled before it left
            return
        if self.closing or self.stop:
            self._resolve(job, Result.failure("closed", "the client was closed", **job.meta()))
            return
        if self.fatal:
            self._resolve(job, Result.failure("broker_lost", self.fatal, **job.meta()))
            return
        if not self._busy():
            self.busy_since = now
        self.jobs[job.ref] = job
        self.counts["submitted"] += 1
        job.deadline = now + job.timeout_s if job.timeout_s else None
        if job.deadline is not None:
            heapq.heappush(self.deadlines, (job.deadline, job.ref))
        self.unsent.append(job)

    def _cancel(self, ref):
        """The caller cancelled a future: forget the job, drop its result
        when it comes. No CANCEL command exists in protocol version 1."""
        job = self.jobs.pop(ref, None)
        if job is None:
            return
        self.counts["cancelled"] += 1
        if job.sent:
            self._abandon(ref)

    def _abandon(self, ref):
        self.abandoned[ref] = time.monotonic()
        while len(self.abandoned) > 100000:
            self.abandoned.popitem(last=False)

    def _resolve(self, job, result):
        self.jobs.pop(job.ref, None)
        if result.latency_s is None:
            result.latency_s = time.monotonic() - job.t0
        for name in ("tag", "group", "trajectory", "index"):
            if getattr(result, name) is None:
                setattr(result, name, getattr(job, name))
        if result.job is None:
            result.job = job.job_id
        try:
            job.future.set_result(result)
        except concurrent.futures.InvalidStateError:     # cancelled meanwhile
            pass

    def _read(self):
        zmq = _zmq_module()
        for _ in range(1000):
            try:
                frames = self.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            now = time.monotonic()
            try:
                command, header, body = W.unpack(frames)
            except W.WireError as exc:
                self.counts["malformed"] += 1
                log.warning("kgym: malformed message from the broker: %s", exc)
                continue
            self.last_heard = now
            self.backoff = 1
            handler = self.handlers.get(command)
            if handler is None:
                log.debug("kgym: ignoring %s from the broker", W.NAMES.get(command, command))
                continue
            handler(header, body, now)

    def _on_accepted(self, header, body, now):
        ref = W.header_int(header, "ref")
        job = self.jobs.get(ref)
        if job is not None:
            job.accepted = True
            job.job_id = W.header_int(header, "job") or None
            self.counts["accepted_total"] += 1

    def _on_result(self, header, body, now):
        ref = W.header_int(header, "ref")
        job = self.jobs.get(ref)
        if job is None:
            if self.abandoned.pop(ref, None) is not None:
                self.counts["late_results"] += 1
            else:
                self.counts["stray"] += 1
            return
        self.counts["completed"] += 1
        job.job_id = W.header_int(header, "job") or job.job_id
        try:
            data = W.decode_body(body)
        except W.WireError as exc:
            self._resolve(job, Result.failure("bad_result", str(exc), **job.meta()))
            return
        data.setdefault("job", job.job_id)
        queue_s = W.header_real(header, "queue_s")
        if queue_s is not None:
            data["queue_s"] = queue_s
        worker = W.header_text(header, "worker")
        if worker:
            data["worker"] = worker
        self._resolve(job, Result.from_map(data))

    def _on_error(self, header, body, now):
        code = W.header_int(header, "code")
        reason = W.header_text(header, "reason")
        ref = W.header_int(header, "ref")
        job = self.jobs.get(ref) if ref else None
        if job is None:
            if ref and self.abandoned.pop(ref, None) is not None:
                return
            log.warning("kgym: broker error %d: %s", code, reason)
            return
        if code == W.ERR_OVERLOADED:
            self.counts["overloaded"] += 1
            job.sent = False
            job.accepted = False
            job.retries += 1
            delay = min(0.05 * (2 ** min(job.retries, 6)), 2.0)
            heapq.heappush(self.retries, (now + delay, job.ref))
            return
        error = "broker_refused" if code in (W.ERR_MALFORMED, W.ERR_TOO_LARGE) else "broker_error"
        self._resolve(job, Result.failure(error, "the broker answered ERROR %d: %s" % (code, reason),
                                          **job.meta()))

    def _on_heartbeat(self, header, body, now):
        probes, self.probes = self.probes, []
        for fut, t0, _ in probes:
            if not fut.done():
                fut.set_result(self._stats(now, True, now - t0))

    def _health(self, fut, timeout_s):
        now = time.monotonic()
        if not self._busy():
            self.busy_since = now
        self.probes.append((fut, now, now + timeout_s))
        if self.fatal:
            self.probes.pop()
            fut.set_result(self._stats(now, False, None, self.fatal))
            return
        self._send(W.HEARTBEAT, {"client": self.client_id})
        self.last_hb = now

    def _stats(self, now, ok, rtt, why=""):
        accepted = sum(1 for j in self.jobs.values() if j.accepted)
        stats = dict(ok=ok, endpoint=self.cfg["endpoint"], rtt_s=rtt, inflight=len(self.jobs),
                     accepted=accepted, waiting=len(self.jobs) - accepted,
                     abandoned=len(self.abandoned),
                     silence_s=None if self.last_heard is None else now - self.last_heard,
                     pid=self.pid, client_id=self.client_id)
        stats.update(self.counts)
        if why:
            stats["error"] = why
        return stats

    def _tick(self, now):
        cfg = self.cfg
        # Client-side deadlines.
        while self.deadlines and self.deadlines[0][0] <= now:
            deadline, ref = heapq.heappop(self.deadlines)
            job = self.jobs.get(ref)
            if job is None or job.deadline != deadline:
                continue
            self.counts["timeouts"] += 1
            if job.accepted:
                why = "no result for job %s within %.3g s" % (job.job_id, job.timeout_s)
            elif self.last_heard is not None:
                why = "the broker did not accept the job within %.3g s" % job.timeout_s
            else:
                why = "no answer from the broker at %s within %.3g s" % (cfg["endpoint"], job.timeout_s)
            if job.sent:
                self._abandon(ref)
            self._resolve(job, Result.failure("timeout", why, **job.meta()))
        # ERROR 429: resubmit after a backoff.
        while self.retries and self.retries[0][0] <= now:
            _, ref = heapq.heappop(self.retries)
            job = self.jobs.get(ref)
            if job is not None and not job.sent:
                job.resend = True
                self.unsent.append(job)
        # Send what waits.
        self.send_blocked = False
        while self.unsent and self.sock is not None:
            job = self.unsent[0]
            if self.jobs.get(job.ref) is not job or job.sent:
                self.unsent.popleft()
                continue
            header = dict(job.header, ref=job.ref, client=self.client_id)
            if job.resend:
                header["retry"] = 1
            if not self._send(W.SUBMIT, header, job.body):
                self.send_blocked = True
                break
            self.unsent.popleft()
            job.sent = True
        if self.fatal and self.jobs:
            self._fail_all("broker_lost", self.fatal)
        # Probes that got no answer.
        if self.probes:
            live = []
            for p in self.probes:
                if p[2] <= now:
                    if not p[0].done():
                        p[0].set_result(self._stats(now, False, None, "no HEARTBEAT from the broker"))
                else:
                    live.append(p)
            self.probes = live
        if self.abandoned:
            horizon = now - 3600.0
            while self.abandoned and next(iter(self.abandoned.values())) < horizon:
                self.abandoned.popitem(last=False)
        if self._busy():
            hb = cfg["heartbeat_s"]
            if now - self.last_hb >= hb:
                self._send(W.HEARTBEAT, {"client": self.client_id})
                self.last_hb = now
            heard = max(self.last_heard or 0.0, self.busy_since)
            if self.jobs and now - heard > cfg["give_up_s"]:
                self._fail_all("broker_lost", "no answer from the broker at %s for %.3g s"
                               % (cfg["endpoint"], now - heard))
            elif now - max(heard, self.connected_at) > hb * cfg["liveness"] and now >= self.next_reconnect:
                self._reconnect(now)
        if self.closing and (not self.jobs or now >= self.close_deadline):
            self.stop = True

    def _reconnect(self, now):
        cfg = self.cfg
        log.warning("kgym: no answer from the broker at %s for %.1f s: reconnecting with a fresh "
                    "socket", cfg["endpoint"], now - max(self.last_heard or 0.0, self.busy_since))
        self._close_socket(0)
        self._open_socket()
        self.counts["reconnects"] += 1
        self.connected_at = now
        self.next_reconnect = now + cfg["heartbeat_s"] * cfg["liveness"] * self.backoff
        self.backoff = min(self.backoff * 2, 8)
        self.abandoned.clear()          # their results went to the old connection
        self.unsent.clear()
        for ref in sorted(self.jobs):
            job = self.jobs[ref]
            if job.accepted and not cfg["resubmit_accepted"]:
                self._resolve(job, Result.failure(
                    "broker_lost", "the broker at %s went silent after accepting job %s; its result "
                    "cannot reach a new connection" % (cfg["endpoint"], job.job_id), **job.meta()))
                continue
            if job.sent:
                job.resend = True
                self.counts["resubmitted"] += 1
            job.sent = False
            job.accepted = False
            self.unsent.append(job)

    def _fail_all(self, error, message):
        for job in list(self.jobs.values()):
            self._resolve(job, Result.failure(error, message, **job.meta()))
        self.unsent.clear()

    def _shutdown(self):
        why = self.fatal or "the client was closed"
        error = "broker_lost" if self.fatal else "closed"
        with self.post_lock:            # from now on post() answers for itself
            self.open = False
        while True:                     # submits that never got in
            try:
                cmd = self.cmdq.get_nowait()
            except queue.Empty:
                break
            if cmd[0] == "submit":
                self._resolve(cmd[1], Result.failure(error, why, **cmd[1].meta()))
            elif cmd[0] == "health" and not cmd[1].done():
                cmd[1].set_result(self._stats(time.monotonic(), False, None, why))
            elif cmd[0] == "close":
                self.close_event = cmd[3] or self.close_event
        self._fail_all(error, why)
        for fut, _, _ in self.probes:
            if not fut.done():
                fut.set_result(self._stats(time.monotonic(), False, None, why))
        self.probes = []
        if self.sock is not None:
            self._send(W.DISCONNECT, {"reason": "client closed"})
            self._close_socket(W.DEALER_LINGER_MS)
        for fd in (self.wake_r, self.wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stop = True
        if self.close_event is not None:
            self.close_event.set()


# ---------------------------------------------------------------- the client

class Client:
    """A connection to a kgym broker, safe to share between threads and
    asyncio loops.

    endpoint        the broker's client endpoint (tcp://host:5555); default
                    $KGYM_BROKER
    timeout_s       client-side limit per job, from submit to result; a job
                    over it resolves as internal_error "timeout" (reward
                    None; a kernel's own timeout is status "timeout")
    max_inflight    jobs submitted and not yet resolved, at most; submit
                    blocks when full (or raises KgymBusy with block=False)
    block           the default for submit(block=...)
    heartbeat_s, liveness, give_up_s, resubmit_accepted: see the module
                    docstring (reconnects)
    eval, reward    defaults merged into every job's eval and reward
    """

    def __init__(self, endpoint=None, *, timeout_s=600.0, max_inflight=256, block=True,
                 heartbeat_s=1.0, liveness=4, give_up_s=60.0, resubmit_accepted=False,
                 eval=None, reward=None):
        endpoint = endpoint or os.environ.get("KGYM_BROKER")
        if not endpoint:
            raise ValueError("no broker endpoint: pass one (tcp://host:5555) or set KGYM_BROKER")
        if not _ENDPOINT.match(endpoint):
            raise ValueError("%r is not a ZeroMQ endpoint (tcp://host:port, ipc://path)" % endpoint)
        if not 1 <= int(max_inflight) <= 100000:
            raise ValueError("max_inflight must be 1..100000")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError("timeout_s must be > 0 (or None for no client-side limit)")
        if not heartbeat_s > 0 or int(liveness) < 1 or not give_up_s > 0:
            raise ValueError("heartbeat_s and give_up_s must be > 0, liveness >= 1")
        self._cfg = dict(endpoint=endpoint, timeout_s=timeout_s, max_inflight=int(max_inflight),
                         block=bool(block), heartbeat_s=float(heartbeat_s), liveness=int(liveness),
                         give_up_s=float(give_up_s), resubmit_accepted=bool(resubmit_accepted),
                         eval=dict(eval or {}), reward=dict(reward or {}))
        self._lock = threading.Lock()
        self._slots = _Slots(int(max_inflight))
        self._refs = itertools.count(1)
        self._io = None
        self._closed = False
        self._finalizer = None
        _clients.add(self)

    # -- settings, pickling

    @property
    def endpoint(self):
        return self._cfg["endpoint"]

    @property
    def max_inflight(self):
        return self._cfg["max_inflight"]

    def __getstate__(self):
        return dict(self._cfg)

    def __setstate__(self, state):
        state = dict(state)
        self.__init__(state.pop("endpoint"), **state)

    def __repr__(self):
        return "<kgym.Client %s%s>" % (self.endpoint, " closed" if self._closed else "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- process-local I/O

    def _reinit_locks(self):
        """In a forked child, before anything else runs: locks held by the
        parent's threads at the fork would never be released."""
        self._lock = threading.Lock()
        self._slots.reset()

    def _io_for_process(self):
        pid = os.getpid()
        io = self._io
        if io is not None and io.pid == pid and io.open:
            return io
        with self._lock:
            if self._closed:
                raise ClientClosed("the client was closed")
            io = self._io
            if io is None or io.pid != pid or not io.open:     # first use, forked, or crashed
                if io is not None and io.pid != pid:
                    self._forked(io)
                if self._finalizer is not None:
                    self._finalizer.detach()
                io = _IO(self._cfg, pid)
                io.start()
                self._io = io
                self._finalizer = weakref.finalize(self, io.post, ("close", False, None, None))
            return io

    @staticmethod
    def _forked(old):
        """First call in a forked child: the parent's I/O state is dead here."""
        _graveyard.append(old)          # its socket must never be closed from the child
        for job in list(old.jobs.values()):
            try:
                job.future.set_result(Result.failure(
                    "forked", "submitted in the parent process before a fork", **job.meta()))
            except concurrent.futures.InvalidStateError:
                pass
        old.jobs = {}

    # -- submitting

    def _acquire(self, block, block_timeout_s):
        block = self._cfg["block"] if block is None else block
        if block:
            if not self._slots.acquire(block_timeout_s):
                raise KgymBusy("%d jobs in flight for %.3g s" % (self.max_inflight, block_timeout_s))
        elif not self._slots.try_acquire():
            raise KgymBusy("%d jobs in flight (max_inflight)" % self.max_inflight)

    def _prepare(self, task, candidate, opts, index, timeout_s):
        """A _Job ready to send, or the Result of a job that cannot be sent."""
        ev, rw, tag, group, trajectory = split_opts(opts, self._cfg["eval"], self._cfg["reward"])
        group = None if group is None else str(group)
        trajectory = None if trajectory is None else str(trajectory)
        meta = dict(tag=None if tag is None else str(tag), group=group, trajectory=trajectory,
                    index=index)
        try:
            t = resolve_task(task)
            backend = task_backend(t)
        except TaskError as exc:
            return Result.failure("task", str(exc), **meta)
        if isinstance(candidate, Extraction):
            ex = candidate
        elif isinstance(candidate, dict) and ("source" in candidate or "launches" in candidate):
            ex = Extraction(candidate)
        elif isinstance(candidate, (str, dict, list, tuple)):
            ex = extract(candidate, t)
        else:
            raise TypeError("a candidate is a candidate object (dict), a completion (str or chat "
                            "messages) or an Extraction, not %s" % type(candidate).__name__)
        if not ex.ok:
            return Result.failure("extract", "no gradable kernel: %s" % ex.problem,
                                  feedback=ex.feedback, **meta)
        job = make_job(t, ex.candidate, ev, rw, meta["tag"])
        try:
            body = W.encode_body(job)
        except (TypeError, ValueError, OverflowError) as exc:
            return Result.failure("encode", "the job cannot be encoded: %s" % exc, **meta)
        if len(body) > W.MAX_BODY:
            return Result.failure("too_large", "the job is %d bytes encoded, over the %d limit"
                                  % (len(body), W.MAX_BODY), **meta)
        header = {"backend": W.header_str(backend)}
        for key, value in (("tag", meta["tag"]), ("group", group), ("trajectory", trajectory)):
            if value:
                header[key] = W.header_str(value)
        ref = next(self._refs)
        fut = KgymFuture(ref, index, meta["tag"], group, trajectory)
        limit = self._cfg["timeout_s"] if timeout_s is None else timeout_s
        return _Job(ref, fut, body, header, meta["tag"], group, trajectory, index, limit)

    def _submit(self, task, candidate, opts, *, block=None, block_timeout_s=None, timeout_s=None,
                index=None, slot_held=False):
        if self._closed:
            if slot_held:
                self._slots.release()
            raise ClientClosed("the client was closed")
        try:
            prepared = self._prepare(task, candidate, opts, index, timeout_s)
        except BaseException:
            if slot_held:
                self._slots.release()
            raise
        if isinstance(prepared, Result):
            if slot_held:
                self._slots.release()
            if prepared.latency_s is None:
                prepared.latency_s = 0.0
            fut = KgymFuture(0, index, prepared.tag, prepared.group, prepared.trajectory)
            fut.set_result(prepared)
            return fut
        if not slot_held:
            self._acquire(block, block_timeout_s)
        try:
            io = self._io_for_process()
        except BaseException:
            self._slots.release()
            raise
        prepared.future.add_done_callback(self._on_future_done)
        io.post(("submit", prepared))
        return prepared.future

    def _on_future_done(self, fut):
        self._slots.release()
        if fut.cancelled():
            io = self._io
            if io is not None and io.pid == os.getpid() and not io.stop:
                io.post(("cancel", fut.ref))

    def submit(self, task, candidate, *, block=None, block_timeout_s=None, timeout_s=None, **opts):
        """Submit one job; a KgymFuture resolving to a Result.

        task        a task object, JSON text, a path, or a bundled example name
        candidate   a candidate object, or a model's completion (str or chat
                    messages: the kernel is extracted; a completion with no
                    gradable kernel resolves at once as "invalid")
        opts        eval keys (seed=, trials=, warmup=, timed=, timeout=,
                    compile_timeout=, profile=, check_only=, feedback_bytes=)
                    or eval={...};
                    reward={...} or reward_clip=...; tag=; group= and
                    trajectory= (sent in the SUBMIT header for the broker's
                    per-group and per-trajectory bookkeeping, echoed in the
                    Result)
        block       wait for a free slot (default: the client's setting);
                    block_timeout_s bounds the wait (KgymBusy after it)
        timeout_s   this job's client-side limit (default: the client's)
        """
        return self._submit(task, candidate, opts, block=block, block_timeout_s=block_timeout_s,
                            timeout_s=timeout_s)

    def grade(self, task, candidate, *, raise_on_error=True, **opts):
        """Submit and wait; the Result. Raises the KgymError of a client-side
        failure (timeout, broker lost, no kernel in the completion, ...)
        unless raise_on_error=False; never for the kernel's own verdict."""
        fut = self.submit(task, candidate, **opts)
        try:
            result = self._wait(fut, opts.get("timeout_s"))
        except BaseException:
            fut.cancel()
            raise
        if raise_on_error and result.error:
            raise error_for(result)
        return result

    def _wait(self, fut, timeout_s=None):
        limit = timeout_s if timeout_s is not None else self._cfg["timeout_s"]
        try:
            return fut.outcome(None if limit is None else limit + 30.0)
        except concurrent.futures.TimeoutError:     # the I/O thread should have resolved it
            fut.cancel()
            return Result.failure("timeout", "no result within %.3g s" % limit, index=fut.index,
                                  tag=fut.tag, group=fut.group, trajectory=fut.trajectory)

    @staticmethod
    def _spec(item, opts):
        """(task, candidate, merged opts) of one batch item: (task, candidate),
        (task, candidate, opts) or a job-like dict."""
        if isinstance(item, dict):
            if "candidate" not in item or "task" not in item:
                raise TypeError("a batch item dict needs 'task' and 'candidate'")
            task, candidate = item["task"], item["candidate"]
            own = {k: v for k, v in item.items() if k not in ("task", "candidate")}
        elif isinstance(item, (tuple, list)) and len(item) in (2, 3):
            task, candidate = item[0], item[1]
            own = dict(item[2]) if len(item) == 3 and item[2] else {}
        else:
            raise TypeError("a batch item is (task, candidate), (task, candidate, opts) or a dict "
                            "with task and candidate")
        merged = dict(opts)
        for key, value in own.items():
            if key in ("eval", "reward") and isinstance(merged.get(key), dict) and isinstance(value, dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        return task, candidate, merged

    def _submit_item(self, item, index, opts, slot_held):
        task, candidate, merged = self._spec(item, opts)
        timeout_s = merged.pop("timeout_s", None)
        return self._submit(task, candidate, merged, index=index, slot_held=slot_held,
                            timeout_s=timeout_s)

    def as_completed(self, items, *, batch_timeout_s=None, **opts):
        """Results in completion order, each with .index its position in
        items. items: futures from submit(), or job specs ((task,
        candidate), (task, candidate, opts) or dicts), submitted lazily as
        slots free up, so a batch of any length runs in bounded memory.
        opts apply to every job (an item's own opts win). batch_timeout_s
        bounds the whole iteration (TimeoutError); leaving the loop early
        cancels the jobs it submitted."""
        done_q = queue.SimpleQueue()
        deadline = None if batch_timeout_s is None else time.monotonic() + batch_timeout_s
        it = iter(items)
        ours = set()
        pending = 0
        index = 0
        nxt = _END
        exhausted = False
        finished = False
        try:
            while True:
                while True:
                    if nxt is _END and not exhausted:
                        try:
                            nxt = next(it)
                        except StopIteration:
                            exhausted = True
                    if nxt is _END:
                        break
                    if isinstance(nxt, concurrent.futures.Future):
                        fut = nxt
                        if getattr(fut, "index", None) is None:
                            fut.index = index
                    else:
                        if not self._slots.try_acquire():
                            if pending:
                                break
                            left = None if deadline is None else max(0.0, deadline - time.monotonic())
                            if not self._slots.acquire(left):
                                raise TimeoutError("as_completed: no free slot in time")
                        fut = self._submit_item(nxt, index, opts, True)
                        ours.add(fut)
                    nxt = _END
                    index += 1
                    pending += 1
                    fut.add_done_callback(done_q.put)
                if pending == 0:
                    finished = True
                    return
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    fut = done_q.get(timeout=left)
                except queue.Empty:
                    raise TimeoutError("as_completed: %d job(s) unfinished" % pending) from None
                pending -= 1
                ours.discard(fut)
                yield self._outcome(fut)
        finally:
            if not finished:
                for fut in ours:
                    fut.cancel()

    @staticmethod
    def _outcome(fut):
        if isinstance(fut, KgymFuture):
            result = fut.outcome()
        else:
            try:
                result = fut.result()
            except concurrent.futures.CancelledError:
                result = Result.failure("cancelled", "cancelled by the caller")
        if result.index is None:
            result.index = getattr(fut, "index", None)
        return result

    def grade_many(self, items, *, raise_on_error=False, batch_timeout_s=None, **opts):
        """Results of a batch, in input order (see as_completed for items).
        With raise_on_error=True, the first client-side failure is raised
        once every job has finished."""
        by_index = {}
        for result in self.as_completed(items, batch_timeout_s=batch_timeout_s, **opts):
            by_index[result.index] = result
        results = [by_index[i] for i in range(len(by_index))]
        if raise_on_error:
            for r in results:
                if r.error:
                    raise error_for(r)
        return results

    # -- asyncio

    async def agrade(self, task, candidate, *, raise_on_error=True, timeout_s=None, **opts):
        """grade() for asyncio: waits for a slot and the result without
        blocking the running loop. Cancelling the awaiting task cancels the
        job (resolved locally; see the module docstring)."""
        await self._slots.acquire_async()
        fut = self._submit(task, candidate, opts, slot_held=True, timeout_s=timeout_s)
        result = await asyncio.wrap_future(fut)
        if raise_on_error and result.error:
            raise error_for(result)
        return result

    async def astream(self, items, **opts):
        """Async generator of Results in completion order (.index = position
        in items); items may be an iterable or an async iterable of job
        specs. Submits lazily; leaving early cancels what is still running."""
        loop = asyncio.get_running_loop()
        done_q = asyncio.Queue()
        aiter_ = hasattr(items, "__aiter__")
        it = items.__aiter__() if aiter_ else iter(items)
        pending = set()
        index = 0
        exhausted = False
        nxt = _END

        def on_done(fut):
            try:
                loop.call_soon_threadsafe(done_q.put_nowait, fut)
            except RuntimeError:
                pass

        try:
            while True:
                while True:
                    if nxt is _END and not exhausted:
                        try:
                            nxt = (await it.__anext__()) if aiter_ else next(it)
                        except (StopIteration, StopAsyncIteration):
                            exhausted = True
                    if nxt is _END:
                        break
                    if not self._slots.try_acquire():
                        if pending:
                            break
                        await self._slots.acquire_async()
                    fut = self._submit_item(nxt, index, opts, True)
                    nxt = _END
                    index += 1
                    pending.add(fut)
                    fut.add_done_callback(on_done)
                if not pending:
                    return
                fut = await done_q.get()
                pending.discard(fut)
                yield self._outcome(fut)
        finally:
            for fut in pending:
                fut.cancel()

    async def agrade_many(self, items, *, raise_on_error=False, **opts):
        """grade_many() for asyncio: Results in input order."""
        by_index = {}
        async for result in self.astream(items, **opts):
            by_index[result.index] = result
        results = [by_index[i] for i in range(len(by_index))]
        if raise_on_error:
            for r in results:
                if r.error:
                    raise error_for(r)
        return results

    # -- health and closing

    def health(self, timeout_s=5.0):
        """A HEARTBEAT round trip: a dict with ok (the broker answered),
        rtt_s, inflight (jobs pending here), accepted, waiting (not yet
        accepted), abandoned (cancelled or timed out, result still due),
        counters (submitted, completed, timeouts, reconnects, ...)."""
        if self._closed:
            return dict(ok=False, endpoint=self.endpoint, error="the client was closed")
        fut = concurrent.futures.Future()
        self._io_for_process().post(("health", fut, float(timeout_s)))
        try:
            return fut.result(timeout_s + 5.0)
        except concurrent.futures.TimeoutError:
            return dict(ok=False, endpoint=self.endpoint, error="the client's I/O thread is stuck")

    async def ahealth(self, timeout_s=5.0):
        """health() for asyncio."""
        if self._closed:
            return dict(ok=False, endpoint=self.endpoint, error="the client was closed")
        fut = concurrent.futures.Future()
        self._io_for_process().post(("health", fut, float(timeout_s)))
        return await asyncio.wrap_future(fut)

    def close(self, wait=False, timeout_s=30.0):
        """Stop: with wait=True, first wait (up to timeout_s) for the jobs in
        flight; what is left resolves as internal_error "closed". Sends
        DISCONNECT (the broker drops this client's queued jobs)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            io = self._io
        if self._finalizer is not None:
            self._finalizer.detach()
        if io is None or io.pid != os.getpid() or not io.thread.is_alive():
            return
        event = threading.Event()
        io.post(("close", bool(wait), timeout_s, event))
        if threading.current_thread() is not io.thread:
            event.wait((timeout_s if wait else 0) + 5.0)

    @property
    def closed(self):
        return self._closed


_default = None
_default_lock = threading.Lock()


def default_client(**kwargs):
    """The process-wide Client (endpoint from $KGYM_BROKER unless given the
    first time). Adapters use it when no client is passed."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Client(**kwargs)
        return _default


def set_default_client(client):
    """Make client the one default_client() returns (None to forget it)."""
    global _default
    with _default_lock:
        _default = client
