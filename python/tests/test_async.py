"""asyncio: agrade, agrade_many, astream on running loops (a real broker)."""

import asyncio
import threading
import time
import unittest

import _env
import kgym

MATMUL = "cpu/matmul_f32"
GELU = "cpu/gelu_f32"


class Async(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()

    def setUp(self):
        self.client = kgym.Client(self.cluster.endpoint, max_inflight=8)
        self.addCleanup(self.client.close)
        self.naive = _env.candidate(MATMUL, "naive")

    def test_agrade_and_errors(self):
        async def main():
            r = await self.client.agrade(MATMUL, self.naive, **_env.CHECK)
            self.assertTrue(r.ok)
            with self.assertRaises(kgym.InvalidJob):
                await self.client.agrade(MATMUL, "no kernel")
            r = await self.client.agrade(MATMUL, "no kernel", raise_on_error=False)
            self.assertEqual(r.status, "invalid")
            h = await self.client.ahealth()
            self.assertTrue(h["ok"])
        asyncio.run(main())

    def test_astream_completion_order_and_index(self):
        cands = kgym.example_candidates(MATMUL)
        items = [(MATMUL, c) for c in cands.values()]

        async def main():
            seen = []
            async for r in self.client.astream(items, **_env.FAST):
                seen.append(r)
            ordered = await self.client.agrade_many(items, **_env.FAST)
            return seen, ordered

        seen, ordered = asyncio.run(main())
        self.assertEqual(sorted(r.index for r in seen), list(range(len(items))))
        expected = kgym.example_expected(MATMUL)
        self.assertEqual([r.status for r in ordered], [expected[n] for n in cands])
        self.assertEqual({r.index: r.status for r in seen}, {i: r.status for i, r in enumerate(ordered)})

    def test_async_iterable_and_early_exit(self):
        async def gen():
            for _ in range(6):
                yield (MATMUL, self.naive)

        async def main():
            got = []
            async for r in self.client.astream(gen(), **_env.CHECK):
                got.append(r)
                if len(got) == 2:
                    break           # the rest are cancelled
            return got

        self.assertEqual(len(asyncio.run(main())), 2)
        self.assertTrue(_wait(lambda: self.client._slots.free == 8))

    def test_cancel_by_wait_for(self):
        hang = _env.candidate(GELU, "hang")

        async def main():
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(self.client.agrade(GELU, hang, timeout=1.0, cache="bypass"), 0.2)
        asyncio.run(main())
        self.assertEqual(self.client._slots.free, 8)
        self.assertTrue(_wait(lambda: self.client.health()["cancelled"] == 1))

    def test_several_loops_at_once(self):
        out = {}

        def run(name):
            async def main():
                return await self.client.agrade_many([(MATMUL, self.naive)] * 5, **_env.CHECK)
            out[name] = asyncio.run(main())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(sorted(out), [0, 1, 2])
        self.assertTrue(all(r.ok for rs in out.values() for r in rs))

    def test_slot_wait_does_not_block_the_loop(self):
        client = kgym.Client(self.cluster.endpoint, max_inflight=1)
        self.addCleanup(client.close)
        ticks = []

        async def ticker():
            for _ in range(20):
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        async def main():
            t = asyncio.ensure_future(ticker())
            rs = await asyncio.gather(*[client.agrade(MATMUL, self.naive, **_env.CHECK) for _ in range(4)])
            await t
            return rs

        rs = asyncio.run(main())
        self.assertTrue(all(r.ok for r in rs))
        self.assertEqual(len(ticks), 20)
        self.assertLess(max(b - a for a, b in zip(ticks, ticks[1:])), 0.5)


def _wait(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


if __name__ == "__main__":
    unittest.main()
