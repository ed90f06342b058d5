#!/usr/bin/env python3
"""Golden-frame capture for the ZooKeeper client protocol (stdlib only).

proxy mode: listen on a loopback port, forward every connection to a real
ZooKeeper, split both directions into frames (4-byte big-endian length +
payload) and append one TSV line per frame:  name, direction, kind, hex.

A control port (one line per command, answered with "ok") lets the traffic
driver label what comes next:
    mark <label>      frames from now on are named <label>_...
    comment <text>    write "# <text>" into the TSV
    drop              close all proxied connections (forces a client reconnect)
The proxy runs until killed; the TSV is flushed after every line.

raw mode (run after GoldenTraffic.java, which creates /golden): hand-made
sessions for what stock clients do not send: a ConnectRequest without the
trailing readOnly byte (44 bytes, old-style clients), a SetWatches with
xid -8 (C client style) and a multi holding a create2 (15) op.

    python3 capture.py proxy --listen 21811 --upstream 21810 --control 21812 --out frames.tsv
    python3 capture.py raw --port 21811 --control 21812
"""
import argparse
import socket
import struct
import sys
import threading

OPS = {1: "create", 2: "delete", 3: "exists", 4: "get_data", 5: "set_data",
       6: "get_acl", 7: "set_acl", 8: "get_children", 9: "sync", 11: "ping",
       12: "get_children2", 13: "check", 14: "multi", 15: "create2",
       16: "reconfig", 17: "check_watches", 18: "remove_watches",
       19: "create_container", 20: "delete_container", 21: "create_ttl",
       22: "multi_read", 100: "auth", 101: "set_watches", 102: "sasl",
       103: "get_ephemerals", 104: "get_all_children_number",
       105: "set_watches2", 106: "add_watch", 107: "who_am_i",
       -11: "close_session"}
EVENTS = {1: "node_created", 2: "node_deleted", 3: "node_data_changed",
          4: "node_children_changed"}


class Recorder:
    """Names frames and appends them to the TSV; one lock orders all lines."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.out = open(path, "w", encoding="utf-8", newline="\n")
        self.out.write("name\tdirection\tkind\thex\n")
        self.label = "unlabeled"
        self.names = set()
        self.pings = [0, 0]  # ping requests / ping replies seen

    def unique(self, *candidates):
        for c in candidates:
            if c not in self.names:
                self.names.add(c)
                return c
        base, n = candidates[-1], 2
        while f"{base}_{n}" in self.names:
            n += 1
        self.names.add(f"{base}_{n}")
        return f"{base}_{n}"

    def comment(self, text):
        with self.lock:
            self.out.write(f"# {text}\n")
            self.out.flush()

    def frame(self, conn, c2s, payload):
        with self.lock:
            kind, name = self.classify(conn, c2s, payload)
            d = "c2s" if c2s else "s2c"
            self.out.write(f"{name}\t{d}\t{kind}\t{payload.hex()}\n")
            self.out.flush()

    def classify(self, conn, c2s, p):
        lab = self.label
        if c2s and not conn.connect_seen:
            conn.connect_seen, conn.label = True, lab
            return "connect_request", self.unique(f"{lab}_connect_request")
        if not c2s and not conn.connected:
            conn.connected = True
            return "connect_response", self.unique(f"{lab}_connect_response")
        if c2s:
            xid, op = struct.unpack(">ii", p[:8])
            opn = OPS.get(op, f"op{op}")
            if op == 11:
                self.pings[0] += 1
                name = self.unique(f"ping_{self.pings[0]}_request")
            elif conn.label == lab:  # frames the client pipelines behind a handshake
                name = self.unique(f"{lab}_{opn}_request")
            else:
                name = self.unique(f"{lab}_request", f"{lab}_{opn}_request")
            conn.pending[xid] = (op, name)
            return "request", name
        xid = struct.unpack(">i", p[:4])[0]
        if xid == -1:
            etype = struct.unpack(">i", p[16:20])[0]
            ev = EVENTS.get(etype, f"event{etype}")
            return "notification", self.unique(f"{lab}_notification_{ev}")
        if xid == -2:
            self.pings[1] += 1
            return "reply:11", self.unique(f"ping_{self.pings[1]}_reply")
        op, reqname = conn.pending.pop(xid, (None, f"{lab}_xid{xid}_request"))
        base = reqname[: -len("_request")] if reqname.endswith("_request") else reqname
        return f"reply:{op}", self.unique(f"{base}_reply")


class Conn:
    def __init__(self, client, upstream):
        self.client, self.upstream = client, upstream
        self.connect_seen = self.connected = False
        self.label = None  # label under which this connection was (re)established
        self.pending = {}


def pump(rec, conn, src, dst, c2s):
    buf = b""
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            buf += chunk
            # Record complete frames *before* forwarding, so a request is
            # always logged before the server can answer it.
            while len(buf) >= 4:
                n = struct.unpack(">i", buf[:4])[0]
                if len(buf) < 4 + n:
                    break
                rec.frame(conn, c2s, buf[4:4 + n])
                buf = buf[4 + n:]
            dst.sendall(chunk)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    if buf:
        rec.comment(f"{'c2s' if c2s else 's2c'}: {len(buf)} trailing bytes not a full frame")


def listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    return s


def run_proxy(a):
    rec = Recorder(a.out)
    conns = []

    def accept_loop(ls):
        while True:
            client, _ = ls.accept()
            up = socket.create_connection(("127.0.0.1", a.upstream))
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = Conn(client, up)
            conns.append(c)
            threading.Thread(target=pump, args=(rec, c, client, up, True), daemon=True).start()
            threading.Thread(target=pump, args=(rec, c, up, client, False), daemon=True).start()

    def control_client(cs):
        f = cs.makefile("rw", encoding="utf-8", newline="\n")
        for line in f:
            cmd, _, arg = line.rstrip("\n").partition(" ")
            if cmd == "mark":
                with rec.lock:
                    rec.label = arg
            elif cmd == "comment":
                rec.comment(arg)
            elif cmd == "drop":
                for c in conns:
                    for s in (c.client, c.upstream):
                        try:
                            s.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
            f.write("ok\n")
            f.flush()

    def control_loop(ls):
        while True:
            cs, _ = ls.accept()
            threading.Thread(target=control_client, args=(cs,), daemon=True).start()

    ls = listener(a.listen)
    threading.Thread(target=control_loop, args=(listener(a.control),), daemon=True).start()
    print(f"proxy 127.0.0.1:{a.listen} -> 127.0.0.1:{a.upstream}, control {a.control}", flush=True)
    accept_loop(ls)


def control(port):
    f = socket.create_connection(("127.0.0.1", port)).makefile("rw", encoding="utf-8")

    def send(line):
        f.write(line + "\n")
        f.flush()
        f.readline()
    return send


def read_frame(s):
    def exact(n):
        b = b""
        while len(b) < n:
            chunk = s.recv(n - len(b))
            if not chunk:
                raise EOFError
            b += chunk
        return b
    return exact(struct.unpack(">i", exact(4))[0])


def ustr(text):
    return struct.pack(">i", len(text)) + text.encode()


def ustrings(*texts):
    return struct.pack(">i", len(texts)) + b"".join(map(ustr, texts))


def run_raw(a):
    ctl = control(a.control)

    def session(label, readonly_byte):
        ctl("mark " + label)
        s = socket.create_connection(("127.0.0.1", a.port))
        req = struct.pack(">iqiqi", 0, 0, 4000, 0, 16) + bytes(16) + readonly_byte
        s.sendall(struct.pack(">i", len(req)) + req)
        print(label, "connect response", read_frame(s).hex())
        return s

    def request(s, xid, op, body=b""):
        s.sendall(struct.pack(">iii", 8 + len(body), xid, op) + body)
        while True:  # print notifications until the reply with our xid
            f = read_frame(s)
            print("  ", f.hex())
            if struct.unpack(">i", f[:4])[0] == xid:
                return

    ctl("comment raw python session: ConnectRequest without the readOnly byte (44 bytes)")
    s = session("raw_no_readonly", b"")
    ctl("mark raw_no_readonly_close")
    request(s, 1, -11)
    s.close()

    ctl("comment raw python session: SetWatches (101) with xid -8 as the C client sends it; "
        "relativeZxid 1, so existing watched nodes look changed and events are synthesised")
    s = session("raw_session", b"\x00")
    ctl("mark raw_set_watches_xid_minus_8")
    request(s, -8, 101, struct.pack(">q", 1)
            + ustrings("/golden", "/golden/gone")          # dataWatches
            + ustrings("/golden/c2", "/golden/absent2")    # existWatches
            + ustrings("/golden", "/golden/gone"))         # childWatches
    ctl("mark raw_multi_create2")  # a create2 (15) op inside multi; Java's Op API never sends it
    open_acl = struct.pack(">ii", 1, 31) + ustr("world") + ustr("anyone")
    create2 = ustr("/golden/raw_c2") + ustr("r") + open_acl + struct.pack(">i", 0)
    request(s, 2, 14, struct.pack(">i?i", 15, False, -1) + create2 + struct.pack(">i?i", -1, True, -1))
    ctl("mark raw_session_close")
    request(s, 3, -11)
    s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("proxy")
    p.add_argument("--listen", type=int, default=21811)
    p.add_argument("--upstream", type=int, default=21810)
    p.add_argument("--control", type=int, default=21812)
    p.add_argument("--out", default="frames.tsv")
    r = sub.add_parser("raw")
    r.add_argument("--port", type=int, default=21811)
    r.add_argument("--control", type=int, default=21812)
    a = ap.parse_args()
    (run_proxy if a.mode == "proxy" else run_raw)(a)


if __name__ == "__main__":
    sys.exit(main())
