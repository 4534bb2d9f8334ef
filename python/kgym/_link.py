"""The client's link to the broker: the endpoint, CURVE keys, and why a
connection does not come up.

ZeroMQ connects in the background and retries for ever without saying why
nothing arrives: a typo'd host, a broker that is down and a broker that
refuses our CURVE key all look like silence. The client checks what it can
up front (the endpoint's form here, the host's DNS name when the socket
opens), watches the socket's monitor events (handshake refused), and when
no connection comes up in time asks the network itself once (diagnose).
Imports the standard library only.
"""

import ipaddress
import os
import re
import socket

ENDPOINT_ENV = "KGYM_BROKER"
CURVE_SECRET_ENV = "KGYM_CURVE_SECRET"
BROKER_KEY_ENV = "KGYM_BROKER_KEY"

_Z85 = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")
_TCP = re.compile(r"^(?:[^;]*;)?(\[[0-9A-Fa-f:.%a-z]+\]|[^\s:/\[\];]+):([^:]*)$")


def check_endpoint(endpoint, source=None):
    """The broker's client endpoint, checked: ValueError saying what is
    wrong with it (source names where it came from, e.g. "$KGYM_BROKER")."""
    where = "%s=%r" % (source, endpoint) if source else "broker endpoint %r" % (endpoint,)
    if endpoint is None or (isinstance(endpoint, str) and not endpoint.strip()):
        raise ValueError("no broker endpoint: pass one (tcp://host:5555) or set %s" % ENDPOINT_ENV)
    if not isinstance(endpoint, str):
        raise TypeError("the broker endpoint is a str (tcp://host:5555), not %s"
                        % type(endpoint).__name__)
    ep = endpoint.strip()
    if "://" not in ep:
        raise ValueError("%s has no transport: write tcp://%s (a ZeroMQ endpoint: tcp://host:port, "
                         "or ipc://path on one host)" % (where, ep))
    transport, _, rest = ep.partition("://")
    if transport == "tcp":
        m = _TCP.match(rest)
        if not m:
            if ":" not in rest:
                raise ValueError("%s has no port: write tcp://%s:PORT (the broker's --clients port, "
                                 "5555 by default)" % (where, rest))
            raise ValueError("%s is not tcp://host:port" % where)
        port = m.group(2)
        if "*" in (port, m.group(1)):
            raise ValueError("%s: a client connects to one host and port; '*' is for binding"
                             % where)
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("%s: the port must be a number in 1..65535, not %r" % (where, port))
        return ep
    if transport in ("ipc", "inproc"):
        if not rest or any(c.isspace() for c in rest):
            raise ValueError("%s: %s:// needs a name without spaces" % (where, transport))
        return ep
    raise ValueError("%s: transport %r is not one a kgym broker speaks: tcp://host:port (or ipc://path "
                     "on one host)" % (where, transport))


def tcp_host_port(endpoint):
    """(host, port) of a tcp:// endpoint; (None, None) for other transports."""
    transport, _, rest = endpoint.partition("://")
    m = _TCP.match(rest) if transport == "tcp" else None
    if not m or not m.group(2).isdigit():
        return None, None
    host = m.group(1)
    if host.startswith("["):
        host = host[1:-1]
    return host, int(m.group(2))


def _numeric(host):
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return True
    except ValueError:
        return False


def resolve_problem(endpoint):
    """The DNS failure of a tcp:// endpoint's host as a sentence, or None
    (resolved, a numeric address, or not tcp)."""
    host, port = tcp_host_port(endpoint)
    if host is None or _numeric(host):
        return None
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return "DNS: cannot resolve the broker's host %r (%s)" % (host, exc.strerror or exc)
    except (OSError, UnicodeError) as exc:
        return "DNS: cannot resolve the broker's host %r (%s)" % (host, exc)
    return None


def diagnose(endpoint, timeout_s=1.0):
    """Why no ZeroMQ connection to endpoint came up, found by one DNS lookup
    and one plain connect (bounded by timeout_s): a sentence."""
    transport, _, rest = endpoint.partition("://")
    if transport == "tcp":
        problem = resolve_problem(endpoint)
        if problem:
            return problem
        host, port = tcp_host_port(endpoint)
        try:
            family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        except (OSError, UnicodeError) as exc:
            return "cannot resolve %r: %s" % (host, exc)
        target = "port %d of %s" % (port, host)
    elif transport == "ipc":
        family, kind, proto, addr = socket.AF_UNIX, socket.SOCK_STREAM, 0, rest
        target = "socket file %s" % rest
        if not os.path.exists(rest):
            return "%s does not exist (is the broker running on this host?)" % rest
    else:
        return "nothing serves %s in this process" % endpoint
    s = socket.socket(family, kind, proto)
    s.settimeout(timeout_s)
    try:
        s.connect(addr)
    except ConnectionRefusedError:
        return "connection refused: nothing listens on %s (is the broker running, with --clients " \
               "on that port?)" % target
    except socket.timeout:
        return "no answer from %s within %.3g s (host down, or a firewall drops the packets)" % (
            target, timeout_s)
    except OSError as exc:
        return "cannot connect to %s: %s" % (target, exc.strerror or exc)
    finally:
        s.close()
    return ("%s accepts connections, but no ZeroMQ handshake completed (is it a kgym broker's "
            "client port? one that is stopped or overloaded?)" % target)


def _cert_key(text, name):
    m = re.search(r'^\s*%s\s*=\s*"([^"]*)"' % name, text, re.M)
    return m.group(1) if m else None


def load_cert(path, secret, what):
    """(public, secret or None) Z85 keys of a CZMQ certificate file (what
    `kgym keygen` writes). ValueError saying what is wrong."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError as exc:
        raise ValueError("%s %s: %s" % (what, path, exc.strerror or exc)) from None
    public = _cert_key(text, "public-key")
    private = _cert_key(text, "secret-key")
    if public is None or not _Z85.match(public):
        raise ValueError("%s %s is not a CZMQ certificate (no 40-character public-key; "
                         "`kgym keygen NAME` writes them)" % (what, path))
    if secret and (private is None or not _Z85.match(private)):
        raise ValueError("%s %s has no secret-key: give the NAME_secret file `kgym keygen NAME` "
                         "wrote, not the public NAME" % (what, path))
    return public, private


def curve_keys(curve_secret, broker_key):
    """(public, secret, server) keys as bytes for a CURVE client socket, or
    None when neither is set. curve_secret: our NAME_secret certificate
    file; broker_key: the broker's public certificate file, or its Z85 key."""
    if curve_secret is None and broker_key is None:
        return None
    if curve_secret is None or broker_key is None:
        raise ValueError("CURVE needs both curve_secret (our NAME_secret certificate) and broker_key "
                         "(the broker's public certificate), or neither (also as $%s and $%s)"
                         % (CURVE_SECRET_ENV, BROKER_KEY_ENV))
    public, secret = load_cert(os.fspath(curve_secret), True, "curve_secret")
    key = os.fspath(broker_key)
    if _Z85.match(key) and not os.path.exists(key):
        server = key
    else:
        server, _ = load_cert(key, False, "broker_key")
    return public.encode(), secret.encode(), server.encode()
