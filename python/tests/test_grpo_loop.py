"""examples/grpo_loop.py runs 2 steps end to end (its own broker and worker)."""

import json
import os
import subprocess
import sys
import unittest

import _env

SCRIPT = os.path.join(_env.REPO, "examples", "grpo_loop.py")


class GrpoLoop(unittest.TestCase):

    def setUp(self):
        _env.require_binaries()

    def run_loop(self, *args):
        env = dict(os.environ, KGYM_BUILD_DIR=str(_env.build_dir()))
        proc = subprocess.run([sys.executable, SCRIPT] + list(args), env=env, capture_output=True,
                              text=True, timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return proc.stdout

    def test_two_steps_local(self):
        out = self.run_loop("--local", "--steps", "2", "-G", "4", "--json",
                            "--tasks", "cpu/matmul_f32,cpu/rmsnorm_f32", "--eval-timeout", "3")
        steps = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        self.assertEqual([s["step"] for s in steps], [1, 2])
        for s in steps:
            self.assertEqual(s["jobs"], 8)
            self.assertEqual(s["groups"], 2)
            self.assertLessEqual(s["dead_groups"], 2)
            self.assertEqual(sum(s["statuses"].values()), 8)
            self.assertNotIn("internal_error", s["statuses"])
            for key in ("reward_mean", "reward_std", "pass_rate", "jobs_per_s", "kept", "masked"):
                self.assertIn(key, s)
            # The rollouts carry the tasks' prompts (kgym.prompt) before the answers.
            self.assertGreater(s["prompt_chars"], 1000)
            # Every job was graded or answered by the broker; the broker's
            # group summaries agree with the loop's own dead-group count.
            self.assertEqual(s["graded"] + s["cached"] + s["coalesced"], 8)
            self.assertEqual(s["broker_dead_groups"], s["dead_groups"])
        # 2 steps x 2 groups of 4 from small pools: repeats are answered, not graded.
        self.assertGreater(sum(s["cached"] + s["coalesced"] for s in steps), 0)

    def test_against_a_running_broker(self):
        cluster = _env.cluster()
        out = self.run_loop("--broker", cluster.endpoint, "--steps", "2", "-G", "2",
                            "--tasks", "cpu/matmul_f32")
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("step 1:"), out)
        self.assertTrue(lines[1].startswith("step 2:"), out)
        self.assertIn("dead groups", lines[0])
        self.assertIn("policy's favourite", out)


if __name__ == "__main__":
    unittest.main()
