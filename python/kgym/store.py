"""Per-trajectory state for multi-turn grading.

A multi-turn tool (kgym.adapters.verl.KgymTool, kgym.adapters.trl's
environment) lets a model submit a kernel several times in one trajectory,
see the feedback, and try again. Frameworks create tool objects freely (veRL
makes one per call), so the state lives in a store keyed by trajectory id,
not in the tool object.

TrajectoryStore is the interface (open, get, record, close, __len__, and
awaitable aopen, aget, arecord, aclose). Two implementations:

  InProcessStore  this process's memory: right while one process runs all
                  of a trajectory's turns (the default).
  BrokerStore     at the broker (docs/protocol.md 14.6, QUERY trajectory):
                  every process talking to that broker sees the same state,
                  so a trajectory's turns may run in different processes
                  (veRL with several rollout workers). Writes are
                  read-change-put with if_version, retried on a conflict, so
                  concurrent writers never lose each other's attempts.

resolve_store(spec, client) picks one: a TrajectoryStore as given, "broker"
(one BrokerStore per client), "memory" (default_store()), or with None the
$KGYM_TRAJECTORY_STORE environment variable (broker or memory; unset:
memory). The adapters take that spec (KgymTool(store=...), tool config
`store:`, KgymEnvironment.store).

State of one trajectory, the same in both stores:
    {"trajectory": id, "task": the task spec as given (name, path or object),
     "info": {...}, "attempts": [{"status", "reward", "score", "speedup",
     "message", "job", "error"}, ...], "best_score": float or None,
     "last_score": float or None, "created": unix time}

InProcessStore keeps the values as given (get returns the live dict);
BrokerStore keeps JSON values (the task a name, a path string or a task
object; tuples become lists, non-finite floats None) and get returns a copy.
"""

import abc
import asyncio
import math
import os
import random
import threading
import time
from collections import OrderedDict

from . import _wire as W
from .client import Conflict, StateTooLarge, default_client

STORE_ENV = "KGYM_TRAJECTORY_STORE"


class TrajectoryStore(abc.ABC):
    """Where multi-turn tools keep per-trajectory state."""

    @abc.abstractmethod
    def open(self, trajectory_id, task, **info):
        """Create the trajectory's state (or return the existing one)."""

    @abc.abstractmethod
    def get(self, trajectory_id):
        """The state, or None."""

    @abc.abstractmethod
    def record(self, trajectory_id, attempt):
        """Append one attempt (a dict with at least "score"); update
        best_score and last_score; return the new state. KeyError when the
        trajectory was never opened."""

    @abc.abstractmethod
    def close(self, trajectory_id):
        """Forget the trajectory; its last state, or None."""

    @abc.abstractmethod
    def __len__(self):
        """Open trajectories."""

    #  Awaitable forms for tools running on an event loop; these call the
    #  blocking ones, a store that talks to a server overrides them.

    async def aopen(self, trajectory_id, task, **info):
        return self.open(trajectory_id, task, **info)

    async def aget(self, trajectory_id):
        return self.get(trajectory_id)

    async def arecord(self, trajectory_id, attempt):
        return self.record(trajectory_id, attempt)

    async def aclose(self, trajectory_id):
        return self.close(trajectory_id)


def _better(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


class InProcessStore(TrajectoryStore):
    """TrajectoryStore in this process's memory, thread-safe. At most
    max_trajectories are kept (the oldest opened goes first); ttl_s, when
    set, forgets trajectories not touched for that long."""

    def __init__(self, max_trajectories=100000, ttl_s=None):
        self._lock = threading.Lock()
        self._states = OrderedDict()
        self._touched = {}
        self.max_trajectories = max_trajectories
        self.ttl_s = ttl_s

    def _expire(self, now):
        while len(self._states) > self.max_trajectories:
            key, _ = self._states.popitem(last=False)
            self._touched.pop(key, None)
        if self.ttl_s:
            for key in [k for k, t in self._touched.items() if now - t > self.ttl_s]:
                self._states.pop(key, None)
                self._touched.pop(key, None)

    def open(self, trajectory_id, task, **info):
        key = str(trajectory_id)
        now = time.time()
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = {"trajectory": key, "task": task, "info": dict(info), "attempts": [],
                         "best_score": None, "last_score": None, "created": now}
                self._states[key] = state
            self._touched[key] = now
            self._expire(now)
            return state

    def get(self, trajectory_id):
        with self._lock:
            return self._states.get(str(trajectory_id))

    def record(self, trajectory_id, attempt):
        key = str(trajectory_id)
        with self._lock:
            state = self._states[key]
            state["attempts"].append(dict(attempt))
            score = attempt.get("score")
            state["last_score"] = score
            state["best_score"] = _better(state["best_score"], score)
            self._touched[key] = time.time()
            return state

    def close(self, trajectory_id):
        key = str(trajectory_id)
        with self._lock:
            self._touched.pop(key, None)
            return self._states.pop(key, None)

    def __len__(self):
        with self._lock:
            return len(self._states)


_default = None
_default_lock = threading.Lock()


def default_store():
    """The process-wide InProcessStore the adapters use unless given one."""
    global _default
    with _default_lock:
        if _default is None:
            _default = InProcessStore(ttl_s=6 * 3600)
        return _default


# ---------------------------------------------------------------- at the broker

def _plain(value, what):
    """value as the broker keeps it (JSON): str-keyed maps, lists, str, int,
    finite float (else None), bool, None; a path becomes its string."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v, what) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, what) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError("%s: a %s cannot be kept at the broker (it keeps JSON values: a task is a "
                    "name, a path string or a task object)" % (what, type(value).__name__))


def _fresh(key, task, info):
    return {"trajectory": key, "task": _plain(task, "task"), "info": _plain(dict(info), "info"),
            "attempts": [], "best_score": None, "last_score": None, "created": time.time()}


def _appended(state, entry):
    new = dict(state)
    new["attempts"] = list(state.get("attempts") or []) + [entry]
    score = entry.get("score")
    new["last_score"] = score
    new["best_score"] = _better(state.get("best_score"), score)
    return new


class BrokerStore(TrajectoryStore):
    """TrajectoryStore at the broker (docs/protocol.md 14.6), through a
    kgym.Client (None: kgym.default_client(), looked up on each use): every
    process with a client of that broker sees the same trajectories.
    Thread-safe; the a* methods do the same without blocking an event loop.

      open    put with if_version=0; when the trajectory exists already
              (Conflict) its state is returned, unchanged
      record  get, append, put with if_version=the version read; on Conflict
              (another writer came first) again, up to `retries` times with a
              short random pause, so concurrent writers lose no attempt
      get     the state (a copy), or None
      close   forget it at the broker; its last state, or None
      len()   the broker does not count per client: the trajectories this
              store object opened and has not closed (at most max_tracked,
              the oldest dropped; closes by other processes and the
              broker's evictions are not seen)

    A state over 1 MiB encoded raises kgym.StateTooLarge (the attempt is not
    recorded); a broker that went away, KgymTimeout or BrokerLost. The
    broker keeps at most 100,000 states (least recently used evicted) in
    memory: a restarted broker has none, and record() then raises KeyError
    like a trajectory that was never opened."""

    def __init__(self, client=None, *, retries=32, timeout_s=30.0, max_tracked=100000):
        self._client = client
        self.retries = max(0, int(retries))
        self.timeout_s = timeout_s
        self.max_tracked = int(max_tracked)
        self.conflicts = 0          # puts that lost to another writer (and were retried)
        self._lock = threading.Lock()
        self._opened = OrderedDict()

    @property
    def client(self):
        return self._client if self._client is not None else default_client()

    def __repr__(self):
        return "<kgym.BrokerStore %s, %d open here>" % (
            getattr(self._client, "endpoint", "default client"), len(self))

    # -- bookkeeping

    def _track(self, key):
        with self._lock:
            self._opened[key] = True
            self._opened.move_to_end(key)
            while len(self._opened) > self.max_tracked:
                self._opened.popitem(last=False)

    def _untrack(self, key):
        with self._lock:
            self._opened.pop(key, None)

    def _pause(self, attempt):
        return random.uniform(0.0, min(0.1, 0.001 * (2 ** min(attempt, 8))))

    def _lost(self, key, exc):
        return Conflict("trajectory %r: %d puts in a row lost to other writers; the attempt was "
                        "not recorded (raise BrokerStore.retries?)" % (key, self.retries + 1),
                        exc.code, exc.reason)

    @staticmethod
    def _too_large(key, state, exc):
        return StateTooLarge("trajectory %r: its state with %d attempts is over the broker's "
                             "limit of %d bytes encoded, so the attempt was not recorded (long "
                             "feedback messages? fewer attempts per trajectory?): %s"
                             % (key, len(state.get("attempts") or ()), W.MAX_TRAJECTORY_STATE,
                                exc), exc.code, exc.reason)

    def _put(self, key, state, if_version):
        try:
            return self.client.trajectory(key, "put", state, if_version, timeout_s=self.timeout_s)
        except StateTooLarge as exc:
            raise self._too_large(key, state, exc) from None

    async def _aput(self, key, state, if_version):
        try:
            return await self.client.atrajectory(key, "put", state, if_version,
                                                 timeout_s=self.timeout_s)
        except StateTooLarge as exc:
            raise self._too_large(key, state, exc) from None

    def _call(self, key, op):
        return self.client.trajectory(key, op, timeout_s=self.timeout_s)

    async def _acall(self, key, op):
        return await self.client.atrajectory(key, op, timeout_s=self.timeout_s)

    @staticmethod
    def _landed(current, version, wanted, read_version):
        """A put refused with 409 after it was sent again on a reconnect
        (Conflict.resent) may have been applied the first time: take it as
        applied when the broker holds just what it put, one version on."""
        return version == read_version + 1 and current == wanted

    # -- the interface

    def open(self, trajectory_id, task, **info):
        key = str(trajectory_id)
        fresh = _fresh(key, task, info)
        for _ in range(self.retries + 1):
            try:
                state, _ = self._put(key, fresh, 0)
            except Conflict:
                state, _ = self._call(key, "get")
                if state is None:           # closed in between: create it again
                    continue
            self._track(key)
            return state
        raise Conflict("trajectory %r: could not be opened (closed and created again by others "
                       "%d times)" % (key, self.retries + 1), W.ERR_CONFLICT, "")

    async def aopen(self, trajectory_id, task, **info):
        key = str(trajectory_id)
        fresh = _fresh(key, task, info)
        for _ in range(self.retries + 1):
            try:
                state, _ = await self._aput(key, fresh, 0)
            except Conflict:
                state, _ = await self._acall(key, "get")
                if state is None:
                    continue
            self._track(key)
            return state
        raise Conflict("trajectory %r: could not be opened (closed and created again by others "
                       "%d times)" % (key, self.retries + 1), W.ERR_CONFLICT, "")

    def get(self, trajectory_id):
        return self._call(str(trajectory_id), "get")[0]

    async def aget(self, trajectory_id):
        return (await self._acall(str(trajectory_id), "get"))[0]

    def record(self, trajectory_id, attempt):
        key = str(trajectory_id)
        entry = _plain(dict(attempt), "attempt")
        for i in range(self.retries + 1):
            state, version = self._call(key, "get")
            if state is None:
                raise KeyError(key)
            new = _appended(state, entry)
            try:
                saved, _ = self._put(key, new, version)
                return saved if saved is not None else new
            except Conflict as exc:
                last = exc
                if exc.resent:
                    current, now = self._call(key, "get")
                    if self._landed(current, now, new, version):
                        return current
                with self._lock:
                    self.conflicts += 1
            if i < self.retries:
                time.sleep(self._pause(i))
        raise self._lost(key, last)

    async def arecord(self, trajectory_id, attempt):
        key = str(trajectory_id)
        entry = _plain(dict(attempt), "attempt")
        for i in range(self.retries + 1):
            state, version = await self._acall(key, "get")
            if state is None:
                raise KeyError(key)
            new = _appended(state, entry)
            try:
                saved, _ = await self._aput(key, new, version)
                return saved if saved is not None else new
            except Conflict as exc:
                last = exc
                if exc.resent:
                    current, now = await self._acall(key, "get")
                    if self._landed(current, now, new, version):
                        return current
                with self._lock:
                    self.conflicts += 1
            if i < self.retries:
                await asyncio.sleep(self._pause(i))
        raise self._lost(key, last)

    def close(self, trajectory_id):
        key = str(trajectory_id)
        state, _ = self._call(key, "close")
        self._untrack(key)
        return state

    async def aclose(self, trajectory_id):
        key = str(trajectory_id)
        state, _ = await self._acall(key, "close")
        self._untrack(key)
        return state

    def __len__(self):
        with self._lock:
            return len(self._opened)


_broker_stores = {}         # id(client) -> (client, BrokerStore); None -> the default client's


def broker_store(client=None):
    """The BrokerStore of a client (one per Client object and process, so
    len() counts what this process opened through it); None: the default
    client's, following kgym.set_default_client."""
    with _default_lock:
        for k in [k for k, (c, _) in _broker_stores.items() if c is not None and c.closed]:
            del _broker_stores[k]
        entry = _broker_stores.get(id(client) if client is not None else None)
        if entry is None or entry[0] is not client:
            entry = _broker_stores[id(client) if client is not None else None] = (
                client, BrokerStore(client))
        return entry[1]


_MEMORY_NAMES = ("memory", "process", "in_process", "inprocess", "in-process", "local")


def resolve_store(store=None, client=None):
    """The TrajectoryStore a tool uses. store: a TrajectoryStore (or an
    object with open, get, record and close), as is; "broker": the
    BrokerStore of `client` (a Client, a callable returning one, or None for
    the default client); "memory": default_store(); None: as
    $KGYM_TRAJECTORY_STORE says ("broker" or "memory"; unset: memory)."""
    if store is not None and not isinstance(store, str):
        if isinstance(store, TrajectoryStore) or all(
                callable(getattr(store, m, None)) for m in ("open", "get", "record", "close")):
            return store
        raise TypeError("store is a TrajectoryStore, 'broker' or 'memory', not %r" % (store,))
    source = "store"
    if store is None:
        store, source = os.environ.get(STORE_ENV, ""), "$" + STORE_ENV
    name = store.strip().lower()
    if not name or name in _MEMORY_NAMES:
        return default_store()
    if name == "broker":
        if callable(client) and not hasattr(client, "trajectory"):
            client = client()
        return broker_store(client)
    raise ValueError("%s is 'broker' or 'memory', not %r" % (source, store))
