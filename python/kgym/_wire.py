"""The kgym wire protocol, version 1, as a client speaks it (docs/protocol.md).

Every message is one ZeroMQ multipart message on a DEALER socket:

    frame 0  signature: b"KGYM", version 1, command byte   (6 bytes)
    frame 1  header: a msgpack map with string keys          (<= 4096 bytes)
    frame 2  body: msgpack (SUBMIT: the job; RESULT: the result; QUERY: the
             query; ANSWER: the answer; SUMMARY: a group summary)

This module only packs and unpacks frames; it holds no state and imports
msgpack only (never zmq), so it is cheap to import anywhere.
"""

import msgpack

VERSION = 1
SIGNATURE = b"KGYM"

READY = 1
HEARTBEAT = 2
DISCONNECT = 3
SUBMIT = 4
ACCEPTED = 5
JOB = 6
RESULT = 7
ERROR = 8
FETCH = 9
DONE = 10
DRAIN = 11
CANCEL = 12         # C->B  ref, job, [client]            (reply: DONE)
QUERY = 13          # C->B  ref, [client]                 body: query (section 14.3)
ANSWER = 14         # B->C  ref                           body: answer
SUMMARY = 15        # B->C  group                         body: group summary (section 14.4)

NAMES = {READY: "READY", HEARTBEAT: "HEARTBEAT", DISCONNECT: "DISCONNECT", SUBMIT: "SUBMIT",
         ACCEPTED: "ACCEPTED", JOB: "JOB", RESULT: "RESULT", ERROR: "ERROR", FETCH: "FETCH",
         DONE: "DONE", DRAIN: "DRAIN", CANCEL: "CANCEL", QUERY: "QUERY", ANSWER: "ANSWER",
         SUMMARY: "SUMMARY"}

#  Commands that always carry a body (sections 2 and 4); every other one never does.
WITH_BODY = frozenset((SUBMIT, JOB, RESULT, QUERY, ANSWER, SUMMARY))

#  SUBMIT header keys (section 4): backend, ref, client and retry are set by the
#  client; these describe the job.
SUBMIT_KEYS = ("tag", "group", "group_size", "trajectory", "cache")

#  Result cache policies (SUBMIT `cache`, section 14.1); "use" is the broker's default.
CACHE_POLICIES = ("use", "refresh", "bypass")

MAX_U32 = (1 << 32) - 1

MAX_HEADER = 4096
MAX_BODY = 16 << 20
MAX_STR = 255               # bytes of a header string (no NUL)
MAX_TRAJECTORY_STATE = 1 << 20  # bytes of one trajectory state, encoded (section 14.6)

#  Error codes (section 6.1).
ERR_MALFORMED = 400
ERR_UNKNOWN_COMMAND = 401
ERR_NOT_FOUND = 404           # DRAIN: no such worker; QUERY: no such job
ERR_NO_BACKEND = ERR_NOT_FOUND
ERR_CONFLICT = 409            # QUERY trajectory put: another writer came first (section 14.6)
ERR_TOO_LARGE = 413
ERR_OVERLOADED = 429
ERR_UNKNOWN_PEER = 440
ERR_INTERNAL = 500
ERR_UNSERVED = 503            # no connected worker serves the job's backend: it stays queued

#  Socket options every kgym DEALER applies (section 1).
HWM = 10000
MAX_MSG_SIZE = MAX_BODY + (64 << 10)
DEALER_LINGER_MS = 200


class WireError(ValueError):
    """A message from the broker that breaks the protocol (logged and dropped)."""


def header_str(value):
    """A header string: at most 255 bytes of UTF-8 (cut at a character
    boundary), no NUL. None stays None."""
    if value is None:
        return None
    text = str(value).replace("\0", "")
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_STR:
        return data.decode("utf-8", "replace")
    return data[:MAX_STR].decode("utf-8", "ignore")


def pack(command, header=None, body=None):
    """Frames of one message: [signature, header] or [signature, header, body]."""
    frames = [SIGNATURE + bytes((VERSION, command)),
              msgpack.packb(header or {}, use_bin_type=True)]
    if command in WITH_BODY:
        if body is None:
            raise ValueError("%s needs a body" % NAMES.get(command, command))
        frames.append(body)
    return frames


def unpack(frames):
    """(command, header dict, body bytes or None) of a received message;
    WireError when it breaks the rules of sections 2 and 3."""
    if len(frames) < 2:
        raise WireError("message of %d frame(s)" % len(frames))
    sig = bytes(frames[0])
    if len(sig) != 6 or sig[:4] != SIGNATURE:
        raise WireError("bad signature frame")
    if sig[4] != VERSION:
        raise WireError("protocol version %d not supported" % sig[4])
    command = sig[5]
    head = bytes(frames[1])
    if len(head) > MAX_HEADER:
        raise WireError("header frame too large")
    try:
        header = msgpack.unpackb(head, raw=False, strict_map_key=True)
    except Exception as exc:            # msgpack raises several types
        raise WireError("header: %s" % exc) from None
    if not isinstance(header, dict):
        raise WireError("header is not a map")
    body = None
    if command in WITH_BODY:
        if len(frames) != 3:
            raise WireError("%s without a body" % NAMES.get(command, command))
        body = bytes(frames[2])
        if not body or len(body) > MAX_BODY:
            raise WireError("body of %d bytes" % len(body))
    elif len(frames) != 2:
        raise WireError("unexpected body or extra frames")
    return command, header, body


def header_u32(value, name):
    """A u32 header value (section 3); ValueError when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_U32:
        raise ValueError("%s must be an integer in 0..%d, not %r" % (name, MAX_U32, value))
    return value


def cache_policy(value):
    """A validated cache policy string (None stays None: the broker's default)."""
    if value is None:
        return None
    if value not in CACHE_POLICIES:
        raise ValueError("cache must be one of %s, not %r" % (", ".join(CACHE_POLICIES), value))
    return value


def header_int(header, key, default=0):
    """An unsigned integer header field, or default when absent or mistyped."""
    value = header.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return default
    return value


def header_real(header, key, default=None):
    value = header.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value)


def header_text(header, key, default=""):
    value = header.get(key, default)
    return value if isinstance(value, str) else default


def _default(obj):
    """msgpack hook: numpy scalars and arrays, paths, sets become plain values."""
    item = getattr(obj, "item", None)
    if callable(item) and getattr(obj, "shape", None) == ():
        return item()
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "__fspath__"):
        return str(obj)
    raise TypeError("cannot encode %s in a job" % type(obj).__name__)


def encode_body(value):
    """msgpack of a job: ints as ints, reals as float64, str as str."""
    return msgpack.packb(value, use_bin_type=True, default=_default)


def decode_body(data, what="result"):
    """A body (a result, an answer, a summary) as a dict; WireError when it
    is not a msgpack map."""
    try:
        value = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:
        raise WireError("%s body: %s" % (what, exc)) from None
    if not isinstance(value, dict):
        raise WireError("%s body is not a map" % what)
    return value
