"""Result: the same fields on every outcome, from any map (no broker needed)."""

import json
import math
import unittest

import _env  # noqa: F401  (sys.path)
from kgym import Result
from kgym.result import ERROR_STATUS

FULL = {
    "status": "ok", "reward": 1.5, "speedup": 1.5, "message": "", "seed": 7, "task": "t",
    "backend": "cpu", "device": "cpu: X", "worker": "w", "timings": {"candidate": {"n": 3}},
    "max_abs_err": 1e-7, "max_rel_err": 1e-6, "bad_elements": 0, "mismatches": [],
    "compile_log": "", "cache": {"candidate": True}, "phases": {"compile_s": 0.1, "run_s": 0.2},
    "sandbox": {}, "tag": "x", "job": 3, "queue_s": 0.01,
}


class FromMap(unittest.TestCase):

    def test_full_map(self):
        r = Result.from_map(FULL)
        self.assertEqual((r.status, r.reward, r.speedup, r.seed, r.job, r.tag), ("ok", 1.5, 1.5, 7, 3, "x"))
        self.assertEqual(r.phases["compile_s"], 0.1)
        self.assertEqual(r.error, "")
        self.assertTrue(r.ok and r.graded and not r.infra_error)
        self.assertEqual(r.raw, FULL)
        self.assertEqual(r.feedback, "")
        self.assertIsNone(r.profile)
        self.assertFalse(r.cached)

    def test_same_keys_whatever_the_map(self):
        keys = set(Result.from_map(FULL).to_dict())
        for data in ({}, {"status": "incorrect"}, {"status": 3, "reward": "x", "phases": [1]},
                     None, {"status": "internal_error", "reward": 1.0}, {"extra": {"k": 1}}):
            r = Result.from_map(data)
            self.assertEqual(set(r.to_dict()), keys)
            self.assertEqual(set(r.metrics()), set(Result.from_map(FULL).metrics()))
            json.dumps(r.to_dict())
        for error in ERROR_STATUS:
            r = Result.failure(error, "why")
            self.assertEqual(set(r.to_dict()), keys)
            self.assertEqual(r.status, ERROR_STATUS[error])
            self.assertIsNone(r.reward)

    def test_missing_status_is_internal_error(self):
        r = Result.from_map({"reward": 1.0, "message": "m"})
        self.assertEqual((r.status, r.reward, r.error), ("internal_error", None, "bad_result"))
        self.assertIn("without a status", r.message)

    def test_no_reward_for_invalid(self):
        r = Result.from_map({"status": "invalid", "reward": -1.0})
        self.assertIsNone(r.reward)

    def test_unknown_keys_pass_through(self):
        r = Result.from_map(dict(FULL, cached=True, feedback="try again", profile={"sm": 0.5},
                                 group_summary={"mean": 0.3}, group=12))
        self.assertTrue(r.cached)
        self.assertEqual(r.feedback, "try again")
        self.assertEqual(r.profile, {"sm": 0.5})
        self.assertEqual(r.get("group_summary"), {"mean": 0.3})
        self.assertEqual(r["group_summary"], {"mean": 0.3})
        self.assertEqual(r.group, "12")
        self.assertIn("group_summary", r.extra)
        self.assertEqual(r.get("status"), "ok")

    def test_metrics_and_feedback_text(self):
        m = Result.failure("timeout", "slow").metrics()
        self.assertTrue(math.isnan(m["kgym/reward"]))
        self.assertEqual(m["kgym/infra_error"], 1.0)
        r = Result.from_map({"status": "incorrect", "reward": -0.5, "message": "output 'y' wrong",
                             "mismatches": [{"arg": "y", "index": 3, "size": 1, "trial": 0,
                                             "expected": 1.0, "got": "nan"}]})
        text = r.feedback_text()
        self.assertIn("incorrect", text)
        self.assertIn("y[3]", text)
        r = Result.from_map({"status": "compile_error", "compile_log": "k.c:1: error: x" * 1000})
        self.assertLessEqual(len(r.feedback_text(500)), 500)


if __name__ == "__main__":
    unittest.main()
