"""A scripted broker (a ROUTER in a thread) for protocol edge cases a real
broker does not produce on demand: silence, ERROR 429 and 503, malformed
frames."""

import threading
import time

import msgpack
import zmq

from kgym import _wire as W


class FakeBroker:
    """handler(broker, peer, command, header, body) is called for every
    message; it replies with broker.send(peer, ...). peers lists routing
    ids in order of first contact; log holds (peer index, command, header)."""

    def __init__(self, handler, port=None):
        self.handler = handler
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        if port is None:
            port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        else:
            self.sock.bind("tcp://127.0.0.1:%d" % port)
        self.endpoint = "tcp://127.0.0.1:%d" % port
        self.peers = []
        self.log = []
        self.state = {}
        self._outbox = []
        self._stop = False
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def peer_index(self, peer):
        if peer not in self.peers:
            self.peers.append(peer)
        return self.peers.index(peer)

    def send(self, peer, command, header=None, body=None, raw=None):
        frames = raw if raw is not None else W.pack(command, header or {}, body)
        with self._lock:
            self._outbox.append([peer] + frames)

    def later(self, delay, fn):
        t = threading.Timer(delay, fn)
        t.daemon = True
        t.start()

    def _run(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self._stop:
            with self._lock:
                out, self._outbox = self._outbox, []
            for frames in out:
                try:
                    self.sock.send_multipart(frames)
                except zmq.ZMQError:
                    pass
            if not poller.poll(10):
                continue
            frames = self.sock.recv_multipart()
            peer, rest = frames[0], frames[1:]
            command, header, body = W.unpack(rest)
            idx = self.peer_index(peer)
            self.log.append((idx, command, header))
            self.handler(self, peer, command, header, body)
        self.sock.close(0)
        self.ctx.term()

    def stop(self):
        self._stop = True
        self.thread.join(5)

    def submits(self):
        return [(i, h) for i, c, h in self.log if c == W.SUBMIT]


def result_body(status="ok", reward=1.0, **extra):
    return msgpack.packb(dict({"status": status, "reward": reward, "speedup": reward,
                               "message": ""}, **extra))


def accept_and_answer(broker, peer, command, header, body, result=None, delay=0.0):
    """The well-behaved broker: ACCEPTED then RESULT; HEARTBEAT answered."""
    if command == W.HEARTBEAT:
        broker.send(peer, W.HEARTBEAT)
    elif command == W.SUBMIT:
        ref = header["ref"]
        job = broker.state.setdefault("next_job", [100])
        job[0] += 1
        jid = job[0]
        broker.send(peer, W.ACCEPTED, {"ref": ref, "job": jid})
        reply = lambda: broker.send(peer, W.RESULT, {"job": jid, "ref": ref, "attempt": 1,
                                                     "queue_s": 0.5, "worker": "fake"},
                                    result or result_body())
        if delay:
            broker.later(delay, reply)
        else:
            reply()


def wait_until(cond, timeout=5.0, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()
