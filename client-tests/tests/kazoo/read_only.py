"""kazoo with read_only=True: a member that lost its quorum, then the quorum back.

Usage: read_only.py HOSTS. The caller has left one member of three running.
Phase 1 prints what a read-only session sees there, then `phase 1 done`,
and waits for a line on stdin: the caller brings the quorum back. Phase 2
waits for a read-write connection, writes, and prints what it read back.
Every line it prints is compared with what it printed against ZooKeeper.
"""

import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry


def refused(call):
    try:
        call()
        return "allowed"
    except NotReadOnlyCallError:
        return "NotReadOnlyCallError"


def main():
    client = KazooClient(
        hosts=sys.argv[1],
        read_only=True,
        timeout=6,
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=1),
    )
    client.start(timeout=30)
    print("state:", client.client_state)
    print("read:", client.get("/ro")[0].decode())
    print("children:", sorted(client.get_children("/")))
    print("exists /nothing:", client.exists("/nothing"))
    print("create:", refused(lambda: client.create("/x", b"")))
    print("set:", refused(lambda: client.set("/ro", b"y")))
    print("delete:", refused(lambda: client.delete("/ro")))
    print("phase 1 done", flush=True)

    sys.stdin.readline()
    deadline = time.time() + 90
    while client.client_state != KeeperState.CONNECTED and time.time() < deadline:
        time.sleep(0.1)
    print("state:", client.client_state)
    retry = KazooRetry(max_tries=-1, delay=0.2, max_delay=1, deadline=30)
    retry(client.ensure_path, "/x")
    retry(client.set, "/x", b"after")
    print("read after:", retry(client.get, "/x")[0].decode())
    client.stop()
    print("kazoo read-only: ok", flush=True)


main()
