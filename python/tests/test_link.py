"""The client's link to the broker: endpoints that say what is wrong with
them, no broker (connection refused, DNS), CURVE to a real broker and a
real CPU worker (accepted, refused key, CURVE at one end only), and ERROR
503 (no worker serves the backend) from a scripted broker."""

import logging
import os
import pickle
import subprocess
import tempfile
import threading
import unittest
from unittest import mock

import _env
import kgym
from kgym import _wire as W
from _fakebroker import FakeBroker, accept_and_answer, result_body, wait_until

MATMUL = "cpu/matmul_f32"
CAND = {"source": "void k(void) {}", "launches": [{"kernel": "k"}]}


class Endpoints(unittest.TestCase):

    def error(self, endpoint, **env):
        with mock.patch.dict(os.environ, env):
            with self.assertRaises(ValueError) as cm:
                kgym.Client(endpoint)
        return str(cm.exception)

    def test_what_is_wrong_is_said(self):
        self.assertIn("has no transport: write tcp://broker:5555", self.error("broker:5555"))
        self.assertIn("has no port: write tcp://broker:PORT", self.error("tcp://broker"))
        self.assertIn("'*' is for binding", self.error("tcp://*:5555"))
        self.assertIn("1..65535", self.error("tcp://broker:99999"))
        self.assertIn("transport 'http' is not one", self.error("http://broker:5555"))
        self.assertIn("set KGYM_BROKER", self.error(None, KGYM_BROKER=""))
        # An endpoint from the environment says it came from there.
        self.assertIn("KGYM_BROKER='broker:5555' has no transport", self.error(None, KGYM_BROKER="broker:5555"))
        for good in ("tcp://broker:5555", "tcp://10.0.0.1:1", "tcp://[::1]:5555", "ipc:///tmp/kgym.sock"):
            kgym.Client(good).close()

    def test_environment_is_honoured_everywhere(self):
        """$KGYM_BROKER is the endpoint of Client(), default_client() and the
        adapters' clients when none is given."""
        from kgym.adapters import _common
        with mock.patch.dict(os.environ, {"KGYM_BROKER": "tcp://127.0.0.1:5999"}):
            kgym.set_default_client(None)
            try:
                self.assertEqual(kgym.Client().endpoint, "tcp://127.0.0.1:5999")
                self.assertEqual(kgym.default_client().endpoint, "tcp://127.0.0.1:5999")
                self.assertEqual(_common.get_client().endpoint, "tcp://127.0.0.1:5999")
            finally:
                kgym.default_client().close()
                kgym.set_default_client(None)
        with self.assertRaises(ValueError) as cm:
            _common.get_client(broker="localhost:5555")
        self.assertIn("write tcp://localhost:5555", str(cm.exception))


class NoBroker(unittest.TestCase):

    def test_connection_refused_says_so_then_recovers(self):
        port = _env.free_port()
        client = kgym.Client("tcp://127.0.0.1:%d" % port, connect_timeout_s=0.5)
        self.addCleanup(client.close)
        with self.assertLogs("kgym", logging.ERROR) as logs:
            with self.assertRaises(kgym.BrokerUnreachable) as cm:
                client.grade(MATMUL, CAND)
            r = cm.exception.result
            self.assertEqual((r.status, r.error, r.reward), ("internal_error", "unreachable", None))
            self.assertIn("connection refused", r.message)
            self.assertIn("127.0.0.1:%d" % port, r.message)
            # What comes next fails at once, the same way, and is not logged again.
            self.assertEqual(client.grade(MATMUL, CAND, raise_on_error=False).error, "unreachable")
            with self.assertRaises(kgym.BrokerUnreachable):
                client.stats()
            h = client.health()
            self.assertFalse(h["ok"])
            self.assertIn("connection refused", h["error"])
        self.assertEqual(len(logs.records), 1, [rec.getMessage() for rec in logs.records])
        # A broker comes up on that port: the link is back without a new client.
        broker = FakeBroker(accept_and_answer, port=port)
        self.addCleanup(broker.stop)
        self.assertTrue(wait_until(lambda: client.health(timeout_s=0.5)["ok"], 10))
        self.assertEqual(client.grade(MATMUL, CAND).status, "ok")

    def test_unresolvable_host_says_dns(self):
        client = kgym.Client("tcp://no-such-host.invalid:5555", connect_timeout_s=30)
        self.addCleanup(client.close)
        with self.assertLogs("kgym", logging.ERROR):
            r = client.grade(MATMUL, CAND, raise_on_error=False)
        self.assertEqual((r.status, r.error), ("internal_error", "unreachable"))
        self.assertIn("DNS: cannot resolve the broker's host 'no-such-host.invalid'", r.message)
        with self.assertRaises(kgym.BrokerUnreachable):
            client.grade(MATMUL, CAND)


class Curve(unittest.TestCase):
    """A CURVE broker (kgym-broker --curve-secret) and a CPU worker with its
    own key; trainers' keys made by `kgym keygen`."""

    @classmethod
    def setUpClass(cls):
        _env.require_binaries()
        kgym_cli = os.path.join(str(_env.build_dir()), "client", "kgym")
        if not os.access(kgym_cli, os.X_OK):
            raise unittest.SkipTest("no %s to make keys with" % kgym_cli)
        cls.keys = tempfile.TemporaryDirectory(prefix="kgym-curve-")
        k = cls.keys.name
        for d in ("trainers", "workers"):
            os.mkdir(os.path.join(k, d))
        for name in ("broker", "trainers/alice", "workers/w0", "mallory"):
            subprocess.run([kgym_cli, "keygen", os.path.join(k, name)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.cluster = _env.LocalCluster(
            workers=1, build_dir=_env.build_dir(),
            broker_args=["--curve-secret", cls.path("broker_secret"),
                         "--trainer-keys", cls.path("trainers"), "--worker-keys", cls.path("workers")],
            worker_args=["--curve-secret", cls.path("workers/w0_secret"),
                         "--broker-key", cls.path("broker")])
        cls.cluster.start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.keys.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.keys.name, name)

    def client(self, **kw):
        c = kgym.Client(self.cluster.endpoint, connect_timeout_s=20, **kw)
        self.addCleanup(c.close)
        return c

    def test_trainer_key_grades(self):
        c = self.client(curve_secret=self.path("trainers/alice_secret"), broker_key=self.path("broker"))
        r = c.grade(MATMUL, kgym.example_candidates(MATMUL)["naive"], **_env.CHECK)
        self.assertEqual((r.status, r.error), ("ok", ""))
        # The broker's key as Z85 text works as well as its certificate file.
        with open(self.path("broker")) as f:
            z85 = f.read().split('public-key = "')[1][:40]
        self.assertIn("uptime_s", self.client(curve_secret=self.path("trainers/alice_secret"),
                                              broker_key=z85).stats())
        # A pickled client carries the key files' names, not the keys.
        copy = pickle.loads(pickle.dumps(c))
        self.addCleanup(copy.close)
        self.assertEqual(copy._cfg["curve_secret"], self.path("trainers/alice_secret"))
        self.assertEqual(copy.stats()["workers"], c.stats()["workers"])

    def test_keys_from_the_environment(self):
        env = {"KGYM_CURVE_SECRET": self.path("trainers/alice_secret"),
               "KGYM_BROKER_KEY": self.path("broker"), "KGYM_BROKER": self.cluster.endpoint}
        with mock.patch.dict(os.environ, env):
            c = kgym.Client()
        self.addCleanup(c.close)
        self.assertIn("uptime_s", c.stats())

    def test_refused_key_says_so(self):
        for secret, why in (("mallory_secret", "refused our CURVE key"),
                            ("workers/w0_secret", "not among the broker's --trainer-keys")):
            c = self.client(curve_secret=self.path(secret), broker_key=self.path("broker"))
            with self.assertLogs("kgym", logging.ERROR):
                with self.assertRaises(kgym.Unauthorized) as cm:
                    c.grade(MATMUL, CAND)
            self.assertIn(why, str(cm.exception))
            self.assertEqual(cm.exception.result.error, "unauthorized")
            with self.assertRaises(kgym.Unauthorized):
                c.stats()

    def test_curve_at_one_end_only(self):
        with mock.patch.dict(os.environ, {"KGYM_CURVE_SECRET": "", "KGYM_BROKER_KEY": ""}):
            plain = self.client()
        with self.assertLogs("kgym", logging.ERROR):
            r = plain.grade(MATMUL, CAND, raise_on_error=False)
        self.assertEqual(r.error, "unauthorized")
        self.assertIn("requires CURVE", r.message)
        wrong = self.client(curve_secret=self.path("trainers/alice_secret"),
                            broker_key=self.path("mallory"))
        with self.assertLogs("kgym", logging.ERROR):
            r = wrong.grade(MATMUL, CAND, raise_on_error=False)
        self.assertIn("broker_key is not its public key", r.message)

    def test_bad_key_files(self):
        with self.assertRaises(ValueError) as cm:
            kgym.Client("tcp://127.0.0.1:5555", curve_secret=self.path("trainers/alice_secret"))
        self.assertIn("both curve_secret", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            kgym.Client("tcp://127.0.0.1:5555", curve_secret=self.path("trainers/alice"),
                        broker_key=self.path("broker"))
        self.assertIn("has no secret-key", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            kgym.Client("tcp://127.0.0.1:5555", curve_secret=self.path("nope"),
                        broker_key=self.path("broker"))
        self.assertIn("No such file", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            kgym.Client("tcp://127.0.0.1:5555", curve_secret=self.path("trainers/alice_secret"),
                        broker_key=__file__)
        self.assertIn("is not a CZMQ certificate", str(cm.exception))


class Unserved(unittest.TestCase):
    """ERROR 503 {ref, job, reason}: no connected worker serves the backend.
    Informational: the job stays queued and its RESULT (a worker's, or the
    broker's internal_error after its grace period) still comes."""

    def broker(self):
        release = threading.Event()

        def handler(broker, peer, command, header, body):
            if command == W.HEARTBEAT:
                broker.send(peer, W.HEARTBEAT)
            elif command == W.SUBMIT:
                ref = header["ref"]
                jid = 500 + ref
                reason = "no connected worker serves backend %r" % header["backend"]
                broker.send(peer, W.ACCEPTED, {"ref": ref, "job": jid})
                broker.send(peer, W.ERROR, {"code": 503, "ref": ref, "job": jid, "reason": reason})
                broker.send(peer, W.ERROR, {"code": 503, "ref": ref, "job": jid, "reason": reason})

                def answer():
                    release.wait(30)
                    if header.get("tag") == "worker":
                        broker.send(peer, W.RESULT, {"job": jid, "ref": ref, "worker": "late-0"},
                                    result_body())
                    else:
                        broker.send(peer, W.RESULT, {"job": jid, "ref": ref}, result_body(
                            "internal_error", None, message="no worker for backend 'cpu' joined "
                            "within 30 s"))
                threading.Thread(target=answer, daemon=True).start()

        b = FakeBroker(handler)
        self.addCleanup(b.stop)
        self.addCleanup(release.set)
        return b, release

    def test_unserved_is_a_warning_not_a_failure(self):
        broker, release = self.broker()
        seen = []
        client = kgym.Client(broker.endpoint, on_unserved=lambda fut, why: seen.append((fut, why)))
        self.addCleanup(client.close)
        with self.assertLogs("kgym", logging.WARNING) as logs:
            a = client.submit(MATMUL, CAND, tag="worker")
            b = client.submit(MATMUL, CAND, tag="broker")
            self.assertTrue(wait_until(lambda: len(seen) == 2, 10), seen)
        self.assertFalse(a.done() or b.done())          # still queued
        self.assertEqual(a.unserved, "no connected worker serves backend 'cpu'")
        self.assertEqual((a.job, b.job), (500 + a.ref, 500 + b.ref))
        self.assertEqual({id(f) for f, _ in seen}, {id(a), id(b)})     # once per job
        said = [rec.getMessage() for rec in logs.records if "no worker for backend" in rec.getMessage()]
        self.assertEqual(len(said), 1, said)                            # once per backend
        self.assertIn("'cpu'", said[0])
        self.assertEqual(client.health()["unserved"], 2)
        release.set()
        ra, rb = a.result(10), b.result(10)
        self.assertEqual((ra.status, ra.error, ra.worker), ("ok", "", "late-0"))
        # The broker gave up on the other one: its own internal_error, reason kept.
        self.assertEqual((rb.status, rb.error, rb.reward), ("internal_error", "", None))
        self.assertIn("joined within", rb.message)


if __name__ == "__main__":
    unittest.main()
