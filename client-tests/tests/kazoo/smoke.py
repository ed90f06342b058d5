"""kazoo (stock Python client) against zkd: CRUD, transactions, watches and
the lock, queue, barrier and election recipes. Exits non-zero on the first
failed check. Usage: python3 smoke.py HOST:PORT"""
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, BadVersionError, RolledBackError
from kazoo.recipe.barrier import Barrier
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock
from kazoo.recipe.queue import LockingQueue

HOSTS = sys.argv[1]


def client():
    zk = KazooClient(hosts=HOSTS, timeout=10)
    zk.start(timeout=15)
    return zk


def wait_for(pred, what, seconds=5):
    deadline = time.time() + seconds
    while not pred():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


zk = client()
other = client()

# CRUD, versions, sequence and ephemeral nodes.
zk.ensure_path("/k/a/b")
assert zk.exists("/k/a/b") is not None
zk.create("/k/data", b"v1")
data, stat = zk.get("/k/data")
assert (data, stat.version) == (b"v1", 0), (data, stat)
zk.set("/k/data", b"v2", version=0)
try:
    zk.set("/k/data", b"v3", version=0)
    raise AssertionError("stale version accepted")
except BadVersionError:
    pass
try:
    zk.create("/k/data", b"")
    raise AssertionError("duplicate create accepted")
except NodeExistsError:
    pass
seq = zk.create("/k/s-", b"", sequence=True)
assert seq.startswith("/k/s-") and len(seq) == len("/k/s-") + 10, seq
eph = zk.create("/k/eph", b"", ephemeral=True)
assert zk.exists(eph).ephemeralOwner == zk.client_id[0]

# Transactions: all or nothing.
t = zk.transaction()
t.create("/k/t1", b"1")
t.set_data("/k/data", b"v3")
t.check("/k/data", 2)
results = t.commit()
assert results[0] == "/k/t1" and results[2] is True, results
t = zk.transaction()
t.create("/k/t2")
t.create("/k/t1")
results = t.commit()
assert isinstance(results[0], RolledBackError) and isinstance(results[1], NodeExistsError), results
assert zk.exists("/k/t2") is None

# Watches from another client.
seen = []
other.DataWatch("/k/data", lambda data, stat: seen.append(data))
zk.set("/k/data", b"v4")
wait_for(lambda: b"v4" in seen, "DataWatch")
kids = []
other.ChildrenWatch("/k", lambda children: kids.append(sorted(children)))
zk.create("/k/new")
wait_for(lambda: kids and "new" in kids[-1], "ChildrenWatch")
zk.delete("/k/new")
wait_for(lambda: "new" not in kids[-1], "ChildrenWatch after delete")

# Lock: the second contender gets it only after the first releases.
first, second = Lock(zk, "/k/lock", "first"), Lock(other, "/k/lock", "second")
first.acquire(timeout=5)
got = []
waiter = threading.Thread(target=lambda: got.append(second.acquire(timeout=10)))
waiter.start()
time.sleep(0.3)
assert not got, "lock granted twice"
assert sorted(first.contenders()) == ["first", "second"], first.contenders()
first.release()
waiter.join(10)
assert got == [True], got
second.release()

# Queue (locking) and barrier.
q = LockingQueue(zk, "/k/queue")
q.put(b"a")
q.put(b"b")
assert q.get(timeout=5) == b"a"
q.consume()
b = Barrier(other, "/k/barrier")
b.create()
assert b.wait(0.2) is False
zk.delete("/k/barrier")
assert b.wait(5) is True

# Election: the first candidate leads; the second takes over when it leaves.
leaders = []
def run(who, client_, hold):
    Election(client_, "/k/election", who).run(lambda: (leaders.append(who), hold.wait(10)))
hold_a, hold_b = threading.Event(), threading.Event()
ta = threading.Thread(target=run, args=("a", zk, hold_a))
ta.start()
wait_for(lambda: leaders == ["a"], "first leader")
tb = threading.Thread(target=run, args=("b", other, hold_b))
tb.start()
time.sleep(0.3)
assert leaders == ["a"], leaders
hold_a.set()
wait_for(lambda: leaders == ["a", "b"], "second leader")
hold_b.set()
ta.join(5)
tb.join(5)

# Closing a session removes its ephemerals.
zk.stop()
zk.close()
wait_for(lambda: other.exists("/k/eph") is None, "ephemeral removal")
try:
    other.get("/k/eph")
    raise AssertionError("ephemeral survived its session")
except NoNodeError:
    pass
major, minor, _ = other.server_version()
assert (major, minor) >= (3, 9), other.server_version()
other.stop()
other.close()
print("kazoo smoke: ok")
