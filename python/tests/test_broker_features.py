"""Result cache, coalescing, CANCEL, QUERY/ANSWER and group SUMMARYs
(docs/protocol.md section 14): against a real kgym-broker and CPU kgym-worker
(their own, so the cache and the counters start empty), and against a
scripted broker for the client's side of each exchange."""

import asyncio
import random
import threading
import time
import unittest
import uuid

import _env
import kgym
from kgym import _wire as W
import msgpack
from _fakebroker import FakeBroker, accept_and_answer, result_body, wait_until

MATMUL = "cpu/matmul_f32"
GELU = "cpu/gelu_f32"


def unique_reward():
    """A reward setting no other job has: the reward is part of the cache key
    (the seed and the tag are not), so this job is a cache miss."""
    return {"clip": 2.0 + random.random()}


# ---------------------------------------------------------------- a real broker

class RealFeatures(unittest.TestCase):
    """One broker and one CPU worker of this class's own."""

    @classmethod
    def setUpClass(cls):
        _env.require_binaries()
        cls.cluster = _env.LocalCluster(workers=1, build_dir=_env.build_dir())
        cls.cluster.start()
        cls.client = kgym.Client(cls.cluster.endpoint, timeout_s=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.stop()

    def naive(self):
        return _env.candidate(MATMUL, "naive")

    def worker_done(self):
        (w,) = [w for w in self.client.workers() if w["name"] == "local-0"]
        return w["done"]

    def test_cache_use_refresh_bypass(self):
        c = self.client
        opts = dict(_env.CHECK, reward=unique_reward())
        first = c.grade(MATMUL, self.naive(), tag="first", **opts)
        self.assertEqual((first.status, first.cached, first.coalesced), ("ok", False, False))
        hits0 = c.stats()["counts"]["cache_hits"]
        done0 = self.worker_done()
        # The same job again, another seed and tag (not in the key): answered from the cache.
        second = c.grade(MATMUL, self.naive(), seed=99, tag="again", **opts)
        self.assertEqual((second.status, second.cached), ("ok", True))
        self.assertNotEqual(second.job, first.job)
        self.assertEqual(second.tag, "again")         # the caller's tag, not the kept result's
        self.assertEqual(second.worker, "cache")
        stats = c.stats()
        self.assertGreaterEqual(stats["counts"]["cache_hits"], hits0 + 1)
        self.assertEqual(self.worker_done(), done0)             # not graded again
        self.assertTrue(c.job(second.job)["cached"])
        self.assertGreaterEqual(c.cache_stats()["hits"], 1)
        # refresh: graded again, and kept in place of the old one.
        fresh = c.grade(MATMUL, self.naive(), cache="refresh", **opts)
        self.assertEqual((fresh.status, fresh.cached), ("ok", False))
        self.assertEqual(self.worker_done(), done0 + 1)
        self.assertFalse(c.job(fresh.job)["cached"])
        again = c.grade(MATMUL, self.naive(), **opts)
        self.assertTrue(again.cached)
        # bypass: graded, never from the cache.
        hits1 = c.stats()["counts"]["cache_hits"]
        by = c.grade(MATMUL, self.naive(), cache="bypass", **opts)
        self.assertEqual((by.status, by.cached, by.coalesced), ("ok", False, False))
        self.assertEqual(self.worker_done(), done0 + 2)
        self.assertEqual(c.stats()["counts"]["cache_hits"], hits1)
        # A failure verdict is cached too, and keeps its status.
        bug = dict(_env.CHECK, reward=unique_reward())
        a = c.grade(MATMUL, _env.candidate(MATMUL, "tail_bug"), **bug)
        b = c.grade(MATMUL, _env.candidate(MATMUL, "tail_bug"), **bug)
        self.assertEqual((a.status, a.cached, b.status, b.cached), ("incorrect", False, "incorrect", True))

    def test_coalescing(self):
        opts = dict(_env.FAST, reward=unique_reward())
        futs = [self.client.submit(MATMUL, self.naive(), **opts) for _ in range(4)]
        results = [f.result(60) for f in futs]
        self.assertEqual({r.status for r in results}, {"ok"})
        shared = [r for r in results if r.coalesced or r.cached]
        self.assertGreaterEqual(len(shared), 1, [(r.cached, r.coalesced) for r in results])
        self.assertTrue(all(r.cached for r in results if r.coalesced))
        self.assertEqual(len({r.job for r in results}), 4)       # four jobs, one run (or so)
        self.assertLess(sum(1 for r in results if not r.cached), 4)

    def test_query_errors(self):
        c = self.client
        with self.assertRaises(kgym.NotFound) as cm:
            c.job(1)                                # ids start at the broker's start time in µs
        self.assertEqual(cm.exception.code, 404)
        self.assertTrue(cm.exception.reason)
        self.assertIsInstance(cm.exception, kgym.KgymError)
        with self.assertRaises(kgym.BadQuery) as cm:
            c.query("no-such-question")
        self.assertEqual(cm.exception.code, 400)
        with self.assertRaises(kgym.BadQuery):
            c.query("jobs")                         # one of tag, group, trajectory is needed
        with self.assertRaises(ValueError):
            c.jobs()                                # caught here already
        with self.assertRaises(ValueError):
            c.tasks(band=(1, 0))
        self.assertTrue(c.health()["ok"])           # the connection is fine after errors

    def test_job_jobs_results_and_aquery(self):
        c = self.client
        tag = "q-%s" % uuid.uuid4().hex[:8]
        traj = "traj-%s" % uuid.uuid4().hex[:8]
        rs = c.grade_many([(MATMUL, self.naive()), (MATMUL, _env.candidate(MATMUL, "tail_bug"))],
                          tag=tag, trajectory=traj, **_env.CHECK)
        self.assertEqual([r.status for r in rs], ["ok", "incorrect"])
        j = c.job(rs[0].job)
        self.assertEqual((j["job"], j["state"], j["backend"], j["task"], j["tag"], j["trajectory"]),
                         (rs[0].job, "done", "cpu", "matmul_f32", tag, traj))
        self.assertEqual(j["status"], "ok")
        self.assertEqual(j["result"]["status"], "ok")
        self.assertIsNotNone(j["finished"])
        listed = c.jobs(tag=tag)
        self.assertIsInstance(listed, kgym.QueryList)
        self.assertEqual(sorted(x["job"] for x in listed), sorted(r.job for r in rs))
        self.assertFalse(listed.truncated)
        self.assertTrue(all(x.get("result") is None for x in listed))   # results=False
        with_results = c.jobs(trajectory=traj, results=True)
        self.assertEqual({x["result"]["status"] for x in with_results}, {"ok", "incorrect"})
        cut = c.jobs(tag=tag, limit=1)
        self.assertEqual(len(cut), 1)
        self.assertTrue(cut.truncated)
        self.assertEqual(cut[0]["job"], max(r.job for r in rs))          # newest first
        res = c.results(MATMUL)                 # a bundled name is sent as the task's name
        self.assertTrue({r.job for r in rs} <= {x["job"] for x in res})
        self.assertEqual(res, c.results("matmul_f32"))
        for x in res:
            self.assertIn("cached", x)

        async def main():
            stats = await c.aquery("stats")
            job = await c.aquery("job", job=rs[1].job)
            with self.assertRaises(kgym.NotFound):
                await c.aquery("job", job=1)
            return stats, job
        stats, job = asyncio.run(main())
        self.assertIn("counts", stats)
        self.assertEqual(job["job"]["status"], "incorrect")

    def test_stats_workers_tasks(self):
        c = self.client
        c.grade_many([(MATMUL, self.naive()), (MATMUL, _env.candidate(MATMUL, "tail_bug"))],
                     **_env.CHECK)
        stats = c.stats()
        for key in ("uptime_s", "queued", "in_flight", "workers", "counts", "statuses", "rate_1m",
                    "rate_10s", "pass_rate", "cache"):
            self.assertIn(key, stats)
        for key in ("submitted", "completed", "cancelled", "cache_hits", "coalesced"):
            self.assertIn(key, stats["counts"])
        self.assertGreaterEqual(stats["counts"]["completed"], 2)
        workers = c.workers()
        (w,) = [w for w in workers if w["name"] == "local-0"]
        self.assertEqual((w["backend"], w["state"] in ("idle", "busy")), ("cpu", True))
        self.assertGreaterEqual(w["done"], 1)
        self.assertGreaterEqual(w["capacity"], 1)
        tasks = c.tasks(band=(0, 1))
        names = {t.get("task", t.get("name")) for t in tasks}
        self.assertIn("matmul_f32", names)
        (m,) = [t for t in tasks if t.get("task", t.get("name")) == "matmul_f32"]
        self.assertGreaterEqual(m["attempts"], 2)
        self.assertTrue(0 < m["pass_rate"] < 1)             # an ok and an incorrect
        self.assertIn("matmul_f32", {t.get("task", t.get("name")) for t in c.tasks()})
        none = c.tasks(band=(0, 1), min_attempts=10 ** 9)
        self.assertEqual(list(none), [])

    def test_group_summary(self):
        c = self.client
        group = "grp-%s" % uuid.uuid4().hex[:8]
        names = ["naive", "optimised", "tail_bug", "caches_answer"]
        items = [(MATMUL, _env.candidate(MATMUL, n)) for n in names]
        items.append((MATMUL, "no kernel in this completion"))     # local invalid: not in the group
        rs = c.grade_many(items, group=group, **_env.FAST)
        self.assertEqual([r.status for r in rs], ["ok", "ok", "incorrect", "incorrect", "invalid"])
        self.assertTrue(all(r.group == group for r in rs))
        s = c.group_summary(group, timeout_s=30)
        self.assertEqual((s["group"], s["count"], s["declared_size"], s["cancelled"]), (group, 4, 4, 0))
        self.assertEqual({k: v for k, v in s["statuses"].items() if v}, {"ok": 2, "incorrect": 2})
        self.assertAlmostEqual(s["pass_rate"], 0.5)
        self.assertEqual(sorted(s["jobs"]), sorted(r.job for r in rs[:4]))
        # "rewards (non-null ones)": the broker sends their count; a list would do too.
        self.assertEqual(s["rewards"] if isinstance(s["rewards"], int) else len(s["rewards"]), 4)
        self.assertFalse(s["zero_variance"])
        self.assertIn(s["best_job"], s["jobs"])
        self.assertEqual(c.health()["summaries"], 1)
        listed = c.jobs(group=group)
        self.assertEqual(sorted(x["job"] for x in listed), sorted(r.job for r in rs[:4]))
        # submit() with an explicit group_size; the summary waits for both.
        group2 = "grp-%s" % uuid.uuid4().hex[:8]
        f1 = c.submit(MATMUL, self.naive(), group=group2, group_size=2, **_env.CHECK)
        self.assertEqual(f1.result(60).status, "ok")
        with self.assertRaises(kgym.KgymTimeout):
            c.group_summary(group2, timeout_s=0.5)          # one of two ended: none yet
        f2 = c.submit(MATMUL, self.naive(), group=group2, group_size=2, **_env.CHECK)

        async def wait():
            return await c.agroup_summary(group2, timeout_s=30)
        s2 = asyncio.run(wait())
        self.assertEqual((s2["count"], s2["declared_size"]), (2, 2))
        self.assertTrue(s2["zero_variance"])                # the same kernel twice
        self.assertEqual(f2.result(0).status, "ok")


class RealCancel(unittest.TestCase):
    """CANCEL of queued jobs: a broker with no worker yet."""

    def test_cancel_queued_and_timed_out(self):
        _env.require_binaries()
        cluster = _env.LocalCluster(workers=0, build_dir=_env.build_dir())
        cluster.start()
        self.addCleanup(cluster.stop)
        client = kgym.Client(cluster.endpoint, timeout_s=60)
        self.addCleanup(client.close)
        naive = _env.candidate(MATMUL, "naive")
        fut = client.submit(MATMUL, naive, **_env.CHECK)
        self.assertTrue(wait_until(lambda: fut.job is not None, 10))
        self.assertEqual(client.job(fut.job)["state"], "queued")
        self.assertTrue(fut.cancel())
        self.assertTrue(wait_until(lambda: client.health()["cancel_done"] == 1, 10), client.health())
        # A client-side timeout cancels at the broker too.
        slow = client.submit(MATMUL, naive, timeout_s=0.3, **_env.CHECK)
        r = slow.result(10)
        self.assertEqual((r.status, r.error), ("internal_error", "timeout"))
        self.assertTrue(wait_until(lambda: client.health()["cancel_done"] == 2, 10), client.health())
        self.assertIsNotNone(slow.job)
        # Now a worker comes: neither is dispatched, a new job is.
        cluster.add_worker()
        r = client.grade(MATMUL, naive, **_env.CHECK)
        self.assertEqual((r.status, r.cached), ("ok", False))
        for job_id in (fut.job, slow.job):
            j = client.job(job_id)
            self.assertEqual(j["state"], "cancelled", j)
            self.assertEqual(j["attempt"], 0, j)
            self.assertFalse(j.get("worker"), j)
            self.assertIsNone(j.get("result"), j)
        (w,) = client.workers()
        self.assertEqual(w["done"], 1)
        self.assertGreaterEqual(client.stats()["counts"]["cancelled"], 2)
        h = client.health()
        self.assertEqual((h["cancel_sent"], h["cancel_done"], h["late_results"], h["stray"]),
                         (2, 2, 0, 0))


# ---------------------------------------------------------------- a scripted broker

CAND = {"source": "void k(void) {}", "launches": [{"kernel": "k"}]}
TASK = "cpu/matmul_f32"


class Scripted(unittest.TestCase):

    def make(self, handler, **kw):
        broker = FakeBroker(handler)
        self.addCleanup(broker.stop)
        kw.setdefault("heartbeat_s", 0.1)
        kw.setdefault("liveness", 3)
        client = kgym.Client(broker.endpoint, **kw)
        self.addCleanup(client.close)
        return broker, client

    def commands(self, broker, command):
        return [h for _, c, h in list(broker.log) if c == command]

    def test_submit_header_fields(self):
        broker, client = self.make(accept_and_answer, cache="refresh")
        client.grade(TASK, CAND, group="g1", group_size=8, trajectory="t1")
        client.grade(TASK, CAND, cache="bypass", group="g2")
        client.grade(TASK, CAND, cache="use")
        (_, h1), (_, h2), (_, h3) = broker.submits()
        self.assertEqual((h1["group"], h1["group_size"], h1["trajectory"], h1["cache"]),
                         ("g1", 8, "t1", "refresh"))
        self.assertEqual((h2["cache"], h2["group"]), ("bypass", "g2"))
        self.assertNotIn("group_size", h2)
        self.assertEqual(h3["cache"], "use")
        for bad in (dict(cache="never"), dict(cache=True), dict(group="g", group_size=-1),
                    dict(group="g", group_size=1 << 32), dict(group_size=3)):
            with self.assertRaises(ValueError, msg=bad):
                client.submit(TASK, CAND, **bad)
        with self.assertRaises(ValueError):
            kgym.Client(broker.endpoint, cache="sometimes")
        self.assertEqual(client._slots.free, client.max_inflight)       # no slot leaked
        broker2, plain = self.make(accept_and_answer)
        plain.grade(TASK, CAND)
        (_, h), = broker2.submits()
        self.assertFalse({"cache", "group_size", "group"} & set(h))

    def test_grade_many_sets_group_size(self):
        broker, client = self.make(accept_and_answer)
        items = [(TASK, CAND), (TASK, CAND), (TASK, "no kernel here"), (TASK, CAND),
                 (TASK, CAND, {"group": "other"})]
        rs = client.grade_many(items, group="G")
        self.assertEqual([r.status for r in rs], ["ok", "ok", "invalid", "ok", "ok"])
        self.assertEqual([r.group for r in rs], ["G", "G", "G", "G", "other"])
        heads = [h for _, h in broker.submits()]
        self.assertEqual(sorted((h["group"], h.get("group_size")) for h in heads),
                         [("G", 3), ("G", 3), ("G", 3), ("other", None)])
        # An explicit group_size wins; async too.
        client.grade_many([(TASK, CAND)], group="H", group_size=5)
        self.assertEqual(broker.submits()[-1][1]["group_size"], 5)

        async def main():
            return await client.agrade_many([(TASK, CAND)] * 2, group="A")
        asyncio.run(main())
        self.assertEqual([h.get("group_size") for _, h in broker.submits()[-2:]], [2, 2])

    def cancel_broker(self, accept_delay=0.0, count=1, answer_cancel=True):
        """ACCEPTED (after accept_delay), never a RESULT; CANCEL answered DONE."""
        def handler(broker, peer, command, header, body):
            if command == W.HEARTBEAT:
                broker.send(peer, W.HEARTBEAT)
            elif command == W.SUBMIT:
                jid = 1000 + header["ref"]
                msg = lambda: broker.send(peer, W.ACCEPTED, {"ref": header["ref"], "job": jid})
                broker.later(accept_delay, msg) if accept_delay else msg()
            elif command == W.CANCEL:
                if answer_cancel:
                    broker.send(peer, W.DONE, {"ref": header["ref"], "count": count})
                else:
                    broker.send(peer, W.ERROR, {"code": 401, "reason": "CANCEL is not a client command"})
        return handler

    def test_cancel_after_accepted(self):
        broker, client = self.make(self.cancel_broker())
        fut = client.submit(TASK, CAND)
        self.assertTrue(wait_until(lambda: fut.job is not None))
        self.assertEqual(fut.job, 1000 + fut.ref)
        self.assertTrue(fut.cancel())
        self.assertTrue(wait_until(lambda: client.health()["cancel_done"] == 1))
        (cancel,) = self.commands(broker, W.CANCEL)
        self.assertEqual(cancel["job"], fut.job)
        self.assertEqual(cancel["client"], client.health()["client_id"])
        self.assertNotEqual(cancel["ref"], fut.ref)         # its own ref, for the DONE
        h = client.health()
        self.assertEqual((h["cancelled"], h["cancel_sent"], h["abandoned"], h["stray"]), (1, 1, 0, 0))

    def test_cancel_before_accepted(self):
        broker, client = self.make(self.cancel_broker(accept_delay=0.4))
        fut = client.submit(TASK, CAND)
        self.assertTrue(wait_until(lambda: broker.submits()))
        self.assertIsNone(fut.job)
        fut.cancel()
        time.sleep(0.1)
        self.assertEqual(self.commands(broker, W.CANCEL), [])          # no job id yet
        self.assertTrue(wait_until(lambda: client.health()["cancel_done"] == 1))
        (cancel,) = self.commands(broker, W.CANCEL)
        self.assertEqual(cancel["job"], 1000 + fut.ref)
        self.assertEqual(fut.job, 1000 + fut.ref)

    def test_timeout_cancels_and_missed_cancel(self):
        broker, client = self.make(self.cancel_broker(count=0))
        r = client.submit(TASK, CAND, timeout_s=0.2).result(5)
        self.assertEqual(r.error, "timeout")
        self.assertTrue(wait_until(lambda: client.health()["cancel_missed"] == 1))
        self.assertEqual(len(self.commands(broker, W.CANCEL)), 1)
        self.assertEqual(client.health()["abandoned"], 1)    # count 0: a RESULT may still come

    def test_cancel_unsupported(self):
        broker, client = self.make(self.cancel_broker(answer_cancel=False))
        fut = client.submit(TASK, CAND)
        self.assertTrue(wait_until(lambda: fut.job is not None))
        fut.cancel()
        self.assertTrue(wait_until(lambda: client.health()["cancel_unsupported"] == 1))
        self.assertEqual(client.health()["cancel_done"], 0)

    def query_broker(self, broker, peer, command, header, body):
        if command == W.HEARTBEAT:
            broker.send(peer, W.HEARTBEAT)
        elif command == W.QUERY:
            q = msgpack.unpackb(body, raw=False)
            ref = header["ref"]
            what = q["what"]
            if what == "slow":
                return
            if what == "old":
                broker.send(peer, W.ERROR, {"code": 401, "reason": "QUERY is not a client command"})
            elif what == "job" and q.get("job") == 5:
                broker.send(peer, W.ERROR, {"code": 404, "reason": "no job 5", "ref": ref})
            elif what == "boom":
                broker.send(peer, W.ERROR, {"code": 500, "reason": "oops", "ref": ref})
            elif what not in ("stats", "job", "jobs", "tasks", "workers", "results", "cache"):
                broker.send(peer, W.ERROR, {"code": 400, "reason": "unknown query", "ref": ref})
            else:
                if what in ("jobs", "tasks", "workers", "results"):
                    answer = {what: [dict(q, n=i) for i in range(2)], "truncated": what == "jobs"}
                else:
                    answer = {"job" if what == "job" else "echo": q, "truncated": False}
                broker.send(peer, W.ANSWER, {"ref": ref}, msgpack.packb(answer))

    def test_queries(self):
        broker, client = self.make(self.query_broker)
        self.assertEqual(client.query("stats"), {"echo": {"what": "stats"}, "truncated": False})
        self.assertEqual(client.stats()["echo"], {"what": "stats"})
        self.assertEqual(client.job(7), {"what": "job", "job": 7})
        with self.assertRaises(kgym.NotFound) as cm:
            client.job(5)
        self.assertEqual((cm.exception.code, cm.exception.reason), (404, "no job 5"))
        with self.assertRaises(kgym.BadQuery):
            client.query("what-not")
        with self.assertRaises(kgym.QueryError) as cm:
            client.query("boom")
        self.assertEqual(type(cm.exception), kgym.QueryError)
        jobs = client.jobs(group="g" * 300, limit=5, results=True)
        self.assertIsInstance(jobs, kgym.QueryList)
        self.assertTrue(jobs.truncated)
        self.assertEqual(jobs[0], {"what": "jobs", "group": "g" * 255, "limit": 5, "results": True,
                                   "n": 0})
        tasks = client.tasks(band=(0.1, 0.9), min_attempts=3)
        self.assertFalse(tasks.truncated)
        self.assertEqual(tasks[0], {"what": "tasks", "lo": 0.1, "hi": 0.9, "min_attempts": 3, "n": 0})
        self.assertEqual(client.tasks()[0], {"what": "tasks", "min_attempts": 1, "n": 0})
        self.assertEqual(client.results("cpu/gelu_f32")[0]["task"], "gelu_f32")
        self.assertEqual(client.results("my_task", limit=2)[1], {"what": "results", "task": "my_task",
                                                                 "limit": 2, "n": 1})
        self.assertEqual(client.cache_stats()["echo"], {"what": "cache"})
        self.assertEqual(len(client.workers()), 2)
        with self.assertRaises(ValueError):
            client.jobs(tag="a", group="b")
        with self.assertRaises(ValueError):
            client.jobs(tag="a", limit=0)
        with self.assertRaises(kgym.KgymTimeout):
            client.query("slow", timeout_s=0.3)
        with self.assertRaises(kgym.Unsupported):
            client.query("old")
        (q,) = [h for h in self.commands(broker, W.QUERY)][:1]
        self.assertEqual(q["client"], client.health()["client_id"])
        self.assertGreaterEqual(client.health()["queries"], 15)

        async def main():
            a = await client.aquery("stats")
            with self.assertRaises(kgym.NotFound):
                await client.aquery("job", job=5)
            many = await asyncio.gather(*[client.aquery("job", job=i) for i in range(10, 30)])
            return a, many
        a, many = asyncio.run(main())
        self.assertEqual(a["echo"], {"what": "stats"})
        self.assertEqual([m["job"]["job"] for m in many], list(range(10, 30)))

    def test_query_after_close(self):
        broker, client = self.make(self.query_broker)
        client.close()
        with self.assertRaises(kgym.ClientClosed):
            client.stats()

    def summary_broker(self, broker, peer, command, header, body):
        accept_and_answer(broker, peer, command, header, body,
                          result=result_body(cached=True, coalesced=True))
        if command == W.SUBMIT and header.get("group"):
            g = header["group"]
            n = broker.state.setdefault(g, [0])
            n[0] += 1
            if n[0] == header.get("group_size", 1):
                broker.send(peer, W.SUMMARY, {"group": g},
                            msgpack.packb({"group": g, "count": n[0], "declared_size": n[0],
                                           "zero_variance": True}))

    def test_summaries(self):
        got = []
        broker, client = self.make(self.summary_broker, on_summary=got.append)
        rs = client.grade_many([(TASK, CAND)] * 3, group="G3")
        self.assertTrue(all(r.cached and r.coalesced for r in rs))
        s = client.group_summary("G3", timeout_s=5)
        self.assertEqual((s["group"], s["count"], s["declared_size"]), ("G3", 3, 3))
        self.assertEqual(got, [s])
        with self.assertRaises(kgym.KgymTimeout):              # taken: the next one is waited for
            client.group_summary("G3", timeout_s=0.2)
        # Kept until taken, several groups at once; async.
        client.grade(TASK, CAND, group="A", group_size=1)
        client.grade(TASK, CAND, group="B", group_size=1)
        self.assertTrue(wait_until(lambda: len(got) == 3))

        async def main():
            b = await client.agroup_summary("B", timeout_s=5)
            waiting = asyncio.ensure_future(client.agroup_summary("C", timeout_s=5))
            await asyncio.sleep(0.05)
            await client.agrade(TASK, CAND, group="C", group_size=1)
            with self.assertRaises(kgym.KgymTimeout):
                await client.agroup_summary("D", timeout_s=0.1)
            return b, await waiting
        b, c = asyncio.run(main())
        self.assertEqual((b["group"], c["group"]), ("B", "C"))
        self.assertEqual(client.group_summary("A", timeout_s=0)["group"], "A")
        self.assertEqual(client.health()["summaries"], 4)
        self.assertEqual(client._summaries.waiters, {})        # nothing left behind
        # A waiter is woken by close().
        err = []
        t = threading.Thread(target=lambda: err.append(_raises(client.group_summary, "Z")))
        t.start()
        time.sleep(0.1)
        client.close()
        t.join(5)
        self.assertIsInstance(err[0], kgym.ClientClosed)

    def test_result_flags(self):
        r = kgym.Result.from_map({"status": "ok", "reward": 1.0, "cached": True, "coalesced": True})
        self.assertTrue(r.cached and r.coalesced)
        self.assertEqual(r.metrics()["kgym/coalesced"], 1.0)
        for r in (kgym.Result.from_map({"status": "ok"}), kgym.Result.failure("timeout", "slow")):
            self.assertEqual((r.cached, r.coalesced), (False, False))
            self.assertIn("coalesced", r.to_dict())


def _raises(fn, *args):
    try:
        fn(*args)
    except Exception as exc:        # noqa: BLE001
        return exc
    return None


if __name__ == "__main__":
    unittest.main()
