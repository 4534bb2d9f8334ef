"""Trajectory state at the broker (docs/protocol.md 14.6): Client.trajectory
and kgym.store.BrokerStore, against a real kgym-broker (the shared test
cluster). Every test uses trajectory ids of its own."""

import asyncio
import os
import pathlib
import threading
import time
import unittest
import uuid
from unittest import mock

import _env
import kgym
from kgym import store as S


def tid(label="t"):
    return "%s-%s" % (label, uuid.uuid4().hex)


class _Broker(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()
        cls.client = kgym.Client(cls.cluster.endpoint, timeout_s=60)
        cls.other = kgym.Client(cls.cluster.endpoint, timeout_s=60)   # another "process"

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.other.close()


class ClientTrajectory(_Broker):

    def test_get_put_close_versions(self):
        c, t = self.client, tid()
        self.assertEqual(c.trajectory(t), (None, 0))
        self.assertEqual(c.trajectory(t, "put", {"n": 1}, if_version=0), ({"n": 1}, 1))
        self.assertEqual(c.trajectory(t, "put", {"n": 2}), ({"n": 2}, 2))     # unconditional
        self.assertEqual(self.other.trajectory(t, "get"), ({"n": 2}, 2))
        self.assertEqual(c.trajectory(t, "put", {"n": 3}, if_version=2), ({"n": 3}, 3))
        self.assertEqual(c.trajectory(t, "close"), ({"n": 3}, 0))
        self.assertEqual(c.trajectory(t, "get"), (None, 0))
        self.assertEqual(c.trajectory(t, "close"), (None, 0))
        self.assertEqual(c.trajectory(12345, "get"), (None, 0))                # ints as str

    def test_conflict_on_stale_version(self):
        c, t = self.client, tid()
        c.trajectory(t, "put", {"v": "a"}, if_version=0)
        with self.assertRaises(kgym.Conflict) as cm:                          # exists already
            self.other.trajectory(t, "put", {"v": "b"}, if_version=0)
        self.assertEqual((cm.exception.code, cm.exception.version), (409, 1))
        _, version = self.other.trajectory(t)
        self.assertEqual(self.other.trajectory(t, "put", {"v": "b"}, if_version=version)[1], 2)
        with self.assertRaises(kgym.Conflict) as cm:                          # read 1, now 2
            c.trajectory(t, "put", {"v": "c"}, if_version=1)
        exc = cm.exception
        self.assertIsInstance(exc, kgym.QueryError)
        self.assertEqual(exc.version, 2)
        self.assertFalse(exc.resent)
        self.assertIn("409", str(exc))
        self.assertEqual(c.trajectory(t), ({"v": "b"}, 2))                    # unchanged
        c.trajectory(t, "close")

    def test_too_large_and_bad_arguments(self):
        c, t = self.client, tid()
        with self.assertRaises(kgym.StateTooLarge) as cm:                     # seen here
            c.trajectory(t, "put", {"blob": "x" * (1 << 20)})
        self.assertEqual(cm.exception.code, 413)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(c.trajectory(t), (None, 0))
        near = "y" * ((1 << 20) - 16)                                         # just fits
        self.assertEqual(c.trajectory(t, "put", {"blob": near})[1], 1)
        with self.assertRaises(kgym.BadQuery) as cm:
            c.trajectory(t, "put", {"score": float("nan")})
        self.assertIn("state['score'] is not a finite number", str(cm.exception))
        for bad in (dict(op="put"), dict(op="drop"), dict(op="get", state={}),
                    dict(op="get", if_version=1), dict(op="put", state={}, if_version=-1)):
            with self.assertRaises(ValueError, msg=bad):
                c.trajectory(t, **bad)
        for bad_id in ("", "x" * 256, "a\0b"):
            with self.assertRaises(ValueError):
                c.trajectory(bad_id)
        with self.assertRaises(TypeError):
            c.trajectory(None)
        with self.assertRaises(TypeError):
            c.trajectory(t, "put", {"x": object()})
        c.trajectory(t, "close")

    def test_async(self):
        c, t = self.client, tid()

        async def go():
            first = await c.atrajectory(t, "put", [1, 2], if_version=0)
            try:
                await c.atrajectory(t, "put", [3], if_version=0)
            except kgym.Conflict as exc:
                conflict = exc
            return first, conflict, await c.atrajectory(t, "close")

        first, conflict, closed = asyncio.run(go())
        self.assertEqual(first, ([1, 2], 1))
        self.assertEqual(conflict.version, 1)
        self.assertEqual(closed, ([1, 2], 0))


class _Sneak:
    """A client stand-in for a BrokerStore: before its first put, another
    writer records an attempt into the same trajectory, so that put loses."""

    def __init__(self, client, intruder, sneak_in):
        self.client, self.intruder, self.sneak_in = client, intruder, sneak_in
        self.sneaked = False

    def trajectory(self, trajectory_id, op="get", state=None, if_version=None, **kw):
        if op == "put" and if_version and not self.sneaked:     # a record's put, not open's
            self.sneaked = True
            self.sneak_in(self.intruder, trajectory_id)
        return self.client.trajectory(trajectory_id, op, state, if_version, **kw)


class _LostAnswer:
    """A client stand-in whose first conditional put is applied at the broker
    but answered 409 as if sent again after a reconnect (Conflict.resent)."""

    def __init__(self, client):
        self.client = client
        self.lost = False

    def trajectory(self, trajectory_id, op="get", state=None, if_version=None, **kw):
        answer = self.client.trajectory(trajectory_id, op, state, if_version, **kw)
        if op == "put" and if_version and not self.lost:
            self.lost = True
            exc = kgym.Conflict("query 'trajectory': the broker answered ERROR 409", 409,
                                "trajectory %r is at version %d, not %d"
                                % (trajectory_id, answer[1], if_version))
            exc.resent = True
            raise exc
        return answer


class BrokerStoreTests(_Broker):

    def test_round_trip(self):
        store, t = kgym.BrokerStore(self.client), tid()
        self.assertIsNone(store.get(t))
        self.assertEqual(len(store), 0)
        state = store.open(t, "cpu/matmul_f32", group="g1")
        self.assertEqual(set(state), {"trajectory", "task", "info", "attempts", "best_score",
                                      "last_score", "created"})
        self.assertEqual((state["trajectory"], state["task"], state["info"], state["attempts"],
                          state["best_score"], state["last_score"]),
                         (t, "cpu/matmul_f32", {"group": "g1"}, [], None, None))
        self.assertAlmostEqual(state["created"], time.time(), delta=60)
        self.assertEqual(len(store), 1)
        again = store.open(t, "cpu/other", group="g2")                        # exists: unchanged
        self.assertEqual(again, state)
        s1 = store.record(t, {"status": "incorrect", "score": -0.5, "job": 7})
        self.assertEqual((s1["best_score"], s1["last_score"], len(s1["attempts"])), (-0.5, -0.5, 1))
        s2 = store.record(t, {"status": "ok", "score": 1.25, "speedup": (1, 2)})
        s3 = store.record(t, {"status": "timeout", "score": float("nan")})    # NaN: None there
        self.assertEqual((s3["best_score"], s3["last_score"]), (1.25, None))
        got = store.get(t)
        self.assertEqual(got, s3)
        self.assertEqual([a["status"] for a in got["attempts"]], ["incorrect", "ok", "timeout"])
        self.assertEqual(got["attempts"][1]["speedup"], [1, 2])               # JSON: a list
        self.assertEqual(s2["attempts"][0], {"status": "incorrect", "score": -0.5, "job": 7})
        self.assertEqual(store.close(t), got)
        self.assertEqual(len(store), 0)
        self.assertIsNone(store.get(t))
        self.assertIsNone(store.close(t))
        with self.assertRaises(KeyError):
            store.record(t, {"score": 1.0})
        self.assertEqual(store.conflicts, 0)

    def test_task_forms(self):
        store = kgym.BrokerStore(self.client)
        task_obj = kgym.resolve_task("cpu/matmul_f32")
        path = pathlib.Path(str(kgym.examples_dir())) / "cpu" / "rmsnorm_f32"
        for task, kept in (("cpu/matmul_f32", "cpu/matmul_f32"), (task_obj, task_obj),
                           (path, str(path)), (None, None)):
            t = tid()
            self.assertEqual(store.open(t, task)["task"], kept)
            self.assertEqual(store.get(t)["task"], kept)
            store.close(t)
        with self.assertRaises(TypeError) as cm:
            store.open(tid(), object())
        self.assertIn("JSON", str(cm.exception))
        self.assertEqual(len(store), 0)

    def test_shared_between_clients(self):
        """Two Client objects (two processes, as far as the broker knows)."""
        a, b, t = kgym.BrokerStore(self.client), kgym.BrokerStore(self.other), tid()
        a.open(t, "cpu/matmul_f32")
        a.record(t, {"status": "incorrect", "score": -0.5})
        seen = b.get(t)
        self.assertEqual([x["status"] for x in seen["attempts"]], ["incorrect"])
        self.assertEqual(b.open(t, "ignored")["attempts"], seen["attempts"])  # opens the same
        b.record(t, {"status": "ok", "score": 2.0})
        self.assertEqual([x["status"] for x in a.get(t)["attempts"]], ["incorrect", "ok"])
        self.assertEqual((len(a), len(b)), (1, 1))                            # per store object
        self.assertEqual(len(b.close(t)["attempts"]), 2)
        self.assertIsNone(a.get(t))
        self.assertEqual((len(a), len(b)), (1, 0))                            # a never saw it

    def test_concurrent_record_loses_nothing(self):
        """8 threads over 2 clients record into one trajectory at once: the
        if_version retries keep every attempt."""
        threads_n, per_thread, t = 8, 12, tid("race")
        stores = [kgym.BrokerStore(self.client), kgym.BrokerStore(self.other)]
        stores[0].open(t, "cpu/matmul_f32")
        start = threading.Barrier(threads_n)
        errors = []

        def writer(k):
            store = stores[k % 2]
            try:
                start.wait()
                for i in range(per_thread):
                    store.record(t, {"status": "ok", "score": float(k * 100 + i), "who": [k, i]})
            except Exception as exc:         # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(threads_n)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        self.assertEqual(errors, [])
        state = stores[1].get(t)
        who = sorted(tuple(a["who"]) for a in state["attempts"])
        self.assertEqual(who, sorted((k, i) for k in range(threads_n) for i in range(per_thread)))
        self.assertEqual(state["best_score"], float((threads_n - 1) * 100 + per_thread - 1))
        for k in range(threads_n):                                            # each in order
            mine = [a["who"][1] for a in state["attempts"] if a["who"][0] == k]
            self.assertEqual(mine, list(range(per_thread)))
        _, version = self.client.trajectory(t)
        self.assertEqual(version, 1 + threads_n * per_thread)                 # one put each
        if os.environ.get("KGYM_TEST_SHOW"):
            print("\n  concurrent record: %d attempts, %d conflicts retried"
                  % (len(who), stores[0].conflicts + stores[1].conflicts))
        stores[0].close(t)

    def test_conflict_retried(self):
        """A put that loses to another writer is retried on the new state."""
        t = tid()
        intruder = kgym.BrokerStore(self.other)
        sneak = _Sneak(self.client, intruder,
                       lambda store, key: store.record(key, {"status": "ok", "score": 3.0}))
        store = kgym.BrokerStore(sneak)
        store.open(t, "cpu/matmul_f32")
        state = store.record(t, {"status": "incorrect", "score": -0.5})
        self.assertEqual([a["score"] for a in state["attempts"]], [3.0, -0.5])
        self.assertEqual((state["best_score"], state["last_score"]), (3.0, -0.5))
        self.assertEqual(store.conflicts, 1)
        self.assertEqual(store.get(t), state)
        # With no retries left the attempt is refused, not lost silently.
        t2 = tid()
        sneak2 = _Sneak(self.client, intruder,
                        lambda store, key: store.record(key, {"status": "ok", "score": 1.0}))
        strict = kgym.BrokerStore(sneak2, retries=0)
        strict.open(t2, "cpu/matmul_f32")
        with self.assertRaises(kgym.Conflict) as cm:
            strict.record(t2, {"status": "incorrect", "score": -0.5})
        self.assertIn("not recorded", str(cm.exception))
        self.assertEqual(len(strict.get(t2)["attempts"]), 1)                  # the intruder's
        store.close(t)
        strict.close(t2)

    def test_resent_put_that_landed(self):
        """A 409 for a put sent again after a reconnect, whose first copy was
        applied: the attempt is there once, not twice."""
        t = tid()
        store = kgym.BrokerStore(_LostAnswer(self.client))
        store.open(t, "cpu/matmul_f32")
        state = store.record(t, {"status": "ok", "score": 1.0})
        self.assertEqual(len(state["attempts"]), 1)
        self.assertEqual(store.conflicts, 0)
        self.assertEqual(self.client.trajectory(t), (state, 2))
        store.close(t)

    def test_state_too_large(self):
        store, t = kgym.BrokerStore(self.client), tid()
        store.open(t, "cpu/matmul_f32")
        store.record(t, {"status": "ok", "score": 1.0, "message": "m" * 1000})
        with self.assertRaises(kgym.StateTooLarge) as cm:
            store.record(t, {"status": "incorrect", "score": -0.5, "message": "x" * (1 << 20)})
        self.assertIn("not recorded", str(cm.exception))
        self.assertIn("1048576", str(cm.exception))
        self.assertEqual(len(store.get(t)["attempts"]), 1)                    # unchanged
        store.close(t)

    def test_async_methods(self):
        store, t = kgym.BrokerStore(self.client), tid()

        async def go():
            await store.aopen(t, "cpu/matmul_f32")
            await asyncio.gather(*[store.arecord(t, {"status": "ok", "score": float(i)})
                                   for i in range(6)])
            got = await store.aget(t)
            return got, await store.aclose(t)

        got, closed = asyncio.run(go())
        self.assertEqual(sorted(a["score"] for a in got["attempts"]), [0.0, 1, 2, 3, 4, 5])
        self.assertEqual(got["best_score"], 5.0)
        self.assertEqual(closed, got)
        self.assertEqual(len(store), 0)

    def test_len_is_bounded(self):
        store = kgym.BrokerStore(self.client, max_tracked=3)
        ids = [tid() for _ in range(5)]
        for t in ids:
            store.open(t, "cpu/matmul_f32")
        self.assertEqual(len(store), 3)
        for t in ids:
            store.close(t)
        self.assertEqual(len(store), 0)


class ResolveStore(unittest.TestCase):

    def test_choices(self):
        client = kgym.Client("tcp://127.0.0.1:1")          # never used: nothing is sent
        try:
            with mock.patch.dict(os.environ, {S.STORE_ENV: ""}):
                self.assertIs(S.resolve_store(None, client), S.default_store())
                self.assertIs(S.resolve_store("memory", client), S.default_store())
                b = S.resolve_store("broker", client)
                self.assertIsInstance(b, kgym.BrokerStore)
                self.assertIs(b.client, client)
                self.assertIs(S.resolve_store("broker", lambda: client), b)   # one per client
                mine = kgym.InProcessStore()
                self.assertIs(S.resolve_store(mine, client), mine)
                with self.assertRaises(ValueError):
                    S.resolve_store("redis", client)
                with self.assertRaises(TypeError):
                    S.resolve_store(42, client)
            with mock.patch.dict(os.environ, {S.STORE_ENV: "broker"}):
                self.assertIs(S.resolve_store(None, client), b)
                self.assertIs(S.resolve_store("memory", client), S.default_store())
            with mock.patch.dict(os.environ, {S.STORE_ENV: "bogus"}):
                with self.assertRaises(ValueError) as cm:
                    S.resolve_store(None, client)
                self.assertIn(S.STORE_ENV, str(cm.exception))
        finally:
            client.close()
        self.assertIsNot(S.broker_store(client), b)                          # closed: a new one


if __name__ == "__main__":
    unittest.main()
