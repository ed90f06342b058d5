"""kazoo's reconfig() on an ensemble with skipACL=yes and no super user.

Usage: reconfig.py HOSTS LEAVING_ID JOINING_LINE. Removes member LEAVING_ID,
is refused a change from a stale version and a change that changes nothing,
then adds the member back from the version it read. Prints each answer's
server lines, one per line under the step's name; the caller names ports
and ids by role and compares the lines with what it printed against
ZooKeeper.
"""

import sys

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException


def servers(data):
    return [l for l in data.decode().splitlines() if l.startswith("server.")]


def show(step, call):
    try:
        data, stat = call()
    except KazooException as e:
        print(step + ":", type(e).__name__)
        return
    for line in servers(data):
        print(step + ":", line)
    print(step + ": dataVersion", stat.version)


def version(client):
    data, _ = client.get("/zookeeper/config")
    for line in data.decode().splitlines():
        if line.startswith("version="):
            return int(line[len("version="):], 16)
    raise SystemExit("no version= line")


def main():
    hosts, leaving, joining = sys.argv[1:4]
    client = KazooClient(hosts=hosts, timeout=6)
    client.start(timeout=30)
    show("remove", lambda: client.reconfig(None, leaving, None))
    show("stale", lambda: client.reconfig(joining, None, None, from_config=1))
    show("nothing", lambda: client.reconfig(None, "99", None))
    current = version(client)
    show("add", lambda: client.reconfig(joining, None, None, from_config=current))
    client.stop()
    print("kazoo reconfig: ok", flush=True)


main()
