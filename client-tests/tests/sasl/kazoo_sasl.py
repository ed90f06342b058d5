"""kazoo with SASL DIGEST-MD5: connects to argv[1] (host:port) as user
argv[2] with password argv[3] (argv[2] "-": no SASL), then runs argv[4]:
"write" creates argv[5] under an ACL for sasl:argv[6] and reads it back,
"read" reads argv[5], "acl" prints argv[5]'s ACL. Prints one line: "ok ..."
or the error's class name; a session that never starts prints
"no-connection" and the state kazoo last saw. Exit 0 either way."""
import sys

from kazoo.client import KazooClient
from kazoo.security import make_acl

hosts, user, password, action, path, acl_user = (sys.argv[1:7] + ["-"])[:6]
options = {}
if user != "-":
    options["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
states = []
zk = KazooClient(hosts=hosts, connection_retry={"max_tries": 1}, timeout=6, **options)
zk.add_listener(lambda state: states.append(str(state)))
try:
    # Generous: a wrong password's failed login and kazoo's one retry take
    # a few seconds on a loaded machine (a CI run timed out at 5 s on zkd).
    zk.start(timeout=15)
except Exception as e:
    print("no-connection", type(e).__name__)
    zk.stop()
    sys.exit(0)
try:
    if action == "write":
        zk.create(path, b"secret", acl=[make_acl("sasl", acl_user, all=True)])
        data, _ = zk.get(path)
        print("ok", data.decode())
    elif action == "read":
        data, _ = zk.get(path)
        print("ok", data.decode())
    else:
        acls, _ = zk.get_acls(path)
        print("ok", " ".join(f"{a.id.scheme}:{a.id.id}:{a.perms}" for a in acls))
except Exception as e:
    print(type(e).__name__)
finally:
    zk.stop()
