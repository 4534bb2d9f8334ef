"""`pip install ./python` into a fresh venv (python3 -m venv
--system-site-packages, pip without the network): the installed client
finds the bundled tasks with no KGYM_EXAMPLES and no repository, in the
package or in <prefix>/share/kgym/examples, and grades one against the
real broker and CPU worker."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

import _env

SCRIPT = r"""
import json, sys, kgym
endpoint = sys.argv[1]
r = kgym.Client(endpoint).grade("cpu/gelu_f32", kgym.example_candidates("cpu/gelu_f32")["naive"],
                                trials=1, check_only=True)
from kgym import prompts
print(json.dumps({"file": kgym.__file__, "examples": str(kgym.examples_dir()),
                  "status": r.status, "n": len(kgym.list_examples()),
                  "template": str(prompts.TEMPLATE),
                  "prompt": kgym.prompt("cpu/gelu_f32", format="chat", gpu=None)}))
"""


class PipInstall(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()
        cls.tmp = tempfile.TemporaryDirectory(prefix="kgym-install-")
        root = cls.tmp.name
        # A copy of the two folders the build reads, so the in-tree build
        # leaves nothing in the checkout.
        src = os.path.join(root, "src")
        shutil.copytree(_env.PYTHON_DIR, os.path.join(src, "python"),
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        shutil.copytree(os.path.join(_env.REPO, "examples"), os.path.join(src, "examples"))
        cls.venv = os.path.join(root, "venv")
        made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", cls.venv],
                              capture_output=True, text=True)
        if made.returncode != 0:
            cls.tmp.cleanup()
            raise unittest.SkipTest("python3 -m venv failed (python3-venv missing?): %s"
                                    % made.stderr.strip()[-300:])
        cls.python = os.path.join(cls.venv, "bin", "python")
        pip = subprocess.run([cls.python, "-m", "pip", "install", "--no-build-isolation",
                              "--no-index", os.path.join(src, "python")],
                             capture_output=True, text=True, cwd=root)
        if pip.returncode != 0:
            cls.tmp.cleanup()
            raise AssertionError("pip install ./python failed:\n%s%s" % (pip.stdout[-2000:],
                                                                          pip.stderr[-2000:]))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_installed(self):
        env = {k: v for k, v in os.environ.items() if k not in ("KGYM_EXAMPLES", "PYTHONPATH")}
        out = subprocess.run([self.python, "-c", SCRIPT, self.cluster.endpoint], capture_output=True,
                             text=True, cwd=self.tmp.name, env=env, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])

    def test_installed_client_finds_bundled_tasks(self):
        got = self.run_installed()
        site = os.path.join(self.venv, "lib")
        self.assertTrue(got["file"].startswith(site), got)        # the installed copy, not the tree
        self.assertTrue(got["examples"].startswith(site), got)    # the package's own examples
        self.assertEqual(got["status"], "ok")
        self.assertEqual(got["n"], len(_env.kgym.list_examples()))
        # The prompt template ships inside the package.
        self.assertTrue(got["template"].startswith(site), got)
        self.assertEqual(got["prompt"], _env.kgym.prompt("cpu/gelu_f32", format="chat", gpu=None))
        # meson install's place: <prefix>/share/kgym/examples, when the package has none.
        package = os.path.dirname(got["file"])
        shutil.move(os.path.join(package, "examples"), os.path.join(self.tmp.name, "moved"))
        share = os.path.join(self.venv, "share", "kgym", "examples")
        os.makedirs(os.path.dirname(share))
        shutil.move(os.path.join(self.tmp.name, "moved"), share)
        got = self.run_installed()
        self.assertEqual(got["examples"], share)
        self.assertEqual(got["status"], "ok")


class NoExamples(unittest.TestCase):

    def test_the_error_says_where_it_looked(self):
        with tempfile.TemporaryDirectory() as empty:
            with unittest.mock.patch.dict(os.environ, {"KGYM_EXAMPLES": empty}):
                with self.assertRaises(_env.kgym.TaskError) as cm:
                    _env.kgym.resolve_task("cpu/gelu_f32")
        self.assertIn("no bundled examples found; looked in %s ($KGYM_EXAMPLES)" % empty,
                      str(cm.exception))
        places = [str(p) for p in _env.kgym.tasks.examples_places()]
        self.assertIn(os.path.join(sys.prefix, "share", "kgym", "examples"), places)
        self.assertIn("/usr/local/share/kgym/examples", places)


if __name__ == "__main__":
    unittest.main()
