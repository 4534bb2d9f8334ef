"""kgym.Client against a real kgym-broker and CPU kgym-worker, and against a
scripted broker for protocol edge cases."""

import asyncio
import concurrent.futures
import os
import pickle
import threading
import time
import unittest

import _env
import kgym
from kgym import _wire as W
from _fakebroker import FakeBroker, accept_and_answer, result_body, wait_until

MATMUL = "cpu/matmul_f32"
GELU = "cpu/gelu_f32"


class RealBroker(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()
        cls.client = kgym.Client(cls.cluster.endpoint, timeout_s=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_statuses_and_same_keys(self):
        items = [(MATMUL, c) for c in kgym.example_candidates(MATMUL).values()]
        items.append(("cpu/rmsnorm_f32", _env.candidate("cpu/rmsnorm_f32", "compile_error")))
        items.append((MATMUL, "I think a tiled loop would do."))       # no kernel: local invalid
        results = self.client.grade_many(items, tag="statuses", **_env.FAST)
        expected = kgym.example_expected(MATMUL)
        want = [expected[n] for n in kgym.example_candidates(MATMUL)] + ["compile_error", "invalid"]
        self.assertEqual([r.status for r in results], want)
        self.assertEqual({r.status for r in results}, {"ok", "incorrect", "compile_error", "invalid"})
        keys = set(results[0].to_dict())
        for r in results:
            self.assertEqual(set(r.to_dict()), keys)
            self.assertEqual(r.tag, "statuses")
            self.assertIsNotNone(r.latency_s)
        for r in results[:-1]:                          # graded by the worker
            self.assertEqual(r.error, "")
            # A kept result (the broker's cache, section 14.1) says "cache".
            self.assertEqual(r.worker, "cache" if r.cached and not r.coalesced else "local-0")
            self.assertIsInstance(r.job, int)
            self.assertIsNotNone(r.queue_s)
            self.assertIn("status", r.raw)
        for r in results:
            self.assertEqual(r.reward is None, r.status == "invalid")
        self.assertEqual(results[-1].error, "extract")
        self.assertTrue(results[-1].feedback)
        ok = [r for r in results if r.ok]
        self.assertTrue(all(r.reward > 0 and r.speedup for r in ok))

    def test_futures_and_as_completed(self):
        naive = _env.candidate(MATMUL, "naive")
        futs = [self.client.submit(MATMUL, naive, **_env.CHECK) for _ in range(4)]
        for f in futs:
            self.assertIsInstance(f, concurrent.futures.Future)
        seen = sorted(r.index for r in self.client.as_completed(futs))
        self.assertEqual(seen, [0, 1, 2, 3])
        self.assertTrue(all(f.result().ok for f in futs))
        # Job specs, submitted lazily as slots free up; completion order.
        specs = [(MATMUL, naive), (MATMUL, _env.candidate(MATMUL, "tail_bug")),
                 {"task": MATMUL, "candidate": naive, "tag": "dict-form"}]
        out = list(self.client.as_completed(iter(specs), **_env.CHECK))
        by_index = {r.index: r for r in out}
        self.assertEqual([by_index[i].status for i in range(3)], ["ok", "incorrect", "ok"])
        self.assertEqual(by_index[2].tag, "dict-form")

    def test_client_timeout_cancel_and_late_result(self):
        client = kgym.Client(self.cluster.endpoint, max_inflight=4)
        hang = _env.candidate(GELU, "hang")
        bypass = dict(timeout=1.0, cache="bypass")      # really run, never from the result cache
        slow = client.submit(GELU, hang, timeout_s=0.3, **bypass)
        r = slow.result(10)
        self.assertEqual((r.status, r.error, r.reward), ("internal_error", "timeout", None))
        with self.assertRaises(kgym.KgymTimeout):
            client.grade(GELU, hang, timeout_s=0.2, **bypass)
        fut = client.submit(GELU, hang, **bypass)
        time.sleep(0.1)                                   # let it reach the broker
        self.assertTrue(fut.cancel())
        self.assertTrue(fut.cancelled())
        self.assertEqual(client._slots.free, 4)           # every slot back
        # All three are cancelled at the broker (CANCEL, section 14.2), or, by a
        # broker without CANCEL, run to the end and their results dropped here.
        done = lambda h: h["late_results"] + h["cancel_done"]
        self.assertTrue(wait_until(lambda: done(client.health()) >= 3, 15), client.health())
        self.assertEqual(client.health()["cancel_sent"], 3)
        h = client.health()
        self.assertEqual((h["inflight"], h["timeouts"], h["cancelled"]), (0, 2, 1))
        client.close()

    def test_backpressure(self):
        client = kgym.Client(self.cluster.endpoint, max_inflight=2, block=False)
        rms = _env.candidate("cpu/rmsnorm_f32", "naive")
        a = client.submit("cpu/rmsnorm_f32", rms, **_env.CHECK)
        b = client.submit("cpu/rmsnorm_f32", rms, **_env.CHECK)
        with self.assertRaises(kgym.KgymBusy):
            client.submit("cpu/rmsnorm_f32", rms)
        with self.assertRaises(kgym.KgymBusy):
            client.submit("cpu/rmsnorm_f32", rms, block=True, block_timeout_s=0.01)
        # A local failure needs no slot.
        self.assertEqual(client.submit("cpu/rmsnorm_f32", "nothing").result().status, "invalid")
        c = client.submit("cpu/rmsnorm_f32", rms, block=True, **_env.CHECK)   # waits for a slot
        self.assertTrue(a.result().ok and b.result().ok and c.result().ok)
        client.close()

    def test_threads_and_asyncio_at_once(self):
        client = kgym.Client(self.cluster.endpoint, max_inflight=32)
        naive = _env.candidate(MATMUL, "naive")
        n_threads = 100
        barrier = threading.Barrier(n_threads + 1)
        results, errors = [None] * n_threads, []

        def worker(i):
            try:
                barrier.wait(10)
                results[i] = client.grade(MATMUL, naive, tag="t%d" % i, **_env.CHECK)
            except Exception as exc:          # noqa: BLE001
                errors.append(exc)

        async def loop_side():
            barrier.wait(10)
            many = await client.agrade_many([(MATMUL, naive)] * 10, **_env.CHECK)
            streamed = [r async for r in client.astream([(MATMUL, naive)] * 10, **_env.CHECK)]
            one = await client.agrade(MATMUL, naive, **_env.CHECK)
            return many + streamed + [one]

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        loop_results = asyncio.run(loop_side())
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertTrue(all(r is not None and r.ok for r in results), [r and r.status for r in results])
        self.assertEqual([r.tag for r in results], ["t%d" % i for i in range(n_threads)])
        self.assertEqual(len(loop_results), 21)
        self.assertTrue(all(r.ok for r in loop_results))
        self.assertEqual(client._slots.free, 32)
        h = client.health()
        self.assertTrue(h["ok"])
        self.assertEqual(h["inflight"], 0)
        self.assertEqual(h["completed"], 121)
        client.close()

    def test_health(self):
        h = self.client.health()
        self.assertTrue(h["ok"])
        self.assertGreaterEqual(h["rtt_s"], 0)
        fut = self.client.submit(GELU, _env.candidate(GELU, "hang"), timeout=0.5, cache="bypass")
        h = self.client.health()
        self.assertGreaterEqual(h["inflight"], 1)
        self.assertEqual(fut.result(10).status, "timeout")      # the kernel's own timeout

    def test_fork(self):
        client = kgym.Client(self.cluster.endpoint)
        naive = _env.candidate(MATMUL, "naive")
        self.assertTrue(client.grade(MATMUL, naive, **_env.CHECK).ok)
        pid = os.fork()
        if pid == 0:                                          # child: fresh context and thread
            code = 1
            try:
                r = client.grade(MATMUL, naive, **_env.CHECK)
                code = 0 if r.ok and client._io.pid == os.getpid() else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertTrue(client.grade(MATMUL, naive, **_env.CHECK).ok)      # parent unaffected
        client.close()

    def test_pickle_is_settings(self):
        client = kgym.Client(self.cluster.endpoint, max_inflight=7, eval={"trials": 1})
        clone = pickle.loads(pickle.dumps(client))
        self.assertEqual((clone.endpoint, clone.max_inflight), (client.endpoint, 7))
        self.assertTrue(clone.grade(MATMUL, _env.candidate(MATMUL, "naive"), check_only=True).ok)
        clone.close()
        client.close()

    def test_close(self):
        client = kgym.Client(self.cluster.endpoint)
        fut = client.submit(GELU, _env.candidate(GELU, "hang"), timeout=1.0, cache="bypass")
        client.close()
        r = fut.result(5)
        self.assertEqual((r.status, r.error), ("internal_error", "closed"))
        with self.assertRaises(kgym.ClientClosed):
            client.submit(MATMUL, _env.candidate(MATMUL, "naive"))
        with kgym.Client(self.cluster.endpoint) as c2:
            fut = c2.submit(MATMUL, _env.candidate(MATMUL, "naive"), **_env.CHECK)
            c2.close(wait=True)
            self.assertTrue(fut.result(0).ok)


class BrokerRestart(unittest.TestCase):

    def test_restart_on_the_same_port(self):
        _env.require_binaries()
        cport = _env.free_port()
        with _env.LocalCluster(workers=1, build_dir=_env.build_dir(), client_port=cport,
                               worker_port=_env.free_port(exclude=(cport,))) as cluster:
            client = kgym.Client(cluster.endpoint, heartbeat_s=0.2, liveness=3)
            self.addCleanup(client.close)
            naive = _env.candidate(MATMUL, "naive")
            running = client.submit(GELU, _env.candidate(GELU, "hang"), timeout=2.0)
            self.assertTrue(wait_until(lambda: client.health()["accepted"] == 1))
            cluster.stop_broker()
            waiting = client.submit(MATMUL, naive, **_env.CHECK)        # nobody to accept it
            time.sleep(0.8)
            cluster.start_broker()                                      # same ports
            r = waiting.result(30)
            self.assertEqual((r.status, r.error), ("ok", ""))
            r = running.result(30)
            self.assertEqual((r.status, r.error), ("internal_error", "broker_lost"))
            h = client.health()
            self.assertGreaterEqual(h["reconnects"], 1)
            self.assertGreaterEqual(h["resubmitted"], 1)
            self.assertTrue(client.grade(MATMUL, naive, **_env.CHECK).ok)


class ResendAccepted(unittest.TestCase):

    def test_resubmit_accepted_is_answered_not_rerun(self):
        """resubmit_accepted=True against a real broker: after a reconnect
        the accepted job is sent again (client id, retry 1) and answered from
        what the broker stored; it runs once."""
        _env.require_binaries()
        with _env.LocalCluster(workers=1, build_dir=_env.build_dir()) as cluster:
            client = kgym.Client(cluster.endpoint, heartbeat_s=0.2, liveness=2,
                                 resubmit_accepted=True)
            self.addCleanup(client.close)
            # A kernel that runs into its 2 s limit: still running while the broker is away.
            fut = client.submit(GELU, _env.candidate(GELU, "hang"), cache="bypass", timeout=2.0)
            self.assertTrue(wait_until(lambda: client.health()["accepted_total"] == 1))
            cluster.pause_broker()              # silent: the client reconnects
            try:
                self.assertTrue(wait_until(lambda: client.health(0.1)["reconnects"] >= 1, 10))
            finally:
                cluster.resume_broker()
            r = fut.result(30)
            self.assertEqual((r.status, r.error, r.job), ("timeout", "", fut.job))
            self.assertGreaterEqual(client.health()["resubmitted"], 1)
            self.assertEqual(client.stats()["counts"]["submitted"], 1)      # stored once, run once


class ScriptedBroker(unittest.TestCase):

    def make(self, handler, **kw):
        broker = FakeBroker(handler)
        self.addCleanup(broker.stop)
        kw.setdefault("heartbeat_s", 0.1)
        kw.setdefault("liveness", 3)
        client = kgym.Client(broker.endpoint, **kw)
        self.addCleanup(client.close)
        return broker, client

    cand = {"source": "void k(void) {}", "launches": [{"kernel": "k"}]}
    task = "cpu/matmul_f32"

    def test_headers(self):
        broker, client = self.make(accept_and_answer)
        r = client.grade(self.task, self.cand, tag="tg", group="g7", trajectory="traj-1", seed=3)
        self.assertEqual((r.status, r.worker, r.queue_s, r.job), ("ok", "fake", 0.5, 101))
        self.assertEqual((r.group, r.trajectory, r.tag), ("g7", "traj-1", "tg"))
        (_, header), = broker.submits()
        self.assertEqual(header["backend"], "cpu")
        self.assertEqual((header["tag"], header["group"], header["trajectory"]), ("tg", "g7", "traj-1"))
        self.assertEqual(header["ref"], 1)
        self.assertTrue(header["client"])
        self.assertNotIn("retry", header)

    def test_reconnect_resubmits_unaccepted(self):
        def handler(broker, peer, command, header, body):
            idx = broker.peer_index(peer)
            if idx == 0:                                  # the first connection: silence,
                if command == W.SUBMIT and header["ref"] == 1:      # but accept ref 1
                    broker.send(peer, W.ACCEPTED, {"ref": 1, "job": 1})
                return
            accept_and_answer(broker, peer, command, header, body)

        broker, client = self.make(handler)
        accepted = client.submit(self.task, self.cand)
        waiting = client.submit(self.task, self.cand)
        r = waiting.result(10)
        self.assertEqual(r.status, "ok")
        a = accepted.result(10)
        self.assertEqual((a.status, a.error), ("internal_error", "broker_lost"))
        self.assertGreaterEqual(len(broker.peers), 2)
        resent = [h for i, h in broker.submits() if i >= 1]
        self.assertEqual({h["ref"] for h in resent}, {2})        # never the accepted one
        self.assertTrue(all(h.get("retry") == 1 for h in resent))
        h = client.health()
        self.assertGreaterEqual(h["reconnects"], 1)
        self.assertGreaterEqual(h["resubmitted"], 1)

    def test_reconnect_resubmit_accepted_option(self):
        def handler(broker, peer, command, header, body):
            if broker.peer_index(peer) == 0:
                if command == W.SUBMIT:
                    broker.send(peer, W.ACCEPTED, {"ref": header["ref"], "job": 1})
                return
            accept_and_answer(broker, peer, command, header, body)

        broker, client = self.make(handler, resubmit_accepted=True)
        self.assertEqual(client.grade(self.task, self.cand).status, "ok")

    def test_overloaded_is_retried(self):
        def handler(broker, peer, command, header, body):
            if command == W.SUBMIT and not broker.state.get("refused"):
                broker.state["refused"] = True
                broker.send(peer, W.ERROR, {"code": 429, "reason": "overloaded", "ref": header["ref"]})
                return
            accept_and_answer(broker, peer, command, header, body)

        broker, client = self.make(handler)
        self.assertEqual(client.grade(self.task, self.cand).status, "ok")
        self.assertEqual(len(broker.submits()), 2)
        self.assertEqual(client.health()["overloaded"], 1)

    def test_refused_and_bad_bodies(self):
        def handler(broker, peer, command, header, body):
            if command == W.HEARTBEAT:
                broker.send(peer, W.HEARTBEAT)
            elif command == W.SUBMIT:
                ref = header["ref"]
                if ref in (1, 2):
                    broker.send(peer, W.ERROR, {"code": 400, "reason": "SUBMIT without 'backend'", "ref": ref})
                elif ref == 3:
                    broker.send(peer, None, raw=[b"JUNK", b"\x80"])        # malformed: ignored
                    broker.send(peer, W.RESULT, {"job": 9, "ref": ref, "attempt": 1}, b"\x93\x01\x02\x03")
                else:
                    broker.send(peer, W.RESULT, {"job": 10, "ref": ref, "attempt": 1},
                                result_body(cached=True, group_summary={"n": 8}, profile={"dram": 0.7}))

        broker, client = self.make(handler)
        r = client.grade(self.task, self.cand, raise_on_error=False)
        self.assertEqual((r.status, r.error), ("invalid", "broker_refused"))
        self.assertIn("400", r.message)
        with self.assertRaises(kgym.BrokerRefused):
            client.grade(self.task, self.cand)
        r = client.grade(self.task, self.cand, raise_on_error=False)
        self.assertEqual((r.status, r.error), ("internal_error", "bad_result"))
        r = client.grade(self.task, self.cand)
        self.assertEqual((r.status, r.cached, r.profile, r.job), ("ok", True, {"dram": 0.7}, 10))
        self.assertEqual(r.get("group_summary"), {"n": 8})
        self.assertEqual(client.health()["malformed"], 1)

    def test_late_result_after_cancel_is_dropped(self):
        broker, client = self.make(lambda b, p, c, h, body: accept_and_answer(b, p, c, h, body, delay=0.5))
        fut = client.submit(self.task, self.cand)
        self.assertTrue(wait_until(lambda: broker.submits()))
        time.sleep(0.05)
        fut.cancel()
        self.assertTrue(wait_until(lambda: client.health()["late_results"] == 1, 5))
        self.assertEqual(client.grade(self.task, self.cand).status, "ok")

    def test_no_broker(self):
        client = kgym.Client("tcp://127.0.0.1:9", heartbeat_s=0.1, liveness=2, give_up_s=0.6)
        self.addCleanup(client.close)
        t0 = time.monotonic()
        r = client.grade(self.task, self.cand, raise_on_error=False)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual((r.status, r.error, r.reward), ("internal_error", "broker_lost", None))
        with self.assertRaises(kgym.BrokerLost):
            client.grade(self.task, self.cand)
        self.assertFalse(client.health(timeout_s=0.3)["ok"])


if __name__ == "__main__":
    unittest.main()
