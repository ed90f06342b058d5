#!/usr/bin/env python3
"""Optional kazoo (python-zk) session through capture.py: kazoo's handshake,
create with b"" data, create2, transactions (multi), closeSession.

    pip install --target /tmp/pylib kazoo
    PYTHONPATH=/tmp/pylib python3 kazoo_traffic.py --port 21811 --control 21812
"""
import argparse
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.version import __version__ as kazoo_version

sys.dont_write_bytecode = True  # keep __pycache__ out of the test-data folder
from capture import control  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=21811)
ap.add_argument("--control", type=int, default=21812)
a = ap.parse_args()
ctl = control(a.control)


def step(label, fn):
    ctl("mark " + label)
    try:
        r = fn()
    except KazooException as e:
        r = repr(e)
    print(label, "->", r)
    time.sleep(0.15)


ctl(f"comment kazoo {kazoo_version} session: handshake, create, create2, transactions, close")
zk = KazooClient(hosts=f"127.0.0.1:{a.port}", timeout=4.0)
step("kazoo_session", zk.start)
step("kazoo_create_empty_data", lambda: zk.create("/kz", b""))
step("kazoo_create2", lambda: zk.create("/kz/c2", b"v", include_data=True))


def txn(ops):
    t = zk.transaction()
    for op, *args in ops:
        getattr(t, op)(*args)
    return t.commit()


step("kazoo_transaction_ok", lambda: txn([
    ("create", "/kz/a", b"x"), ("check", "/kz", 0),
    ("set_data", "/kz/a", b"y"), ("delete", "/kz/a")]))
step("kazoo_transaction_fail", lambda: txn([
    ("create", "/kz/b", b""), ("create", "/kz", b""), ("set_data", "/kz/b", b"z")]))
step("kazoo_close", lambda: (zk.stop(), zk.close()))
