"""A stand-in for the part of pyzmq that kgym's Python client uses, over
libzmq through ctypes. Only for machines where pyzmq cannot be installed
(the GPU machine's image has no pyzmq and no package index): put
bench/zmqshim first on PYTHONPATH there. Anywhere else use pyzmq
(Debian's python3-zmq).
"""

import ctypes
import ctypes.util
import errno as _errno
import os
import threading

_lib = ctypes.CDLL(os.environ.get("KGYM_LIBZMQ") or ctypes.util.find_library("zmq") or "libzmq.so.5",
                   use_errno=True)

DEALER, PAIR = 5, 0
NOBLOCK = DONTWAIT = 1
SNDMORE = 2
POLLIN, POLLOUT = 1, 2
LINGER, SNDHWM, RCVHWM, MAXMSGSIZE, RCVMORE = 17, 23, 24, 22, 13
CURVE_PUBLICKEY, CURVE_SECRETKEY, CURVE_SERVERKEY = 48, 49, 50
EVENT_CONNECTED, EVENT_DISCONNECTED = 0x0001, 0x0200
EVENT_ALL = 0xFFFF
EVENT_HANDSHAKE_FAILED_NO_DETAIL = 0x0800
EVENT_HANDSHAKE_SUCCEEDED = 0x1000
EVENT_HANDSHAKE_FAILED_PROTOCOL = 0x2000
EVENT_HANDSHAKE_FAILED_AUTH = 0x4000
EAGAIN, EINTR = _errno.EAGAIN, _errno.EINTR
_INT64_OPTS = {MAXMSGSIZE, 4}       # and ZMQ_AFFINITY: int64_t in libzmq

_lib.zmq_ctx_new.restype = ctypes.c_void_p
_lib.zmq_socket.restype = ctypes.c_void_p
_lib.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
_lib.zmq_close.argtypes = [ctypes.c_void_p]
_lib.zmq_ctx_term.argtypes = [ctypes.c_void_p]
_lib.zmq_setsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_lib.zmq_getsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_size_t)]
_lib.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_lib.zmq_send.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_lib.zmq_socket_monitor.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
_lib.zmq_strerror.restype = ctypes.c_char_p
_lib.zmq_msg_init.argtypes = [ctypes.c_void_p]
_lib.zmq_msg_recv.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
_lib.zmq_msg_data.restype = ctypes.c_void_p
_lib.zmq_msg_data.argtypes = [ctypes.c_void_p]
_lib.zmq_msg_size.restype = ctypes.c_size_t
_lib.zmq_msg_size.argtypes = [ctypes.c_void_p]
_lib.zmq_msg_close.argtypes = [ctypes.c_void_p]
_lib.zmq_msg_more.argtypes = [ctypes.c_void_p]


class ZMQError(Exception):
    def __init__(self, errno=None, msg=None):
        self.errno = errno if errno is not None else ctypes.get_errno()
        self.strerror = msg or _lib.zmq_strerror(self.errno).decode()
        super().__init__(self.strerror)


class Again(ZMQError):
    pass


def _check(rc):
    if rc == -1:
        err = ctypes.get_errno()
        raise (Again if err == EAGAIN else ZMQError)(err)
    return rc


def zmq_version_info():
    a, b, c = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _lib.zmq_version(ctypes.byref(a), ctypes.byref(b), ctypes.byref(c))
    return (a.value, b.value, c.value)


class _Msg(ctypes.Structure):
    _fields_ = [("_", ctypes.c_ubyte * 64)]


class Context:
    _monitors = 0
    _lock = threading.Lock()

    def __init__(self):
        self.handle = _lib.zmq_ctx_new()

    def socket(self, kind):
        return Socket(self, kind)

    def term(self):
        _lib.zmq_ctx_term(self.handle)


class Socket:
    def __init__(self, ctx, kind):
        self.ctx = ctx
        self.handle = _lib.zmq_socket(ctx.handle, kind)
        if not self.handle:
            raise ZMQError()
        self.closed = False

    def setsockopt(self, opt, value):
        if isinstance(value, (bytes, bytearray)):
            buf = ctypes.create_string_buffer(bytes(value), len(value))
            _check(_lib.zmq_setsockopt(self.handle, opt, buf, len(value)))
        else:
            v = (ctypes.c_int64 if opt in _INT64_OPTS else ctypes.c_int)(int(value))
            _check(_lib.zmq_setsockopt(self.handle, opt, ctypes.byref(v), ctypes.sizeof(v)))

    def __setattr__(self, name, value):
        opt = {"curve_publickey": CURVE_PUBLICKEY, "curve_secretkey": CURVE_SECRETKEY,
               "curve_serverkey": CURVE_SERVERKEY}.get(name)
        if opt is None:
            object.__setattr__(self, name, value)
        else:
            self.setsockopt(opt, value.encode() if isinstance(value, str) else value)

    def connect(self, endpoint):
        _check(_lib.zmq_connect(self.handle, endpoint.encode()))

    def get_monitor_socket(self, events=EVENT_ALL):
        with Context._lock:
            Context._monitors += 1
            address = "inproc://zmqshim-monitor-%d-%d" % (os.getpid(), Context._monitors)
        _check(_lib.zmq_socket_monitor(self.handle, address.encode(), events))
        pair = Socket(self.ctx, PAIR)
        pair.connect(address)
        return pair

    def disable_monitor(self):
        _lib.zmq_socket_monitor(self.handle, None, 0)

    def close(self, linger=None):
        if self.closed:
            return
        if linger is not None:
            self.setsockopt(LINGER, linger)
        _lib.zmq_close(self.handle)
        self.closed = True

    def send_multipart(self, frames, flags=0, copy=True):
        frames = list(frames)
        for i, frame in enumerate(frames):
            data = bytes(frame)
            more = SNDMORE if i + 1 < len(frames) else 0
            _check(_lib.zmq_send(self.handle, data, len(data), flags | more))

    def recv_multipart(self, flags=0):
        parts = []
        while True:
            msg = _Msg()
            _lib.zmq_msg_init(ctypes.byref(msg))
            try:
                _check(_lib.zmq_msg_recv(ctypes.byref(msg), self.handle, flags))
                size = _lib.zmq_msg_size(ctypes.byref(msg))
                parts.append(ctypes.string_at(_lib.zmq_msg_data(ctypes.byref(msg)), size))
                more = _lib.zmq_msg_more(ctypes.byref(msg))
            finally:
                _lib.zmq_msg_close(ctypes.byref(msg))
            if not more:
                return parts
            flags = 0               # the rest of a message is there already


class _PollItem(ctypes.Structure):
    _fields_ = [("socket", ctypes.c_void_p), ("fd", ctypes.c_int), ("events", ctypes.c_short),
                ("revents", ctypes.c_short)]


_lib.zmq_poll.argtypes = [ctypes.POINTER(_PollItem), ctypes.c_int, ctypes.c_long]


class Poller:
    def __init__(self):
        self.items = {}

    def register(self, what, flags=POLLIN):
        self.items[what] = flags

    def unregister(self, what):
        del self.items[what]

    def poll(self, timeout=None):
        keys = list(self.items)
        arr = (_PollItem * len(keys))()
        for i, k in enumerate(keys):
            if isinstance(k, Socket):
                arr[i].socket, arr[i].fd = k.handle, 0
            else:
                arr[i].socket, arr[i].fd = None, int(k)
            arr[i].events = self.items[k]
        t = -1 if timeout is None else int(timeout)
        _check(_lib.zmq_poll(arr, len(keys), t))
        return [(k, arr[i].revents) for i, k in enumerate(keys) if arr[i].revents]
