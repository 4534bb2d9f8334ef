"""kgym as an OpenRLHF remote reward model: an HTTP server for --remote_rm_url.

    python3 -m kgym.serve_rm --broker tcp://broker:5555 --port 5000 [--eval '{"trials": 3}']
    python -m openrlhf.cli.train_ppo_ray ... --remote_rm_url http://host:5000/get_reward --label_key task

OpenRLHF POSTs a JSON object {"query": [prompt + response, ...], "prompts":
[...], "labels": [...]} (the labels from --label_key: here each names the
task) and reads "rewards" from the JSON answer, and "scores" and
"extra_logs" where it has them (kgym.adapters.openrlhf.answer: the same
numbers as the .py route, as JSON lists). Any path takes the POST
(OpenRLHF's own server uses /get_reward); GET /health answers the broker's
health as JSON.

A request the server cannot use is answered 400 (not JSON, no query, no
labels, lengths that differ), 411/413 (no length, or over --max-body-mb);
a batch kgym's infrastructure failed, with --infra-score raise (the
default), 503 with the reason as {"error": ...}, logged once. Each request
runs on its own thread (one that stops sending for 120 s is dropped); the
client bounds the jobs in flight.
"""

import argparse
import json
import logging
import os
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import _link
from .client import Client, KgymError
from .adapters import _common as C
from .adapters import openrlhf

log = logging.getLogger("kgym")

__all__ = ["RewardServer", "main"]


class BadRequest(ValueError):
    """A request body the server cannot use; .status is the HTTP status."""

    def __init__(self, message, status=HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.status = status


def _strings(body, key, n=None, required=True):
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, list):
        raise BadRequest("%r must be a list%s" % (key, "" if key != "labels" else
                         " (start OpenRLHF with --label_key naming the dataset field that holds "
                         "each prompt's task)"))
    if n is not None and len(value) != n:
        raise BadRequest("%r has %d items, 'query' has %d" % (key, len(value), n))
    return value


def parse_body(data):
    """(queries, prompts, labels) of an OpenRLHF request body; BadRequest."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest("the body is not JSON: %s" % exc) from None
    if not isinstance(body, dict):
        raise BadRequest("the body is a JSON object {\"query\", \"prompts\", \"labels\"}")
    queries = _strings(body, "query")
    if not all(isinstance(q, str) for q in queries):
        raise BadRequest("'query' must be a list of strings (prompt + response)")
    prompts = _strings(body, "prompts", len(queries), required=False)
    labels = _strings(body, "labels", len(queries))
    return queries, prompts, labels


class RewardServer:
    """An HTTP server answering OpenRLHF's reward requests through a
    kgym.Client. settings: openrlhf.answer's keywords (eval, eval keys,
    format_score, missing_score, infra_score). start() serves on a thread,
    serve_forever() on the caller's; close() stops and closes the client."""

    def __init__(self, client, host="127.0.0.1", port=0, max_body_mb=64, **settings):
        self.client = client
        self.settings = dict(settings)
        C.infra_policy(self.settings.get("infra_score", C.RAISE))     # a bad one says so now
        self.max_body = int(max_body_mb * (1 << 20))
        self.httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self.httpd.daemon_threads = True
        self.thread = None

    @property
    def url(self):
        host, port = self.httpd.server_address[:2]
        return "http://%s:%d/get_reward" % (host, port)

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 120           # a peer that stops sending frees its thread

            def log_message(self, fmt, *args):       # the kgym logger, not stderr
                log.debug("kgym.serve_rm: %s - %s", self.address_string(), fmt % args)

            def do_POST(self):
                try:
                    status, answer = server.handle(self.headers, self.rfile)
                except Exception as exc:              # a bug: answer it, keep serving
                    log.exception("kgym.serve_rm: request failed")
                    status, answer = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)}
                self._send(status, answer)

            def do_GET(self):
                if self.path.rstrip("/") != "/health":
                    self._send(HTTPStatus.NOT_FOUND, {"error": "POST reward requests; GET /health"})
                    return
                h = server.client.health(timeout_s=2.0)
                self._send(HTTPStatus.OK if h.get("ok") else HTTPStatus.SERVICE_UNAVAILABLE, h)

            def _send(self, status, answer):
                data = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def handle(self, headers, rfile):
        """(HTTP status, JSON answer) of one POST."""
        length = headers.get("Content-Length")
        if length is None:
            return HTTPStatus.LENGTH_REQUIRED, {"error": "send a Content-Length"}
        try:
            length = int(length)
        except ValueError:
            return HTTPStatus.BAD_REQUEST, {"error": "Content-Length is not a number"}
        if length < 0 or length > self.max_body:
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {
                "error": "a body of %d bytes; at most %d (--max-body-mb)" % (length, self.max_body)}
        try:
            queries, prompts, labels = parse_body(rfile.read(length))
            return HTTPStatus.OK, openrlhf.answer(queries, prompts, labels, client=self.client,
                                                  **self.settings)
        except BadRequest as exc:
            return exc.status, {"error": str(exc)}
        except KgymError as exc:            # infra_score raise: the reason, logged once already
            return HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(exc)}
        except (TypeError, ValueError) as exc:      # a setting or an option kgym refuses
            return HTTPStatus.BAD_REQUEST, {"error": str(exc)}

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="kgym-serve-rm",
                                       daemon=True)
        self.thread.start()
        return self

    def serve_forever(self):
        self.httpd.serve_forever()

    def close(self):
        if self.thread is not None:
            self.httpd.shutdown()
            self.thread.join(10)
        self.httpd.server_close()
        self.client.close()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m kgym.serve_rm",
                                 description="kgym as an OpenRLHF remote reward model "
                                             "(--remote_rm_url http://HOST:PORT/get_reward)")
    ap.add_argument("--broker", default=os.environ.get(_link.ENDPOINT_ENV),
                    help="the broker's client endpoint (default $KGYM_BROKER)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; "
                    "0.0.0.0 for every interface)")
    ap.add_argument("--port", type=int, default=5000, help="port (default 5000; 0: a free one)")
    ap.add_argument("--eval", help="eval keys for every job, a JSON object: '{\"trials\": 3}'")
    ap.add_argument("--format-score", type=float, default=-1.0,
                    help="score of a completion with no gradable kernel (default -1.0)")
    ap.add_argument("--missing-score", type=float, default=0.0,
                    help="score of an invalid job, e.g. a label naming no task (default 0.0)")
    ap.add_argument("--infra-score", default=os.environ.get("KGYM_INFRA_SCORE") or C.RAISE,
                    help="when kgym's infrastructure fails a sample: 'raise' answers 503 with the "
                         "reason (default), a number scores it (logged once either way)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="client-side limit per job, seconds (default 600)")
    ap.add_argument("--max-inflight", type=int, default=256, help="jobs in flight (default 256)")
    ap.add_argument("--connect-timeout", type=float, default=10.0,
                    help="seconds a request waits for a first connection to the broker (default 10)")
    ap.add_argument("--max-body-mb", type=float, default=64.0, help="largest request (default 64)")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    settings = dict(format_score=args.format_score, missing_score=args.missing_score)
    try:
        settings["infra_score"] = C.infra_policy(args.infra_score)
        if args.eval:
            ev = json.loads(args.eval)
            if not isinstance(ev, dict):
                raise ValueError("--eval must be a JSON object, like '{\"trials\": 3}'")
            settings["eval"] = ev
        client = Client(args.broker or None, timeout_s=args.timeout, max_inflight=args.max_inflight,
                        connect_timeout_s=args.connect_timeout)
    except (TypeError, ValueError) as exc:
        ap.error(str(exc))
    try:
        server = RewardServer(client, args.host, args.port, args.max_body_mb, **settings)
    except OSError as exc:
        client.close()
        ap.error("cannot listen on %s:%d: %s" % (args.host, args.port, exc.strerror or exc))
    print("kgym.serve_rm: broker %s, listening on %s" % (client.endpoint, server.url), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
