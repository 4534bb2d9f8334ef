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

Connecting: ZeroMQ retries a connection silently, so the I/O thread checks
for itself (kgym._link): a broker host that does not resolve, a handshake
the broker refuses (the socket monitor's HANDSHAKE_FAILED_* events: our
CURVE key), or no connection within connect_timeout_s fails what waits as
internal_error "unreachable" or "unauthorized" with the reason, logged
once; until a handshake completes, new work fails at once the same way.
ERROR 503 (no connected worker serves the job's backend) is a warning: the
job stays queued; logged once per backend, future.unserved, on_unserved.

Cancellation: a cancelled or timed-out job is resolved here at once and its
in-flight slot is freed. If the broker had it, the client sends CANCEL {ref,
job, client} (docs/protocol.md 14.2) with the job id from ACCEPTED, or, when
the ACCEPTED has not come yet, as soon as it comes; the broker's DONE reply
is consumed here (counters cancel_sent, cancel_done: cancelled at the
broker, cancel_missed: it had finished already). Its ref is remembered so
that a RESULT that still comes (one that crossed the CANCEL, or from a
broker without CANCEL, which answers ERROR 401) is dropped (late_results).

Queries (14.3) and group summaries (14.4): QUERY goes out through the I/O
thread like everything else, its ANSWER (or ERROR naming its ref) resolves
a future; SUMMARY messages are kept in a bounded dict until
group_summary() takes them, and handed to Client(on_summary=...) first.

Liveness: while it has work, the client sends HEARTBEAT every heartbeat_s;
the broker answers each one. When nothing has come from the broker for
liveness * heartbeat_s, the client closes its socket and connects a fresh
one (a new peer to the broker), resubmits the jobs that were not yet
ACCEPTED, and fails the accepted ones as internal_error "broker_lost"
(their results would go to the old connection), or resubmits those too
with resubmit_accepted=True: SUBMIT carries this process's client id and
retry 1, and the broker answers a job it still has from what it stored
(ACCEPTED with the same job id, then its RESULT; docs/protocol.md 7.3).
After give_up_s of silence every pending job fails as "broker_lost".
"""

import asyncio
import concurrent.futures
import heapq
import itertools
import logging
import math
import operator
import os
import queue
import re
import threading
import time
import uuid
import weakref
from collections import OrderedDict, deque

from . import _link
from . import _wire as W
from .extract import Extraction, extract
from .result import Result
from .tasks import TaskError, make_job, resolve_task, split_opts, task_backend

log = logging.getLogger("kgym")
log.addHandler(logging.NullHandler())       # a library: the application decides what to show

__all__ = ["Client", "KgymFuture", "KgymError", "KgymTimeout", "BrokerLost", "BrokerRefused",
           "BrokerUnreachable", "Unauthorized", "InvalidJob", "KgymBusy", "ClientClosed", "QueryError", "BadQuery", "NotFound",
           "Unsupported", "Conflict", "StateTooLarge", "QueryList"]


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


class BrokerUnreachable(BrokerLost):
    """No connection to the broker came up: its host does not resolve
    (DNS), nothing listens there, or no handshake completes."""


class Unauthorized(BrokerRefused):
    """The broker refused the connection's security handshake: our CURVE
    key is not among its trainer keys, or CURVE is on at one end only, or
    broker_key is not the broker's."""


class InvalidJob(KgymError, ValueError):
    """The job cannot be graded: no kernel in the completion, no task, too large."""


class KgymBusy(KgymError):
    """max_inflight jobs are in flight and the submit was non-blocking."""


class ClientClosed(KgymError, RuntimeError):
    """The client was closed."""


class QueryError(KgymError):
    """The broker answered ERROR to a QUERY: .code and .reason are its.
    .resent is True when the query was sent again after a reconnect (so a
    first copy may have reached the broker and been applied)."""

    resent = False

    def __init__(self, message, code=0, reason=""):
        super().__init__(message)
        self.code = code
        self.reason = reason


class BadQuery(QueryError, ValueError):
    """ERROR 400: an unknown `what` or a bad parameter."""


class NotFound(QueryError, LookupError):
    """ERROR 404: no such job (the broker never had it, or it retired)."""


class Unsupported(QueryError):
    """ERROR 401: a broker older than queries (protocol section 14)."""


class Conflict(QueryError):
    """ERROR 409: a trajectory put with if_version found another version
    (another writer came first; docs/protocol.md 14.6). .version is the
    broker's current version when its reason says it, else None."""

    @property
    def version(self):
        m = re.search(r"at version (\d+)", self.reason or "")
        return int(m.group(1)) if m else None


class StateTooLarge(QueryError, ValueError):
    """ERROR 413: a trajectory state over 1 MiB encoded (raised before
    sending when the client sees it)."""


_QUERY_ERROR_CLASS = {W.ERR_MALFORMED: BadQuery, W.ERR_NOT_FOUND: NotFound,
                      W.ERR_UNKNOWN_COMMAND: Unsupported, W.ERR_CONFLICT: Conflict,
                      W.ERR_TOO_LARGE: StateTooLarge}


def _query_error(code, reason, what, resent=False):
    cls = _QUERY_ERROR_CLASS.get(code, QueryError)
    exc = cls("query %r: the broker answered ERROR %d: %s" % (what, code, reason), code, reason)
    exc.resent = resent
    return exc


class QueryList(list):
    """A list from a query answer; .truncated is True when the broker cut it
    at the query's limit."""

    truncated = False


_ERROR_CLASS = {"timeout": KgymTimeout, "broker_lost": BrokerLost, "closed": BrokerLost,
                "forked": BrokerLost, "broker_refused": BrokerRefused, "broker_error": BrokerRefused,
                "unreachable": BrokerUnreachable, "unauthorized": Unauthorized,
                "extract": InvalidJob, "task": InvalidJob, "encode": InvalidJob,
                "too_large": InvalidJob, "bad_result": KgymError, "cancelled": KgymError}


def _link_exception(error, message):
    """The exception a query or a health probe gets for a link failure."""
    return _ERROR_CLASS.get(error, BrokerLost)(message)


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


def _has_handshake_events():
    """libzmq 4.3 and later report the end of the handshake (and its
    failures); older ones only the TCP connection."""
    return _zmq_module().zmq_version_info() >= (4, 3)


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
    (the client's job number), job (the broker's job id, None until
    ACCEPTED; set even when the future was cancelled first), index
    (position in a batch), tag, group, trajectory, and unserved: None, or
    the broker's reason when it said no connected worker serves the job's
    backend (ERROR 503: the job stays queued and may still be graded)."""

    def __init__(self, ref=0, index=None, tag=None, group=None, trajectory=None):
        super().__init__()
        self.ref = ref
        self.job = None
        self.index = index
        self.tag = tag
        self.group = group
        self.trajectory = trajectory
        self.unserved = None

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
                 "t0", "timeout_s", "deadline", "accepted", "job_id", "sent", "retries", "resend",
                 "unserved")

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
        self.unserved = False

    def meta(self):
        return dict(tag=self.tag, group=self.group, trajectory=self.trajectory, index=self.index,
                    job=self.job_id)


class _Query:
    __slots__ = ("ref", "future", "what", "body", "timeout_s", "deadline", "sent", "resent")

    def __init__(self, ref, future, what, body, timeout_s):
        self.ref = ref
        self.future = future
        self.what = what
        self.body = body
        self.timeout_s = timeout_s
        self.deadline = None
        self.sent = False
        self.resent = False     # sent again after a reconnect


def _settle(fut, result=None, exc=None):
    """Resolve a concurrent future unless its caller cancelled it already."""
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


class _Summaries:
    """SUMMARY messages by group, kept until taken (at most `limit`, oldest
    dropped), and the callers waiting for them. deliver() runs on the I/O
    thread; take() and forget() on any."""

    def __init__(self, limit=4096, callback=None):
        self.limit = limit
        self.callback = callback
        self.reset()

    def reset(self):
        self.lock = threading.Lock()
        self.kept = OrderedDict()       # group -> summary dict
        self.waiters = {}               # group -> [Future]

    def deliver(self, group, summary):
        with self.lock:
            taken = False
            for fut in self.waiters.pop(group, ()):
                try:
                    fut.set_result(summary)
                    taken = True
                except concurrent.futures.InvalidStateError:    # cancelled: gave up
                    pass
            if not taken:
                self.kept.pop(group, None)          # a newer summary of the group replaces it
                self.kept[group] = summary
                while len(self.kept) > self.limit:
                    self.kept.popitem(last=False)
        if self.callback is not None:
            try:
                self.callback(summary)
            except Exception:                       # the caller's bug must not stop the I/O thread
                log.exception("kgym: on_summary callback failed")

    def take(self, group):
        """A future of the group's summary: done at once when one is kept."""
        fut = concurrent.futures.Future()
        with self.lock:
            if group in self.kept:
                fut.set_result(self.kept.pop(group))
            else:
                self.waiters.setdefault(group, []).append(fut)
        return fut

    def forget(self, group, fut):
        with self.lock:
            waiting = self.waiters.get(group)
            if waiting and fut in waiting:
                waiting.remove(fut)
                if not waiting:
                    del self.waiters[group]

    def fail(self, exc):
        with self.lock:
            waiters, self.waiters = self.waiters, {}
        for futs in waiters.values():
            for fut in futs:
                _settle(fut, exc=exc)


_END = object()


# ---------------------------------------------------------------- the I/O side

class _IO:
    """Everything one process's I/O thread owns. Only post() is called from
    other threads."""

    def __init__(self, cfg, pid, refs=None, summaries=None):
        self.cfg = cfg
        self.pid = pid
        self.refs = refs if refs is not None else itertools.count(1)   # shared with the Client
        self.summaries = summaries if summaries is not None else _Summaries()
        self.client_id = uuid.uuid4().hex
        self.cmdq = queue.SimpleQueue()
        self.post_lock = threading.Lock()
        self.open = True                # commands are taken (the wake pipe is open)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.thread = threading.Thread(target=self._main, name="kgym-io", daemon=True)
        self.sock = None
        self.monitor = None             # the socket's monitor (PAIR): connection events
        self.poller = None
        self.jobs = {}                  # ref -> _Job (pending: not resolved)
        self.unsent = deque()
        self.deadlines = []             # heap (deadline, ref)
        self.retries = []               # heap (when, ref): ERROR 429 backoff
        self.abandoned = OrderedDict()  # ref -> [time, job id or None, future]: cancelled or
                                        # timed out after sending; CANCEL once the job id is known
        self.cancels = OrderedDict()    # CANCEL ref -> (job ref, job id, time): DONE due
        self.queries = {}               # QUERY ref -> _Query (ANSWER due)
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
        self.link_up = False            # the current socket completed a handshake
        self.ever_up = False            # some socket of this I/O did, or the broker was heard
        self.link_error = None          # (error, message): why nothing reaches the broker now
        self.unserved_backends = set()  # backends (or ref-less reasons) whose 503 was logged
        self.counts = dict(submitted=0, accepted_total=0, completed=0, timeouts=0, cancelled=0,
                           late_results=0, stray=0, malformed=0, reconnects=0, resubmitted=0,
                           overloaded=0, cancel_sent=0, cancel_done=0, cancel_missed=0,
                           cancel_unsupported=0, queries=0, summaries=0, unserved=0,
                           link_errors=0)
        self.handlers = {W.ACCEPTED: self._on_accepted, W.RESULT: self._on_result,
                         W.ERROR: self._on_error, W.HEARTBEAT: self._on_heartbeat,
                         W.DONE: self._on_done, W.ANSWER: self._on_answer,
                         W.SUMMARY: self._on_summary}

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
        elif cmd[0] == "query":
            _settle(cmd[1].future, exc=self._gone_error(why))
        elif cmd[0] == "close" and cmd[3] is not None:
            cmd[3].set()

    def _gone_error(self, why):
        return BrokerLost(why) if self.fatal else ClientClosed(why)

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
                if self.monitor is not None and self.monitor in events:
                    self._read_monitor()
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
        endpoint = self.cfg["endpoint"]
        sock = _context().socket(zmq.DEALER)
        sock.setsockopt(zmq.SNDHWM, W.HWM)
        sock.setsockopt(zmq.RCVHWM, W.HWM)
        sock.setsockopt(zmq.MAXMSGSIZE, W.MAX_MSG_SIZE)
        sock.setsockopt(zmq.LINGER, W.DEALER_LINGER_MS)
        curve = self.cfg.get("curve")
        try:
            if curve is not None:
                sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = curve
            monitor = sock.get_monitor_socket()
        except zmq.ZMQError as exc:
            sock.close(0)
            self.fatal = "cannot set up a socket for %s: %s" % (endpoint, exc)
            log.error("kgym: %s", self.fatal)
            return
        try:
            sock.connect(endpoint)
        except zmq.ZMQError as exc:
            self._drop_monitor(sock, monitor)
            sock.close(0)
            self.fatal = "cannot connect to %s: %s" % (endpoint, exc)
            log.error("kgym: %s", self.fatal)
            return
        self.sock = sock
        self.monitor = monitor
        self.link_up = False
        self.poller.register(sock, zmq.POLLIN)
        self.poller.register(monitor, zmq.POLLIN)
        if not self.ever_up:
            problem = _link.resolve_problem(endpoint)     # ZeroMQ would retry it silently
            if problem:
                self._link_failed("unreachable", "cannot reach the broker at %s: %s"
                                  % (endpoint, problem))

    @staticmethod
    def _drop_monitor(sock, monitor):
        try:
            sock.disable_monitor()
        except Exception:           # a closed socket: nothing to stop
            pass
        monitor.close(0)

    def _close_socket(self, linger):
        if self.sock is None:
            return
        for s in (self.sock, self.monitor):
            try:
                self.poller.unregister(s)
            except KeyError:
                pass
        self._drop_monitor(self.sock, self.monitor)
        self.monitor = None
        self.link_up = False
        self.sock.close(linger)
        self.sock = None

    # -- the link: monitor events, and failing fast when nothing gets through

    def _read_monitor(self):
        zmq = _zmq_module()
        from zmq.utils.monitor import recv_monitor_message
        for _ in range(1000):
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            except Exception as exc:                # a malformed event: not ours to die of
                log.debug("kgym: unreadable monitor event: %s", exc)
                return
            self._on_link_event(event.get("event"), event.get("value"))

    def _on_link_event(self, kind, value):
        zmq = _zmq_module()
        if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._link_ok()
        elif kind == zmq.EVENT_CONNECTED and not _has_handshake_events():
            self._link_ok()
        elif kind == zmq.EVENT_DISCONNECTED:
            self.link_up = False
        elif kind in (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                      zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
            self.link_up = False
            self._link_failed("unauthorized", self._handshake_failure(kind, value))

    def _handshake_failure(self, kind, value):
        zmq = _zmq_module()
        ep = self.cfg["endpoint"]
        curve = self.cfg.get("curve")
        if kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return ("the broker at %s refused our CURVE key %s (ZAP status %s): it is not among the "
                    "broker's --trainer-keys (a worker's key is not a trainer's)"
                    % (ep, curve[0].decode() if curve else "(none)", value))
        if curve is None:
            return ("the broker at %s closed the connection during the handshake: it probably "
                    "requires CURVE (pass curve_secret= and broker_key=, or set $%s and $%s)"
                    % (ep, _link.CURVE_SECRET_ENV, _link.BROKER_KEY_ENV))
        if kind == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            return ("the CURVE handshake with %s failed (ZMTP protocol error 0x%x): does the broker "
                    "run with --curve-secret?" % (ep, value or 0))
        return ("the broker at %s closed the connection during the CURVE handshake: broker_key is "
                "not its public key, or it runs without --curve-secret" % ep)

    def _link_ok(self):
        self.link_up = True
        self.ever_up = True
        if self.link_error is not None:
            log.warning("kgym: connected to the broker at %s", self.cfg["endpoint"])
            self.link_error = None

    def _link_failed(self, error, message):
        """Nothing gets through to the broker, for a known reason: say it once,
        fail what waits, and fail what comes until the link is back."""
        if self.link_error is None or self.link_error[1] != message:
            log.error("kgym: %s", message)
            self.counts["link_errors"] += 1
        self.link_error = (error, message)
        self._fail_all(error, message)
        exc = _link_exception(error, message)
        queries, self.queries = self.queries, {}
        for q in queries.values():
            _settle(q.future, exc=exc)
        now = time.monotonic()
        for fut, _, _ in self.probes:
            if not fut.done():
                fut.set_result(self._stats(now, False, None, message))
        self.probes = []

    def _connect_deadline(self):
        """When work that found no broker yet gives up waiting for one."""
        if self.ever_up or self.link_error is not None or self.sock is None or not self._busy():
            return None
        return self.busy_since + self.cfg["connect_timeout_s"]

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
        return bool(self.jobs or self.probes or self.queries)

    def _poll_timeout(self, now):
        if self.send_blocked and (self.unsent or self.queries):
            return 10
        times = []
        for q in self.queries.values():
            if q.deadline is not None:
                times.append(q.deadline)
            if not q.sent and self.sock is not None:
                times.append(now)
        if self.deadlines:
            times.append(self.deadlines[0][0])
        if self.retries:
            times.append(self.retries[0][0])
        if self.unsent and self.sock is not None:
            times.append(now)
        if self.probes:
            times.append(min(p[2] for p in self.probes))
        deadline = self._connect_deadline()
        if deadline is not None:
            times.append(deadline)
        if self._busy():
            hb = self.cfg["heartbeat_s"]
            times.append(self.last_hb + hb)
            quiet = max(self.last_heard or 0.0, self.busy_since, self.connected_at)
            times.append(max(quiet + hb * self.cfg["liveness"], self.next_reconnect))
            times.append(max(self.last_heard or 0.0, self.busy_since) + self.cfg["give_up_s"])
        if self.closing and self.close_deadline is not None:
            times.append(self.close_deadline)
        if self.abandoned or self.cancels:
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
            elif kind == "query":
                self._query(cmd[1])
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
        if self.link_error is not None:
            self._resolve(job, Result.failure(*self.link_error, **job.meta()))
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
        """The caller cancelled a future: forget the job, CANCEL it at the
        broker (section 14.2), drop its result if one still comes."""
        job = self.jobs.pop(ref, None)
        if job is None:
            return
        self.counts["cancelled"] += 1
        if job.sent:
            self._abandon(job)

    def _abandon(self, job):
        """A job the broker has (or will have) that nobody waits for now:
        CANCEL it now when accepted, else when its ACCEPTED comes."""
        self.abandoned[job.ref] = [time.monotonic(), job.job_id if job.accepted else None,
                                   job.future]
        while len(self.abandoned) > 100000:
            self.abandoned.popitem(last=False)
        if job.accepted and job.job_id:
            self._send_cancel(job.ref, job.job_id)

    def _send_cancel(self, job_ref, job_id, cref=None):
        """CANCEL {ref, job, client}; its DONE is matched by the new ref."""
        cref = cref or next(self.refs)
        if not self._send(W.CANCEL, {"ref": cref, "job": job_id, "client": self.client_id}):
            return          # would block: the job runs on, its result is dropped here
        self.cancels[cref] = (job_ref, job_id, time.monotonic())
        self.cancels.move_to_end(cref)
        self.counts["cancel_sent"] += 1
        while len(self.cancels) > 100000:
            self.cancels.popitem(last=False)

    def _query(self, q):
        if q.future.done():                     # the caller gave up already
            return
        if self.closing or self.stop or self.fatal:
            _settle(q.future, exc=self._gone_error(self.fatal or "the client was closed"))
            return
        if self.link_error is not None:
            _settle(q.future, exc=_link_exception(*self.link_error))
            return
        now = time.monotonic()
        if not self._busy():
            self.busy_since = now
        q.deadline = None if q.timeout_s is None else now + q.timeout_s
        self.queries[q.ref] = q
        self.counts["queries"] += 1

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
            if not self.link_up:            # a message is a handshake completed
                self._link_ok()
            handler = self.handlers.get(command)
            if handler is None:
                log.debug("kgym: ignoring %s from the broker", W.NAMES.get(command, command))
                continue
            handler(header, body, now)

    def _on_accepted(self, header, body, now):
        ref = W.header_int(header, "ref")
        job_id = W.header_int(header, "job") or None
        job = self.jobs.get(ref)
        if job is not None:
            job.accepted = True
            job.job_id = job_id
            job.future.job = job_id
            self.counts["accepted_total"] += 1
            return
        entry = self.abandoned.get(ref)
        if entry is not None and entry[1] is None and job_id:     # cancelled before ACCEPTED
            entry[1] = job_id
            entry[2].job = job_id
            self._send_cancel(ref, job_id)

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
        if data.get("cached") is True:      # a kept result: its tag was another job's
            data["tag"] = job.tag
        queue_s = W.header_real(header, "queue_s")
        if queue_s is not None:
            data["queue_s"] = queue_s
        worker = W.header_text(header, "worker")
        if worker:
            data["worker"] = worker
            self.unserved_backends.discard(job.header.get("backend"))   # served: say it again next time
        self._resolve(job, Result.from_map(data))

    def _on_error(self, header, body, now):
        code = W.header_int(header, "code")
        reason = W.header_text(header, "reason")
        ref = W.header_int(header, "ref")
        if ref and ref in self.queries:
            q = self.queries.pop(ref)
            _settle(q.future, exc=_query_error(code, reason, q.what, q.resent))
            return
        if ref and self.cancels.pop(ref, None) is not None:
            self.counts["cancel_missed"] += 1
            log.debug("kgym: CANCEL refused: %d %s", code, reason)
            return
        if not ref and code == W.ERR_UNKNOWN_COMMAND and self._unsupported(reason):
            return
        job = self.jobs.get(ref) if ref else None
        if code == W.ERR_UNSERVED:
            self._unserved(job, header, reason)
            return
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

    def _unserved(self, job, header, reason):
        """ERROR 503: no connected worker serves the job's backend. The job
        stays queued (a worker may join; past the broker's grace period the
        broker answers it internal_error), so only say so: once per backend
        in the log, on the job's future, and to on_unserved."""
        if job is None:         # a job no one waits for (cancelled, timed out), or no ref
            if not W.header_int(header, "ref") and reason not in self.unserved_backends:
                self.unserved_backends.add(reason)
                log.warning("kgym: the broker at %s: %s", self.cfg["endpoint"], reason)
            return
        job.job_id = W.header_int(header, "job") or job.job_id
        if job.job_id:
            job.future.job = job.job_id
        reason = reason or "no connected worker serves this backend"
        if job.unserved:
            return
        job.unserved = True
        job.future.unserved = reason
        self.counts["unserved"] += 1
        backend = job.header.get("backend", "?")
        if backend not in self.unserved_backends:
            self.unserved_backends.add(backend)
            log.warning("kgym: the broker at %s has no worker for backend %r: %s (jobs stay queued "
                        "until one joins or the broker gives up on them)",
                        self.cfg["endpoint"], backend, reason)
        callback = self.cfg.get("on_unserved")
        if callback is not None:
            try:
                callback(job.future, reason)
            except Exception:       # the caller's bug must not stop the I/O thread
                log.exception("kgym: on_unserved callback failed")

    def _unsupported(self, reason):
        """ERROR 401 without a ref from a broker that predates CANCEL or QUERY
        ("CANCEL is not a client command", "unknown command 13"): it answers
        the oldest request of that kind. True when it was one of ours."""
        if ("QUERY" in reason or "command 13" in reason) and self.queries:
            for ref, q in self.queries.items():
                if q.sent:
                    del self.queries[ref]
                    _settle(q.future, exc=_query_error(
                        W.ERR_UNKNOWN_COMMAND, reason + " (a broker without queries)", q.what))
                    return True
        if ("CANCEL" in reason or "command 12" in reason) and self.cancels:
            self.cancels.popitem(last=False)
            self.counts["cancel_unsupported"] += 1
            return True
        return False

    def _on_done(self, header, body, now):
        """DONE {ref, count} answering a CANCEL: consumed here."""
        ref = W.header_int(header, "ref")
        entry = self.cancels.pop(ref, None)
        if entry is None:
            self.counts["stray"] += 1
            return
        if W.header_int(header, "count") >= 1:
            self.counts["cancel_done"] += 1
            self.abandoned.pop(entry[0], None)      # cancelled unfinished: no RESULT will come
        else:
            self.counts["cancel_missed"] += 1       # finished already (or unknown): a RESULT may

    def _on_answer(self, header, body, now):
        q = self.queries.pop(W.header_int(header, "ref"), None)
        if q is None:
            self.counts["stray"] += 1
            return
        try:
            data = W.decode_body(body, "answer")
        except W.WireError as exc:
            _settle(q.future, exc=QueryError("query %r: %s" % (q.what, exc)))
            return
        _settle(q.future, data)

    def _on_summary(self, header, body, now):
        group = W.header_text(header, "group")
        try:
            data = W.decode_body(body, "summary")
        except W.WireError as exc:
            self.counts["malformed"] += 1
            log.warning("kgym: bad SUMMARY from the broker: %s", exc)
            return
        self.counts["summaries"] += 1
        if not group:
            group = W.header_str(data.get("group")) or ""
        self.summaries.deliver(group, data)

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
        if self.fatal or self.link_error:
            self.probes.pop()
            fut.set_result(self._stats(now, False, None, self.fatal or self.link_error[1]))
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
                self._abandon(job)
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
        if self.queries:
            self._tick_queries(now)
        if self.fatal and self.jobs:
            self._fail_all("broker_lost", self.fatal)
        deadline = self._connect_deadline()
        if deadline is not None and now >= deadline:
            self._link_failed("unreachable", "cannot reach the broker at %s within %.3g s: %s" % (
                cfg["endpoint"], cfg["connect_timeout_s"], _link.diagnose(cfg["endpoint"])))
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
            while self.abandoned and next(iter(self.abandoned.values()))[0] < horizon:
                self.abandoned.popitem(last=False)
        if self.cancels:
            horizon = now - 3600.0
            while self.cancels and next(iter(self.cancels.values()))[2] < horizon:
                self.cancels.popitem(last=False)
        if self._busy():
            hb = cfg["heartbeat_s"]
            if now - self.last_hb >= hb:
                self._send(W.HEARTBEAT, {"client": self.client_id})
                self.last_hb = now
            heard = max(self.last_heard or 0.0, self.busy_since)
            if self.jobs and now - heard > cfg["give_up_s"]:
                why = "no answer from the broker at %s for %.3g s" % (cfg["endpoint"], now - heard)
                if self.link_up:
                    self._fail_all("broker_lost", why)
                else:           # no connection either: fail what comes at once until one is back
                    self._link_failed("broker_lost", "%s: %s" % (why, _link.diagnose(cfg["endpoint"])))
            elif now - max(heard, self.connected_at) > hb * cfg["liveness"] and now >= self.next_reconnect:
                self._reconnect(now)
        if self.closing and (not self.jobs or now >= self.close_deadline):
            self.stop = True

    def _tick_queries(self, now):
        for ref in [r for r, q in self.queries.items() if q.deadline is not None and q.deadline <= now]:
            q = self.queries.pop(ref)
            _settle(q.future, exc=KgymTimeout("query %r: no ANSWER from the broker at %s within "
                                              "%.3g s" % (q.what, self.cfg["endpoint"], q.timeout_s)))
        if self.send_blocked or self.sock is None:
            return
        for q in self.queries.values():
            if q.sent:
                continue
            if not self._send(W.QUERY, {"ref": q.ref, "client": self.client_id}, q.body):
                self.send_blocked = True
                return
            q.sent = True

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
        for q in self.queries.values():  # answers went to the old connection: ask again
            q.resent = q.resent or q.sent
            q.sent = False
        cancels, self.cancels = self.cancels, OrderedDict()
        for cref, (job_ref, job_id, _) in cancels.items():     # idempotent at the broker
            self._send_cancel(job_ref, job_id, cref)
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
            elif cmd[0] == "query":
                _settle(cmd[1].future, exc=self._gone_error(why))
            elif cmd[0] == "close":
                self.close_event = cmd[3] or self.close_event
        self._fail_all(error, why)
        queries, self.queries = self.queries, {}
        for q in queries.values():
            _settle(q.future, exc=self._gone_error(why))
        self.summaries.fail(self._gone_error(why))
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
                    $KGYM_BROKER. A malformed one is a ValueError saying
                    what is wrong
    curve_secret, broker_key
                    CURVE (docs/protocol.md section 13): our NAME_secret
                    certificate file (kgym keygen) and the broker's public
                    certificate file (or its Z85 key); both or neither;
                    default $KGYM_CURVE_SECRET and $KGYM_BROKER_KEY
    connect_timeout_s
                    how long work waits for a first connection to the
                    broker: past it, what waits resolves as internal_error
                    "unreachable" with the reason (DNS, connection refused,
                    no handshake), and what comes fails at once until a
                    connection is made. A host that does not resolve, or a
                    handshake the broker refuses ("unauthorized": our CURVE
                    key), fails at once
    timeout_s       client-side limit per job, from submit to result; a job
                    over it resolves as internal_error "timeout" (reward
                    None; a kernel's own timeout is status "timeout")
    max_inflight    jobs submitted and not yet resolved, at most; submit
                    blocks when full (or raises KgymBusy with block=False)
    block           the default for submit(block=...)
    heartbeat_s, liveness, give_up_s, resubmit_accepted: see the module
                    docstring (reconnects)
    eval, reward    defaults merged into every job's eval and reward
    cache           the default result cache policy of jobs: "use",
                    "refresh" or "bypass" (None: the broker's, "use")
    on_summary      callable(summary dict), called on the I/O thread for
                    every SUMMARY (group summary) received; keep it short.
                    Process-local: not pickled with the settings
    on_unserved     callable(future, reason), called on the I/O thread when
                    the broker says no connected worker serves a job's
                    backend (ERROR 503; the job stays queued). Also logged
                    once per backend and set as future.unserved.
                    Process-local: not pickled with the settings
    """

    def __init__(self, endpoint=None, *, timeout_s=600.0, max_inflight=256, block=True,
                 heartbeat_s=1.0, liveness=4, give_up_s=60.0, connect_timeout_s=10.0,
                 resubmit_accepted=False, eval=None, reward=None, cache=None, curve_secret=None,
                 broker_key=None, on_summary=None, on_unserved=None):
        if endpoint:
            endpoint = _link.check_endpoint(endpoint)
        else:
            endpoint = _link.check_endpoint(os.environ.get(_link.ENDPOINT_ENV),
                                            "$" + _link.ENDPOINT_ENV)
        if curve_secret is None and broker_key is None:
            curve_secret = os.environ.get(_link.CURVE_SECRET_ENV) or None
            broker_key = os.environ.get(_link.BROKER_KEY_ENV) or None
        curve = _link.curve_keys(curve_secret, broker_key)
        if not 1 <= int(max_inflight) <= 100000:
            raise ValueError("max_inflight must be 1..100000")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError("timeout_s must be > 0 (or None for no client-side limit)")
        if not heartbeat_s > 0 or int(liveness) < 1 or not give_up_s > 0 or not connect_timeout_s > 0:
            raise ValueError("heartbeat_s, give_up_s and connect_timeout_s must be > 0, liveness >= 1")
        for name, fn in (("on_summary", on_summary), ("on_unserved", on_unserved)):
            if fn is not None and not callable(fn):
                raise TypeError("%s must be callable" % name)
        self._cfg = dict(endpoint=endpoint, timeout_s=timeout_s, max_inflight=int(max_inflight),
                         block=bool(block), heartbeat_s=float(heartbeat_s), liveness=int(liveness),
                         give_up_s=float(give_up_s), connect_timeout_s=float(connect_timeout_s),
                         resubmit_accepted=bool(resubmit_accepted),
                         eval=dict(eval or {}), reward=dict(reward or {}),
                         cache=W.cache_policy(cache), curve_secret=curve_secret,
                         broker_key=broker_key)
        #  What the I/O thread reads: the settings, the loaded keys, the callback.
        self._io_cfg = dict(self._cfg, curve=curve, on_unserved=on_unserved)
        self._lock = threading.Lock()
        self._slots = _Slots(int(max_inflight))
        self._refs = itertools.count(1)         # job, query and cancel refs: one number space
        self._summaries = _Summaries(callback=on_summary)
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
        self._summaries.reset()

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
                io = _IO(self._io_cfg, pid, self._refs, self._summaries)
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

    @staticmethod
    def _extraction(candidate, task):
        """The Extraction of a candidate object, a completion or an Extraction."""
        if isinstance(candidate, Extraction):
            return candidate
        if isinstance(candidate, dict) and ("source" in candidate or "launches" in candidate):
            return Extraction(candidate)
        if isinstance(candidate, (str, dict, list, tuple)):
            return extract(candidate, task)
        raise TypeError("a candidate is a candidate object (dict), a completion (str or chat "
                        "messages) or an Extraction, not %s" % type(candidate).__name__)

    def _header_opts(self, opts):
        """(cache, group_size) popped from submit options, validated."""
        cache = W.cache_policy(opts.pop("cache")) if "cache" in opts else self._cfg["cache"]
        group_size = opts.pop("group_size", None)
        if group_size is not None:
            W.header_u32(group_size, "group_size")
            if opts.get("group") is None:
                raise ValueError("group_size= needs group=")
        return cache, group_size

    def _prepare(self, task, candidate, opts, index, timeout_s):
        """A _Job ready to send, or the Result of a job that cannot be sent."""
        opts = dict(opts)
        cache, group_size = self._header_opts(opts)
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
        ex = self._extraction(candidate, t)
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
        if group and group_size:
            header["group_size"] = group_size
        if cache:
            header["cache"] = cache
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
                    Result); group_size= (how many jobs the group has: the
                    broker sends the group's SUMMARY when that many ended);
                    cache= "use" (default: a kept identical result answers
                    at once, identical jobs in flight share one run),
                    "refresh" (grade again, keep the new result) or
                    "bypass" (grade, keep nothing)
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

    def _sized_group(self, items, opts):
        """With group= (and no group_size=) for a batch: the items, each job of
        that group with group_size set to the number of them that will reach
        the broker (those with a gradable kernel: a completion without one is
        answered here and never sent, and a group waiting for it would never
        end). Completions are extracted once, here."""
        group = opts.get("group")
        if group is None or "group_size" in opts:
            return items
        items = list(items)
        out, members = [], []
        for item in items:
            if isinstance(item, concurrent.futures.Future):
                return items                # submitted already: their headers are gone
            task, candidate, merged = self._spec(item, opts)
            if merged.get("group") != group or "group_size" in merged:
                out.append(item)
                continue
            try:
                t = resolve_task(task)
            except TaskError:
                out.append(item)            # fails here, never sent
                continue
            ex = self._extraction(candidate, t)
            spec = dict(merged, task=t, candidate=ex)
            if ex.ok:
                members.append(spec)
            out.append(spec)
        for spec in members:
            spec["group_size"] = len(members)
        return out

    def grade_many(self, items, *, raise_on_error=False, batch_timeout_s=None, **opts):
        """Results of a batch, in input order (see as_completed for items).
        With raise_on_error=True, the first client-side failure is raised
        once every job has finished. With group=G the batch is one GRPO
        group: group_size is set to its number of jobs, so the broker sends
        its SUMMARY when the last one ends (group_summary(G))."""
        items = self._sized_group(items, opts)
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
        """grade_many() for asyncio: Results in input order (group= sets
        group_size as grade_many does)."""
        if not hasattr(items, "__aiter__"):
            items = self._sized_group(items, opts)
        by_index = {}
        async for result in self.astream(items, **opts):
            by_index[result.index] = result
        results = [by_index[i] for i in range(len(by_index))]
        if raise_on_error:
            for r in results:
                if r.error:
                    raise error_for(r)
        return results

    # -- queries (docs/protocol.md 14.3) and group summaries (14.4)

    def _post_query(self, what, params, timeout_s):
        if not isinstance(what, str) or not what:
            raise TypeError("what must be a non-empty str")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError("timeout_s must be > 0 (or None)")
        if self._closed:
            raise ClientClosed("the client was closed")
        body = dict((k, v) for k, v in params.items() if v is not None)
        body["what"] = what
        try:
            data = W.encode_body(body)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError("query %r: parameters cannot be encoded: %s" % (what, exc)) from None
        fut = concurrent.futures.Future()
        io = self._io_for_process()
        io.post(("query", _Query(next(self._refs), fut, what, data, timeout_s)))
        return io, fut

    def query(self, what, *, timeout_s=30.0, **params):
        """Ask the broker (QUERY, docs/protocol.md 14.3): the decoded ANSWER
        map. `what` is stats, workers, job, jobs, results, cache, tasks or
        trajectory; params are its parameters (None values are left out). An
        ERROR for it raises a QueryError: BadQuery (400: unknown what, bad
        parameter), NotFound (404: unknown job), Unsupported (401: a broker
        without queries), Conflict (409: a trajectory put over a stale
        if_version), StateTooLarge (413: a trajectory state over 1 MiB). No
        ANSWER within timeout_s: KgymTimeout."""
        io, fut = self._post_query(what, params, timeout_s)
        if threading.current_thread() is io.thread:
            raise RuntimeError("query() would block the client's I/O thread (called from a "
                               "future's done-callback?): use aquery() or another thread")
        try:
            return fut.result(None if timeout_s is None else timeout_s + 5.0)
        except concurrent.futures.TimeoutError:     # the I/O thread should have ended it
            fut.cancel()
            raise KgymTimeout("query %r: no answer within %.3g s" % (what, timeout_s)) from None

    async def aquery(self, what, *, timeout_s=30.0, **params):
        """query() for asyncio."""
        _, fut = self._post_query(what, params, timeout_s)
        return await asyncio.wrap_future(fut)

    @staticmethod
    def _listing(answer, key):
        out = QueryList(answer.get(key) or [])
        out.truncated = answer.get("truncated") is True
        return out

    @staticmethod
    def _limit(limit):
        if limit is None:
            return None
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be an int >= 1 (the broker caps it at 10000)")
        return limit

    def stats(self, timeout_s=30.0):
        """The broker's state: uptime_s, queued (by backend), in_flight,
        workers (by state), counts (submitted, completed, cancelled,
        cache_hits, coalesced, ...), statuses, rate_1m, rate_10s, pass_rate,
        cache."""
        return self.query("stats", timeout_s=timeout_s)

    def workers(self, timeout_s=30.0):
        """One dict per worker: name, host, backend, device, state, capacity,
        busy (its device's busy ratio, None until it said), jobs, done,
        faults, bad_results, pid, since_s, heard_s."""
        return self._listing(self.query("workers", timeout_s=timeout_s), "workers")

    def job(self, job_id, timeout_s=30.0):
        """The broker's map of one job (state, attempt, worker, status,
        cached, accepted, finished, queue_s, ...) with its `result` (None
        until done). NotFound when the broker does not have it (any more)."""
        try:
            job_id = None if isinstance(job_id, bool) else operator.index(job_id)
        except TypeError:
            job_id = None
        if job_id is None or job_id < 0:
            raise ValueError("job_id must be the int job id from ACCEPTED (KgymFuture.job, Result.job)")
        return self.query("job", job=job_id, timeout_s=timeout_s).get("job")

    def jobs(self, *, tag=None, group=None, trajectory=None, limit=None, results=False,
             timeout_s=30.0):
        """The jobs (of every client of the broker) with that tag, group or
        trajectory (exactly one), newest first, with their results when
        results=True; a QueryList (.truncated when cut at limit, default 100)."""
        given = [(k, v) for k, v in (("tag", tag), ("group", group), ("trajectory", trajectory))
                 if v is not None]
        if len(given) != 1:
            raise ValueError("jobs() wants exactly one of tag=, group=, trajectory=")
        (key, value), = given
        params = {key: W.header_str(value), "limit": self._limit(limit)}   # as in the SUBMIT header
        if results:
            params["results"] = True
        return self._listing(self.query("jobs", timeout_s=timeout_s, **params), "jobs")

    @staticmethod
    def _task_name(task):
        """The broker keys tasks by their name: a task object's or a bundled
        example's ("cpu/matmul_f32" -> "matmul_f32"); other strings as given."""
        if isinstance(task, dict):
            try:
                task = resolve_task(task)
            except TaskError:
                pass
            name = task.get("name") if isinstance(task, dict) else None
            if not isinstance(name, str) or not name:
                raise ValueError("the task has no name")
            return name
        if not isinstance(task, str) or not task:
            raise TypeError("task is a task name, a bundled example or a task object")
        if "/" in task or task.lstrip().startswith("{"):
            try:
                name = resolve_task(task).get("name")
                if isinstance(name, str) and name:
                    return name
            except (TaskError, AttributeError):
                pass
        return task

    def results(self, task, *, limit=None, timeout_s=30.0):
        """The finished jobs of a task (by name, or a task object or bundled
        example), newest first: {job, status, reward, speedup, worker,
        finished, cached} each; a QueryList."""
        return self._listing(self.query("results", task=self._task_name(task),
                                        limit=self._limit(limit), timeout_s=timeout_s), "results")

    def cache_stats(self, timeout_s=30.0):
        """The broker's result cache: entries, bytes, max_entries, max_bytes,
        hits, misses, inserts, replaced, evictions, coalesced, hit_rate."""
        return self.query("cache", timeout_s=timeout_s)

    def tasks(self, band=None, *, min_attempts=1, timeout_s=30.0):
        """Per-task statistics (task, attempts, window, compile_rate,
        pass_rate, mean_speedup, reward_mean, reward_var, reward_std,
        statuses, groups, zero_variance_groups, last_group_zero_variance,
        operators, updated) of tasks with at least min_attempts attempts;
        with band=(lo, hi) only those whose pass_rate lies in [lo, hi] (the
        learnable zone). kgym.sampler.CurriculumSampler samples by them."""
        params = {}
        if band is not None:
            try:
                lo, hi = (float(x) for x in band)
            except (TypeError, ValueError):
                raise ValueError("band is (lo, hi), two numbers") from None
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
                raise ValueError("band wants finite lo <= hi, not %r" % (band,))
            params.update(lo=lo, hi=hi)
        if isinstance(min_attempts, bool) or not isinstance(min_attempts, int) or min_attempts < 0:
            raise ValueError("min_attempts must be an int >= 0")
        params["min_attempts"] = min_attempts
        return self._listing(self.query("tasks", timeout_s=timeout_s, **params), "tasks")

    # -- trajectory state (docs/protocol.md 14.6)

    TRAJECTORY_OPS = ("get", "put", "close")

    @staticmethod
    def _trajectory_params(trajectory_id, op, state, if_version):
        if trajectory_id is None or isinstance(trajectory_id, bool):
            raise TypeError("trajectory id is a str (or an int), not %r" % (trajectory_id,))
        key = str(trajectory_id)
        if not key or "\0" in key or len(key.encode("utf-8", "replace")) > W.MAX_STR:
            raise ValueError("trajectory id must be 1 to %d bytes of UTF-8 without NUL, not %r"
                             % (W.MAX_STR, key[:80]))
        if op not in Client.TRAJECTORY_OPS:
            raise ValueError("op is get, put or close, not %r" % (op,))
        params = {"id": key, "op": op}
        if op != "put":
            if state is not None or if_version is not None:
                raise ValueError("state= and if_version= go with op='put'")
            return params
        if state is None:
            raise ValueError("put wants a state (None cannot be stored; close forgets one)")
        try:
            size = len(W.encode_body(state))
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError("trajectory %r: the state cannot be encoded (msgpack: str-keyed maps, "
                            "lists, str, int, finite float, bool, None): %s" % (key, exc)) from None
        if size > W.MAX_TRAJECTORY_STATE:
            reason = ("trajectory state of %d bytes: over %d" % (size, W.MAX_TRAJECTORY_STATE))
            raise StateTooLarge("trajectory %r: the state is %d bytes encoded, over the broker's "
                                "limit of %d (1 MiB); nothing was sent"
                                % (key, size, W.MAX_TRAJECTORY_STATE), W.ERR_TOO_LARGE, reason)
        params["state"] = state
        if if_version is not None:
            try:
                if_version = None if isinstance(if_version, bool) else operator.index(if_version)
            except TypeError:
                if_version = None
            if if_version is None or if_version < 0:
                raise ValueError("if_version must be an int >= 0 (0: only when there is none yet)")
            params["if_version"] = if_version
        return params

    @staticmethod
    def _trajectory_answer(answer):
        version = answer.get("version")
        return answer.get("state"), (version if isinstance(version, int) else 0)

    def trajectory(self, trajectory_id, op="get", state=None, if_version=None, *, timeout_s=30.0):
        """A multi-turn trajectory's state at the broker (docs/protocol.md
        14.6): returns (state, version).

          op="get"    the state and its version; (None, 0) when unknown
          op="put"    keep `state` (any msgpack value: str-keyed maps, lists,
                      str, int, finite float, bool; at most 1 MiB encoded);
                      the version becomes version + 1. With if_version only
                      when the kept version is that one (0: only when there is
                      none yet), else Conflict (.version: the current one)
          op="close"  forget it; the last state (None when unknown) and 0

        Every client of the broker sees the same states (that is the point:
        a trajectory's turns may run in different processes). A state over
        1 MiB raises StateTooLarge (before sending when this side sees it).
        The usual way to change one: get, change, put with if_version=the
        version read, and on Conflict start again (kgym.store.BrokerStore)."""
        params = self._trajectory_params(trajectory_id, op, state, if_version)
        try:
            answer = self.query("trajectory", timeout_s=timeout_s, **params)
        except BadQuery as exc:
            raise self._explained(exc, params) from None
        return self._trajectory_answer(answer)

    async def atrajectory(self, trajectory_id, op="get", state=None, if_version=None, *,
                          timeout_s=30.0):
        """trajectory() for asyncio."""
        params = self._trajectory_params(trajectory_id, op, state, if_version)
        try:
            answer = await self.aquery("trajectory", timeout_s=timeout_s, **params)
        except BadQuery as exc:
            raise self._explained(exc, params) from None
        return self._trajectory_answer(answer)

    @staticmethod
    def _explained(exc, params):
        """A BadQuery for a put whose state holds a NaN or an infinity (the
        broker keeps JSON values and refuses the whole body) says where."""
        def walk(value, path):
            if isinstance(value, float) and not math.isfinite(value):
                return path
            items = (value.items() if isinstance(value, dict) else
                     enumerate(value) if isinstance(value, (list, tuple)) else ())
            for k, v in items:
                found = walk(v, "%s[%r]" % (path, k))
                if found:
                    return found
            return None
        where = walk(params.get("state"), "state") if params.get("op") == "put" else None
        if where:
            exc = BadQuery("trajectory %r: %s is not a finite number (the broker keeps JSON "
                           "values); %s" % (params["id"], where, exc), exc.code, exc.reason)
        return exc

    def group_summary(self, group, timeout_s=None):
        """The SUMMARY of a GRPO group (docs/protocol.md 14.4): a dict with
        group, count, cancelled, declared_size, statuses, pass_rate, rewards,
        reward_mean, reward_std, reward_min, reward_max, zero_variance,
        best_job, jobs. Returns a kept one at once (and forgets it), else
        waits up to timeout_s (None: no limit) for it: KgymTimeout after.
        The broker sends a group's summary once, to the client (process)
        that submitted its jobs, when its last job ends."""
        if self._closed:
            raise ClientClosed("the client was closed")
        key = W.header_str(str(group))
        fut = self._summaries.take(key)
        if not fut.done():
            io = self._io
            if io is not None and threading.current_thread() is io.thread:
                self._summaries.forget(key, fut)
                raise RuntimeError("group_summary() would block the client's I/O thread: use "
                                   "on_summary= or agroup_summary()")
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            if fut.cancel():
                self._summaries.forget(key, fut)
                raise KgymTimeout("no SUMMARY for group %r within %.3g s" % (group, timeout_s)) from None
            return fut.result()                     # it came just now

    async def agroup_summary(self, group, timeout_s=None):
        """group_summary() for asyncio."""
        if self._closed:
            raise ClientClosed("the client was closed")
        key = W.header_str(str(group))
        fut = self._summaries.take(key)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), timeout_s)
        except asyncio.TimeoutError:
            raise KgymTimeout("no SUMMARY for group %r within %.3g s" % (group, timeout_s)) from None
        finally:
            if not fut.done() or fut.cancelled():
                self._summaries.forget(key, fut)

    # -- health and closing

    def health(self, timeout_s=5.0):
        """A HEARTBEAT round trip: a dict with ok (the broker answered),
        rtt_s, inflight (jobs pending here), accepted, waiting (not yet
        accepted), abandoned (cancelled or timed out, result still due),
        counters (submitted, completed, timeouts, reconnects, cancel_sent,
        cancel_done, cancel_missed, cancel_unsupported, queries, summaries,
        ...)."""
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
        self._summaries.fail(ClientClosed("the client was closed"))
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
