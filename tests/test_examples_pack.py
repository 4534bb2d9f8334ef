"""examples/pack.py: the PyTorch pool's layout is packed as README.md says, and
--check refuses each kind of mistake with a message that names it.

Each test builds a throwaway examples/ tree (pack.py takes task folders as
arguments) and runs the real pack.py on it as a subprocess."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

PACK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "pack.py")

REF = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


rows = 64
cols = 1000
scale = 0.5


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

GOOD = '''# good: right everywhere.
# expect: cuda=ok+fast cpu=ok
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)
'''

TASK = {
    "name": "relu",
    "description": "ReLU",
    "reference": {"lang": "python", "source": "@ref.py"},
    "python": {"kernel": "triton"},
    "targets": {
        "cuda": {"sizes": [{}, {"rows": 3, "cols": 7}], "python": {"dtype": "f16"},
                 "eval": {"timeout": 100, "compile_timeout": 300}},
        "cpu": {"sizes": [{"rows": 1}], "python": {"kernel": "torch"}},
    },
}


class PoolPack(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="kgym-pack-")
        self.task = os.path.join(self.root, "pytorch", "relu")
        os.makedirs(os.path.join(self.task, "src"))
        self.write("task.in.json", json.dumps(TASK))
        self.write("src/ref.py", REF)
        self.write("src/good.py", GOOD)

    def tearDown(self):
        shutil.rmtree(self.root)

    def write(self, name, text):
        with open(os.path.join(self.task, name), "w") as f:
            f.write(text)

    def read(self, name):
        with open(os.path.join(self.task, name)) as f:
            return json.load(f)

    def pack(self, *args):
        proc = subprocess.run([sys.executable, PACK] + list(args) + [self.task],
                              capture_output=True, text=True)
        return proc.returncode, proc.stderr

    def refused(self, expect):
        """--check and a plain run both fail, saying expect."""
        for args in ((), ("--check",)):
            rc, err = self.pack(*args)
            self.assertEqual(rc, 1, "pack.py %s should fail: %s" % (" ".join(args), err))
            self.assertIn(expect, err)

    def test_packs_a_task_per_target(self):
        rc, err = self.pack()
        self.assertEqual(rc, 0, err)
        cuda, cpu = self.read("task.cuda.json"), self.read("task.cpu.json")
        self.assertEqual((cuda["backend"], cpu["backend"]), ("cuda", "cpu"))
        self.assertEqual(cuda["reference"], {"lang": "python", "source": REF})
        self.assertEqual(cuda["python"], {"kernel": "triton", "dtype": "f16"})
        self.assertEqual(cpu["python"], {"kernel": "torch"})
        self.assertEqual(cpu["sizes"], [{"rows": 1}])
        self.assertNotIn("eval", cuda)
        self.assertNotIn("targets", cuda)
        self.assertEqual(self.read("candidates/good.json"), {"lang": "python", "source": GOOD})
        self.assertEqual(self.read("expected.json"), {
            "cuda": {"eval": {"timeout": 100, "compile_timeout": 300}, "good": "ok",
                     "fast": ["good"], "slow": []},
            "cpu": {"eval": {}, "good": "ok", "fast": [], "slow": []}})
        rc, err = self.pack("--check")
        self.assertEqual(rc, 0, err)

    def test_statuses_per_target_sets_and_slow(self):
        self.write("src/attack.py", "# attack\n# expect: cuda=ok|runtime_error+slow cpu=-\n"
                   "class ModelNew:\n    pass\n")
        self.assertEqual(self.pack()[0], 0)
        expected = self.read("expected.json")
        self.assertEqual(expected["cuda"]["attack"], ["ok", "runtime_error"])
        self.assertEqual(expected["cuda"]["slow"], ["attack"])
        self.assertNotIn("attack", expected["cpu"])

    def test_check_finds_stale_and_missing_files(self):
        self.assertEqual(self.pack()[0], 0)
        self.write("src/good.py", GOOD.replace("clamp(min=0)", "relu()"))
        rc, err = self.pack("--check")
        self.assertEqual(rc, 1)
        self.assertIn("candidates/good.json: out of date", err)
        self.assertEqual(self.pack()[0], 0)
        os.remove(os.path.join(self.task, "src", "good.py"))
        rc, err = self.pack("--check")
        self.assertEqual(rc, 1)
        self.assertIn("candidates/good.json: stale", err)

    def test_a_candidate_must_say_what_it_expects(self):
        self.write("src/quiet.py", "# quiet: says nothing\nclass ModelNew:\n    pass\n")
        self.refused('quiet.py: its leading comment needs one "# expect:')

    def test_every_target_is_named(self):
        self.write("src/half.py", "# expect: cuda=ok\nclass ModelNew:\n    pass\n")
        self.refused("half.py: expect: says nothing of cpu")

    def test_unknown_status_and_target(self):
        self.write("src/odd.py", "# expect: cuda=fine cpu=-\nclass ModelNew:\n    pass\n")
        self.refused("odd.py: expect: unknown status 'fine'")
        self.write("src/odd.py", "# expect: cuda=ok cpu=- tpu=ok\nclass ModelNew:\n    pass\n")
        self.refused("odd.py: expect: 'tpu=ok' is not TARGET=STATUS")

    def test_slow_needs_ok(self):
        self.write("src/late.py", "# expect: cuda=incorrect+slow cpu=-\nclass ModelNew:\n    pass\n")
        self.refused("late.py: expect: +slow needs ok among the statuses")

    def test_graded_nowhere(self):
        self.write("src/idle.py", "# expect: cuda=- cpu=-\nclass ModelNew:\n    pass\n")
        self.refused("idle.py: expect: graded on no target")

    def test_naive_must_be_ok_somewhere(self):
        self.write("src/triton_naive.py", "# expect: cuda=incorrect cpu=-\nclass ModelNew:\n    pass\n")
        self.refused("triton_naive.py: a naive candidate must be expected ok somewhere")

    def test_candidate_must_define_its_entry(self):
        self.write("src/nameless.py", "# expect: cuda=ok cpu=-\nclass Model:\n    pass\n")
        self.refused("nameless.py: defines no ModelNew")
        # ... unless it is meant not to compile, when it need not even parse.
        self.write("src/nameless.py", "# expect: cuda=compile_error cpu=compile_error\nclass (:\n")
        self.assertEqual(self.pack()[0], 0)

    def test_candidate_must_parse(self):
        self.write("src/broken.py", "# expect: cuda=ok cpu=-\nclass ModelNew(:\n")
        self.refused("broken.py: line 2:")

    def test_sizes_name_int_constants_of_the_module(self):
        task = json.loads(json.dumps(TASK))
        task["targets"]["cpu"]["sizes"] = [{"rows": 2, "scale": 1}]
        self.write("task.in.json", json.dumps(task))
        self.refused('size {"rows": 2, "scale": 1}: scale is not an int constant of src/ref.py')

    def test_reference_must_be_a_kernelbench_module(self):
        self.write("src/ref.py", REF.replace("def get_inputs", "def make_inputs"))
        self.refused("src/ref.py defines no get_inputs")

    def test_task_names_no_backend_and_its_targets(self):
        task = dict(TASK, backend="cuda")
        self.write("task.in.json", json.dumps(task))
        self.refused('no "backend"')
        task = dict(TASK, targets={"tpu": {}})
        self.write("task.in.json", json.dumps(task))
        self.refused('"targets" must be an object with some of cuda, cpu')

    def test_reserved_names_and_other_files(self):
        self.write("src/slow.py", "# expect: cuda=ok cpu=-\nclass ModelNew:\n    pass\n")
        self.refused("'slow' names a key of expected.json, not a candidate")
        os.remove(os.path.join(self.task, "src", "slow.py"))
        self.write("src/good.json", "{}")
        self.refused("the pool's src/ holds .py files only")


class CExamples(unittest.TestCase):
    """The C examples' rules are unchanged: a candidate without a status is refused."""

    def test_missing_status(self):
        root = tempfile.mkdtemp(prefix="kgym-pack-")
        try:
            here = os.path.join(os.path.dirname(PACK), "cpu", "gelu_f32")
            task = os.path.join(root, "cpu", "gelu_f32")
            shutil.copytree(here, task)
            with open(os.path.join(task, "expected.json"), "w") as f:
                f.write('{"naive": "ok"}')
            proc = subprocess.run([sys.executable, PACK, "--check", task],
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("no expected status for optimised", proc.stderr)
        finally:
            shutil.rmtree(root)


if __name__ == "__main__":
    unittest.main()
