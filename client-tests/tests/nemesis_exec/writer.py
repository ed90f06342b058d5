"""A stand-in for a user's test suite, run by `zkd-nemesis --exec`: kazoo
writes sequential nodes for SECONDS through whatever faults strike, then
checks that every write it was acknowledged is there. Exits 0 if so.
Usage: python3 writer.py SECONDS (the connect string is in ZK_CONNECT)."""
import os
import sys
import time

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

zk = KazooClient(
    hosts=os.environ["ZK_CONNECT"],
    timeout=10,
    connection_retry=KazooRetry(max_tries=-1, max_delay=1),
)
zk.start(timeout=30)
zk.ensure_path("/exec")
acked = []
end = time.time() + float(sys.argv[1])
while time.time() < end:
    try:
        acked.append(zk.create("/exec/w-", b"x", sequence=True).rsplit("/", 1)[1])
        if len(acked) % 100 == 0:
            print(f"writer: {len(acked)} acknowledged", flush=True)
    except Exception as e:
        print(f"writer: retrying after {type(e).__name__}", flush=True)
        time.sleep(0.2)

deadline = time.time() + 90
while True:
    try:
        zk.sync("/exec")
        present = set(zk.get_children("/exec"))
        break
    except Exception as e:
        if time.time() > deadline:
            raise
        time.sleep(0.5)
missing = [n for n in acked if n not in present]
print(f"writer: {len(acked)} acknowledged, {len(missing)} missing", flush=True)
zk.stop()
sys.exit(1 if missing or not acked else 0)
