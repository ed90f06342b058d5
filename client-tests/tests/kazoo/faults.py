"""kazoo (stock Python client) under `zkd ensemble`'s faults, driven through
its HTTP fault API: a lock holder whose member (the leader) is isolated keeps
its session and its lock, moving to another member; when its session is
expired, its lock goes to the waiting contender. Exits non-zero on the first
failed check. Usage: python3 faults.py HOST:PORT,... API_HOST:PORT
(the first host is the leader's: the holder connects there first)."""
import json
import sys
import threading
import time
import urllib.error
import urllib.request

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from kazoo.recipe.lock import Lock

HOSTS, API = sys.argv[1], sys.argv[2]


def fault(verb, *args):
    body = json.dumps({"verb": verb, "args": list(args)}).encode()
    request = urllib.request.Request(
        f"http://{API}/faults",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=90) as answer:
            reply = json.load(answer)
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{verb} {args} refused: {e.read().decode()}")
    assert reply["ok"], reply
    print(f"fault: {reply['done']}", flush=True)
    return reply


def wait_for(pred, what, seconds):
    deadline = time.time() + seconds
    while not pred():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


holder = KazooClient(hosts=HOSTS, timeout=10, randomize_hosts=False)
states = []
holder.add_listener(states.append)
holder.start(timeout=15)
session = holder.client_id[0]
lock = Lock(holder, "/app/lock", "holder")
assert lock.acquire(timeout=10)

contender = KazooClient(hosts=HOSTS, timeout=10)
contender.start(timeout=15)
won = threading.Event()


def contend():
    if Lock(contender, "/app/lock", "contender").acquire(timeout=60):
        won.set()


threading.Thread(target=contend, daemon=True).start()
time.sleep(0.5)
assert not won.is_set(), "the contender took a held lock"

# The holder's member (the leader) is cut off from its peers: it stops
# serving, and the holder reconnects elsewhere with the same session.
fault("isolate", "leader")
wait_for(lambda: KazooState.SUSPENDED in states, "the holder noticed the isolation", 15)
wait_for(lambda: states[-1] == KazooState.CONNECTED, "the holder reconnected", 20)
assert KazooState.LOST not in states, states
assert holder.client_id[0] == session
assert lock.is_acquired and holder.exists(f"/app/lock/{lock.node}"), "the holder lost its lock"
assert not won.is_set(), "the contender took the lock while the holder lived"
fault("heal")

# The holder's session expires: its lock node goes, the contender gets it.
fault("expire-session", f"0x{session:x}")
wait_for(lambda: KazooState.LOST in states, "the holder learned its session expired", 15)
wait_for(won.is_set, "the contender took the lock", 15)
contender.stop()
holder.stop()
print("kazoo fault checks passed")
