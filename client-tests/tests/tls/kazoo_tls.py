"""kazoo over TLS: connects to argv[1] (host:port) with the CA argv[2] and,
unless they are "-", the client certificate argv[3] and key argv[4], then
runs argv[5]: "write" creates /tls-N under an x509 ACL for argv[6] and
reads it back; "read" reads argv[6]. Prints one line: "ok ..." or the
error's class name. Exit 0 either way; a connection that fails prints
"no-connection"."""
import sys

from kazoo.client import KazooClient
from kazoo.security import make_acl

hosts, ca, cert, key, action, arg = sys.argv[1:7]
tls = {"use_ssl": True, "ca": ca, "verify_certs": True}
if cert != "-":
    tls.update(certfile=cert, keyfile=key)
zk = KazooClient(hosts=hosts, connection_retry={"max_tries": 1}, **tls)
try:
    zk.start(timeout=5)
except Exception:
    print("no-connection")
    sys.exit(0)
try:
    if action == "write":
        path = zk.create("/tls-", b"secret", acl=[make_acl("x509", arg, all=True)], sequence=True)
        data, _ = zk.get(path)
        print("ok", path, data.decode())
    else:
        data, _ = zk.get(arg)
        print("ok", data.decode())
except Exception as e:
    print(type(e).__name__)
finally:
    zk.stop()
