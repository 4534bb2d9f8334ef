"""kgym.tools: compile, run and profile as function-calling tools bound to a
client, each returning the text a model reads; through a real broker and
CPU worker."""

import json
import os
import unittest

import _env
import kgym
from kgym.tools import TOOL_NAMES, Tools, profile_table

TASK = "cpu/rmsnorm_f32"


def source(name):
    """A bundled candidate as a tool call's code: the source with its plan as comment lines."""
    cand = _env.candidate(TASK, name)
    lines = ["// kgym: launch kernel=%s" % l["kernel"] for l in cand["launches"]]
    if cand.get("options"):
        lines.append("// kgym: options " + " ".join(cand["options"]))
    if cand.get("workspace"):
        lines.append("// kgym: workspace %s" % cand["workspace"])
    return "\n".join(lines) + "\n" + cand["source"]


class Schemas(unittest.TestCase):

    def test_function_calling_form(self):
        client = kgym.Client("tcp://127.0.0.1:9")       # never connects: schemas need no broker
        bound = Tools(client, TASK).schemas()
        self.assertEqual([t["function"]["name"] for t in bound], list(TOOL_NAMES))
        for tool in bound:
            self.assertEqual(tool["type"], "function")
            params = tool["function"]["parameters"]
            self.assertEqual(params["type"], "object")
            self.assertEqual(params["required"], ["code"])
            self.assertIn("kgym: launch", params["properties"]["code"]["description"])
            json.dumps(tool)                            # plain JSON
        free = Tools(client).schemas()
        self.assertEqual(free[0]["function"]["parameters"]["required"], ["task", "code"])
        module = Tools(client, os.path.join(_env.REPO, "tests", "data", "kernelbench", "level1",
                                            "19_ReLU.py")).schemas()
        self.assertIn("ModelNew", module[0]["function"]["parameters"]["properties"]["code"]["description"])
        client.close()

    def test_the_models_mistakes_come_back_as_text(self):
        client = kgym.Client("tcp://127.0.0.1:9")
        tools = Tools(client, TASK)
        self.assertIn("unknown tool 'debug'", tools.call("debug", {"code": "x"}))
        self.assertIn("needs \"code\"", tools.call("run", {}))
        self.assertIn("not JSON", tools.call("run", "{code:"))
        self.assertIn("takes code, not flags", tools.call("run", {"code": "x", "flags": 1}))
        self.assertIn("bound to task rmsnorm_f32", tools.call("run", {"code": "x", "task": "cpu/gelu_f32"}))
        # No gradable kernel: the extractor's feedback, nothing sent.
        text = tools.call("run", {"code": "static void helper(void) {}"})
        self.assertIn("no non-static function", text)
        self.assertEqual(tools.results, [])
        client.close()


class AgainstTheBroker(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.client = kgym.Client(_env.cluster().endpoint, timeout_s=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_compile_run_profile(self):
        tools = Tools(self.client, TASK, eval={"timed": 2, "warmup": 0, "trials": 1})
        text = tools.call("compile", {"code": source("compile_error")})
        self.assertTrue(text.startswith("status: compile_error"), text)
        self.assertIn("error", text)
        text = tools.call("compile", json.dumps({"code": source("naive")}))
        self.assertTrue(text.startswith("compiled. One check on the task's sizes (not timed): ok"), text)
        text = tools.call("run", {"code": source("tail_bug")})
        self.assertTrue(text.startswith("status: incorrect"), text)
        text = tools.call("run", {"code": source("optimised")})
        self.assertTrue(text.startswith("status: ok, reward"), text)
        text = tools.call("profile", {"code": source("naive")})
        self.assertTrue(text.startswith("status: ok"), text)
        self.assertIn("candidate  rmsnorm", text)
        self.assertIn("reference  rmsnorm_ref", text)
        self.assertEqual([r.status for r in tools.results],
                         ["compile_error", "ok", "incorrect", "ok", "ok"])
        self.assertEqual(tools.best().status, "ok")

    def test_unbound_tools_take_the_task(self):
        tools = Tools(self.client, eval={"check_only": True, "trials": 1})
        self.assertIn("say which task", tools.call("run", {"code": source("naive")}))
        text = tools.call("run", {"task": TASK, "code": source("naive")})
        self.assertTrue(text.startswith("status: ok"), text)
        self.assertIn("unknown task", tools.call("run", {"task": "cpu/nope", "code": "x"}))

    def test_a_pytorch_task(self):
        if not _env.python_backend():
            self.skipTest("this build has no python backend: PyTorch tasks cannot be graded")
        task = os.path.join(_env.REPO, "tests", "data", "kernelbench", "level1", "19_ReLU.py")
        t = dict(kgym.resolve_task(task), backend="cpu")
        code = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                "    def forward(self, x):\n        return x.clamp(min=0)\n")
        text = Tools(self.client, t, eval={"timed": 2, "trials": 1}).call("run", {"code": code})
        self.assertTrue(text.startswith("status: ok"), text)


class ProfileTable(unittest.TestCase):

    def test_kinds_and_reference_operators(self):
        text = profile_table({"profile": {
            "available": True, "library_share": 0.1,
            "kernels": [{"name": "fused", "kind": "own", "launches": 2, "total_us": 10.0,
                         "mean_us": 5.0, "share": 0.9}],
            "reference": {"kernels": [{"name": "ampere_sgemm", "launches": 1, "total_us": 30.0,
                                       "mean_us": 30.0, "share": 1.0}],
                          "operators": [{"name": "aten::mm", "share": 0.75},
                                        {"name": "aten::relu", "share": 0.25}]}}})
        self.assertIn("candidate  fused (own)", text)
        self.assertIn("library kernels: 10%", text)
        self.assertIn("aten::mm 75%, aten::relu 25%", text)
        self.assertEqual(profile_table({"profile": None}), "(no profile)")
        self.assertIn("unavailable: no CUPTI", profile_table({"profile": {"available": False,
                                                                           "reason": "no CUPTI"}}))


if __name__ == "__main__":
    unittest.main()
