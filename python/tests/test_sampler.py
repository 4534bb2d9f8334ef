"""kgym.sampler.CurriculumSampler: DAPO-style dynamic sampling over a pool
by the broker's task statistics (pass-rate band, tasks not yet known,
recent zero-variance groups) and weighting by the reference's operators;
and the statistics it reads, from a real broker."""

import collections
import unittest

import _env
import kgym
from kgym.sampler import CurriculumSampler

POOL = ["cpu/gelu_f32", "cpu/rmsnorm_f32", "cpu/softmax_f32", "cpu/matmul_f32"]


def stats(task, window, pass_rate, groups=0, zero=0, operators=None):
    return {"task": task, "window": window, "pass_rate": pass_rate, "reward_std": 0.5,
            "groups": groups, "zero_variance_groups": zero, "operators": operators}


class Rules(unittest.TestCase):

    def test_band_unknown_and_zero_variance(self):
        s = CurriculumSampler(POOL, band=(0.1, 0.9), min_attempts=4, seed=1).refresh([
            stats("gelu_f32", 10, 1.0),                      # always solved: out
            stats("rmsnorm_f32", 10, 0.5),                   # learnable: in
            stats("softmax_f32", 2, 0.0),                    # too few results to judge: in
            stats("matmul_f32", 10, 0.5, groups=8, zero=7),  # groups without signal: out
        ])
        report = {r["task"]: r for r in s.report()}
        self.assertFalse(report["gelu_f32"]["eligible"])
        self.assertIn("pass rate 1.00 outside [0.1, 0.9]", report["gelu_f32"]["why"])
        self.assertTrue(report["rmsnorm_f32"]["eligible"])
        self.assertTrue(report["softmax_f32"]["eligible"])
        self.assertIn("7 of its last 8 groups", report["matmul_f32"]["why"])
        self.assertEqual(set(s.weights()), {"rmsnorm_f32", "softmax_f32"})
        batch = s.sample(2)
        self.assertEqual(sorted(batch), ["cpu/rmsnorm_f32", "cpu/softmax_f32"])   # no repeat
        self.assertEqual(len(s.sample(7)), 7)
        self.assertTrue(set(s.sample(7)) <= {"cpu/rmsnorm_f32", "cpu/softmax_f32"})
        self.assertFalse(s.fallback)

    def test_nothing_eligible_falls_back_to_all(self):
        s = CurriculumSampler(POOL, seed=2).refresh([stats(t.split("/")[1], 10, 1.0) for t in POOL])
        self.assertEqual(len(s.weights()), 4)
        self.assertTrue(s.fallback)

    def test_operator_weights(self):
        rows = [stats("gelu_f32", 10, 0.5, operators=[{"name": "aten::gelu", "share": 1.0}]),
                stats("matmul_f32", 10, 0.5, operators=[{"name": "aten::mm", "share": 0.8},
                                                         {"name": "aten::add", "share": 0.2}]),
                stats("rmsnorm_f32", 10, 0.5)]
        pool = ["cpu/gelu_f32", "cpu/matmul_f32", "cpu/rmsnorm_f32"]
        top = CurriculumSampler(pool, weight="operators").refresh(rows).weights()
        self.assertEqual(top, {"gelu_f32": 1.0, "matmul_f32": 0.8, "rmsnorm_f32": 0.05})
        mm = CurriculumSampler(pool, weight="operators", focus=("aten::mm", "aten::add")).refresh(rows)
        self.assertEqual(mm.weights(), {"gelu_f32": 0.05, "matmul_f32": 1.0, "rmsnorm_f32": 0.05})
        rx = CurriculumSampler(pool, weight="operators", focus=r"^aten::(mm|gelu)$").refresh(rows)
        self.assertEqual(rx.weights(), {"gelu_f32": 1.0, "matmul_f32": 0.8, "rmsnorm_f32": 0.05})
        # Sampling follows the weights: with replacement, the heavy task dominates.
        counts = collections.Counter(CurriculumSampler(pool, weight="operators", focus=("aten::mm",),
                                                       seed=3).refresh(rows).sample(400))
        self.assertGreater(counts["cpu/matmul_f32"], 300)
        own = CurriculumSampler(pool, weight=lambda st: 2.0 if st.get("task") == "gelu_f32" else 1.0)
        self.assertEqual(own.refresh(rows).weights()["gelu_f32"], 2.0)

    def test_bad_settings(self):
        with self.assertRaisesRegex(ValueError, "empty"):
            CurriculumSampler([])
        with self.assertRaisesRegex(ValueError, "band"):
            CurriculumSampler(POOL, band=(0.9, 0.1))
        with self.assertRaisesRegex(ValueError, "weight"):
            CurriculumSampler(POOL, weight="loud")


class FromTheBroker(unittest.TestCase):
    """The statistics come from the broker: pass rates, spread, groups."""

    def test_refresh_from_a_client(self):
        # Tasks of their own names: other tests share this broker's statistics.
        def own(name):
            return dict(kgym.resolve_task(name), name="sampler-" + name.split("/")[1])
        gelu, softmax, sum_rows, cumsum = (own(n) for n in ("cpu/gelu_f32", "cpu/softmax_f32",
                                                            "cpu/sum_rows_f32", "cpu/cumsum_i32"))
        client = kgym.Client(_env.cluster().endpoint, timeout_s=120)
        try:
            fast = dict(_env.CHECK, cache="bypass")
            good = _env.candidate("cpu/gelu_f32", "naive")
            bad = _env.candidate("cpu/softmax_f32", "tail_bug")
            mixed = [(sum_rows, _env.candidate("cpu/sum_rows_f32", n))
                     for n in ("naive", "tail_bug", "naive", "tail_bug")]
            client.grade_many([(gelu, good)] * 4, **fast)
            client.grade_many([(softmax, bad)] * 4, **fast)
            client.grade_many(mixed, group="sampler-test", **fast)
            client.group_summary("sampler-test", timeout_s=30)
            s = CurriculumSampler([gelu, softmax, sum_rows, cumsum], min_attempts=4).refresh(client)
            report = {r["task"]: r for r in s.report()}
            self.assertFalse(report["sampler-gelu_f32"]["eligible"])          # pass rate 1
            self.assertFalse(report["sampler-softmax_f32"]["eligible"])       # pass rate 0
            self.assertTrue(report["sampler-sum_rows_f32"]["eligible"])       # 0.5
            self.assertEqual(report["sampler-sum_rows_f32"]["groups"], 1)
            self.assertEqual(report["sampler-sum_rows_f32"]["zero_variance_groups"], 0)
            self.assertGreater(report["sampler-sum_rows_f32"]["reward_std"], 0)
            self.assertTrue(report["sampler-cumsum_i32"]["eligible"])         # never tried
            self.assertEqual(sorted(t["name"] for t in s.sample(2)),
                             ["sampler-cumsum_i32", "sampler-sum_rows_f32"])
        finally:
            client.close()


if __name__ == "__main__":
    unittest.main()
