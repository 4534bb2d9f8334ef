"""recv_monitor_message, as pyzmq's (see bench/zmqshim/zmq)."""
import struct


def recv_monitor_message(socket, flags=0):
    frames = socket.recv_multipart(flags)
    event, value = struct.unpack("=hi", frames[0][:6])
    return {"event": event, "value": value, "endpoint": frames[1] if len(frames) > 1 else b""}
