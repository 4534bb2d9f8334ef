"""kgym.prompt and `kgym prompt` (the built binary) render one template
the same way: same text, same json, same chat, for kgym C/CUDA tasks and
PyTorch tasks alike; the answer format they ask for is the one
kgym.extract reads back."""

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import _env
import kgym
from kgym import prompts as P
from kgym import pytorch

KB = Path(_env.REPO) / "tests" / "data" / "kernelbench"
H200 = "NVIDIA H200 (sm_90)"


def kgym_binary():
    path = Path(_env.build_dir()) / "client" / "kgym"
    if not path.is_file():
        raise unittest.SkipTest("no kgym binary at %s (build first)" % path)
    return str(path)


def run_kgym(*args):
    out = subprocess.run([kgym_binary(), "prompt", *args], capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout, out.stderr


class SameAsTheBinary(unittest.TestCase):
    """The C CLI and the Python client give the same prompt."""

    def compare(self, path, lang=None, gpu=H200, feedback=None):
        args = ["--gpu", gpu] if gpu else []
        if lang:
            args += ["--lang", lang]
        if feedback:
            args += ["--feedback", feedback]
        for fmt in P.FORMATS:
            rc, out, err = run_kgym(*args, "--format", fmt, str(path))
            self.assertEqual(rc, 0, "%s %s: %s" % (path, fmt, err))
            mine = P.prompt(str(path), lang=lang, format=fmt, gpu=gpu, feedback=feedback)
            if fmt == "text":
                self.assertEqual(out, mine, "%s: text differs" % path)
            else:
                self.assertEqual(json.loads(out), mine, "%s: %s differs" % (path, fmt))

    def test_every_bundled_example(self):
        names = kgym.list_examples()
        self.assertGreater(len(names), 8)
        for name in names:
            folder = kgym.tasks.example_path(name)
            with self.subTest(task=name):
                self.compare(folder)
                if name.startswith("cuda/"):
                    self.compare(folder, lang="ptx", gpu=None)

    def test_the_bundled_pytorch_pool(self):
        tasks = sorted(Path(_env.REPO).glob("examples/pytorch/*/task.c*.json"))
        if not tasks:
            self.skipTest("no examples/pytorch pool in this checkout")
        for path in tasks:
            with self.subTest(task=str(path.relative_to(_env.REPO))):
                self.compare(path)

    def test_kernelbench_modules_and_their_imported_tasks(self):
        files = sorted(KB.glob("level*/*.py"))
        self.assertGreaterEqual(len(files), 4)
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([kgym_binary(), "import", "kernelbench", "--out", out, str(KB / "level1"),
                            str(KB / "level2"), str(KB / "rows.jsonl")],
                           capture_output=True, check=True, timeout=60)
            tasks = sorted(Path(out).glob("*.json"))
            self.assertGreaterEqual(len(tasks), 6)
            for path in files + tasks:
                with self.subTest(task=path.name):
                    self.compare(path)
                    self.compare(path, lang="cuda")
            # A task with the optional settings: dtype, a function entry, exact, compile.
            task = json.loads(tasks[0].read_text())
            task["python"].update(dtype="f16", baseline="compile", library_share_max=0.25)
            task["tolerance"] = {"exact": True}
            edited = Path(out) / "edited.json"
            edited.write_text(json.dumps(task))
            self.compare(edited)
            task["python"] = {"entry": "rmsnorm", "kernel": "torch"}
            task["backend"] = "cpu"
            edited.write_text(json.dumps(task))
            self.compare(edited)

    def test_feedback_from_a_result_file(self):
        with tempfile.TemporaryDirectory() as out:
            result = Path(out) / "result.jsonl"
            lines = [{"status": "ok", "reward": 1.0},
                     {"status": "incorrect", "reward": -0.5, "speedup": None,
                      "message": "y differs at 3 elements",
                      "feedback": "y[1,1000]: expected 4.7e-05, got 0.00025\nmissing tail check?"}]
            result.write_text("\n".join(json.dumps(l) for l in lines) + "\n")
            self.compare(kgym.tasks.example_path("cpu/rmsnorm_f32"), feedback=str(result))
            self.compare(KB / "level1" / "19_ReLU.py", feedback=str(result))
            # The last line is the one read.
            text = P.prompt("cpu/rmsnorm_f32", feedback=str(result))
            self.assertIn("status: incorrect, reward -0.5\ny differs at 3 elements\ny[1,1000]", text)
            self.assertNotIn("status: ok", text)


class Contents(unittest.TestCase):

    def test_module_prompt_says_what_the_extractor_reads(self):
        p = P.prompt(str(KB / "level1" / "19_ReLU.py"), format="json", gpu=H200)
        self.assertEqual((p["task"], p["kind"], p["lang"], p["answer"]), ("L1_19_ReLU", "module", "triton", "python"))
        user = p["user"]
        self.assertIn("```python\nimport torch", user)
        self.assertIn("batch_size = 16, dim = 1024", user)
        self.assertIn("batch_size = 7, dim = 1024; batch_size = 16, dim = 511", user)
        self.assertIn("It runs on NVIDIA H200 (sm_90).", user)
        self.assertIn("class ModelNew(nn.Module)", user)
        self.assertIn("@triton.jit", user)
        self.assertIn("50%", user)
        cuda = P.prompt(str(KB / "level1" / "19_ReLU.py"), lang="cuda", format="json", gpu=None)
        self.assertIn("load_inline", cuda["user"])
        self.assertIn("It runs on an NVIDIA GPU.", cuda["user"])

    def test_kernel_prompt_lists_args_and_sizes(self):
        user = P.prompt("cuda/rmsnorm_f32", format="chat", gpu=H200)[1]["content"]
        self.assertIn("- x: input f32 [M, N] from normal(mean=0, std=1)", user)
        self.assertIn("- eps: scalar f32 = 1e-06", user)
        self.assertIn("(timed)", user)
        self.assertIn('"args": ["x", "w", "y", "M", "N", "eps"]', user)
        self.assertIn("```cuda", user)

    def test_wrong_language_or_format_is_refused(self):
        with self.assertRaisesRegex(P.PromptError, "takes lang triton or cuda, not c"):
            P.prompt(str(KB / "level1" / "19_ReLU.py"), lang="c")
        with self.assertRaisesRegex(P.PromptError, "takes lang c, not cuda"):
            P.prompt("cpu/rmsnorm_f32", lang="cuda")
        with self.assertRaisesRegex(P.PromptError, "format 'xml'"):
            P.prompt("cpu/rmsnorm_f32", format="xml")
        task = pytorch.module_task((KB / "level1" / "19_ReLU.py").read_text(), "t", kernel="triton")
        with self.assertRaisesRegex(P.PromptError, "wants triton kernels"):
            P.prompt(task, lang="cuda")
        rc, _, err = run_kgym("--lang", "c", str(KB / "level1" / "19_ReLU.py"))
        self.assertEqual(rc, 1)
        self.assertIn("takes lang triton or cuda, not c", err)
        rc, _, err = run_kgym("--format", "xml", str(KB / "level1" / "19_ReLU.py"))
        self.assertEqual(rc, 2)
        rc, _, err = run_kgym(str(KB / "broken" / "no_model.py"))
        self.assertEqual(rc, 1)
        self.assertIn("no top-level 'class Model'", err)

    def test_template_ships_with_the_package(self):
        self.assertTrue(P.TEMPLATE.is_file())
        sections = P.template_sections()
        for name in ("system", "task.module", "task.kernel", "answer.module.class", "feedback"):
            self.assertIn(name, sections)


class ModuleTasks(unittest.TestCase):
    """kgym.pytorch gives the task `kgym import` writes."""

    def test_same_task_as_the_import(self):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([kgym_binary(), "import", "kernelbench", "--out", out, str(KB / "level1"),
                            str(KB / "level2")], capture_output=True, check=True, timeout=60)
            for path in sorted(KB.glob("level*/*.py")):
                name = pytorch.task_name(path)
                written = json.loads((Path(out) / (name + ".json")).read_text())
                written.pop("x-source")
                self.assertEqual(pytorch.module_task(path.read_text(), name), written, path.name)

    def test_outline_rules(self):
        o = pytorch.outline("import torch\nclass Model:\n    def f(self):\n        return torch.sum(x, dim=1) * k\n"
                            "n = 0x10\nk = 3\nk += 1\nd = (4)\ns = -2\nb = True\nm = 1_000\n"
                            "def get_inputs():\n    return [torch.randn(n, m)]\n")
        self.assertEqual(o.constants, {"n": 16, "m": 1000})
        self.assertIn("k", o.uses["Model"])
        self.assertNotIn("dim", o.uses["Model"])
        self.assertEqual(pytorch.tail(1024), 511)
        self.assertEqual(pytorch.tail(16), 7)
        self.assertEqual(pytorch.tail(5), 3)
        self.assertEqual(pytorch.tail(3), 0)
        self.assertEqual(pytorch.task_name("a/Level_2/x/7_Conv 2d.py"), "L2_7_Conv_2d")


if __name__ == "__main__":
    unittest.main()
