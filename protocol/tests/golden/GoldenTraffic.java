// Drives one stock-Java-client session through capture.py (see README.md).
// Each step first labels itself on the proxy's control port, then runs one
// synchronous call, so every frame in frames.tsv is named after its step.
//
//   javac -implicit:none -cp /usr/share/java/zookeeper.jar -d /tmp/golden GoldenTraffic.java
//   java -cp /tmp/golden:/usr/share/java/zookeeper.jar GoldenTraffic 127.0.0.1:21811 21812
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooDefs.Perms;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;

public class GoldenTraffic {
    interface Call { Object run() throws Exception; }

    static PrintWriter ctlOut;
    static BufferedReader ctlIn;
    static final LinkedBlockingQueue<Watcher.Event.KeeperState> states = new LinkedBlockingQueue<>();

    static void ctl(String line) throws Exception {
        ctlOut.println(line);
        ctlOut.flush();
        ctlIn.readLine();
    }

    static void comment(String text) throws Exception { ctl("comment " + text); }

    /** Label the next frames, run one call, print its result or error code. */
    static void step(String label, Call call) throws Exception {
        ctl("mark " + label);
        Object r;
        try {
            r = call.run();
        } catch (KeeperException e) {
            r = "KeeperException " + e.code();
        }
        System.out.println(label + " -> " + r);
        Thread.sleep(150); // let stray notifications land under this label
    }

    static void awaitState(Watcher.Event.KeeperState want) throws Exception {
        while (states.take() != want) { }
    }

    public static void main(String[] args) throws Exception {
        String hostPort = args[0];
        Socket cs = new Socket("127.0.0.1", Integer.parseInt(args[1]));
        ctlOut = new PrintWriter(cs.getOutputStream(), true, StandardCharsets.UTF_8);
        ctlIn = new BufferedReader(new InputStreamReader(cs.getInputStream(), StandardCharsets.UTF_8));

        List<ACL> open = Ids.OPEN_ACL_UNSAFE;
        byte[] hello = "hello".getBytes(StandardCharsets.UTF_8);
        Watcher watcher = (WatchedEvent e) -> {
            System.out.println("  event " + e);
            if (e.getType() == Watcher.Event.EventType.None) states.add(e.getState());
        };

        comment("java client session: new session, 4000 ms timeout");
        ctl("mark java_session");
        ZooKeeper zk = new ZooKeeper(hostPort, 4000, watcher);
        awaitState(Watcher.Event.KeeperState.SyncConnected);
        Stat st = new Stat();

        comment("creates");
        step("create_persistent", () -> zk.create("/golden", hello, open, CreateMode.PERSISTENT));
        step("create_persistent_null_data", () -> zk.create("/golden/null", null, open, CreateMode.PERSISTENT));
        step("create_persistent_empty_data", () -> zk.create("/golden/empty", new byte[0], open, CreateMode.PERSISTENT));
        step("create_ephemeral", () -> zk.create("/golden/eph", "e".getBytes(), open, CreateMode.EPHEMERAL));
        step("create_persistent_sequential", () -> zk.create("/golden/pseq-", "s".getBytes(), open, CreateMode.PERSISTENT_SEQUENTIAL));
        step("create_ephemeral_sequential_null_data", () -> zk.create("/golden/eseq-", null, open, CreateMode.EPHEMERAL_SEQUENTIAL));
        step("create2_persistent", () -> zk.create("/golden/c2", "c2".getBytes(), open, CreateMode.PERSISTENT, st) + " " + st);
        step("create_container", () -> zk.create("/golden/container", null, open, CreateMode.CONTAINER));
        step("create_ttl", () -> zk.create("/golden/ttl", "t".getBytes(), open, CreateMode.PERSISTENT_WITH_TTL, st, 600000) + " " + st);
        step("create_duplicate_nodeexists", () -> zk.create("/golden", null, open, CreateMode.PERSISTENT));
        step("create_no_parent_nonode", () -> zk.create("/nope/child", null, open, CreateMode.PERSISTENT));

        comment("reads and watches; set_data fires the exists+getData watch on /golden (one notification)");
        step("exists_watch_existing", () -> zk.exists("/golden", true));
        step("exists_missing", () -> zk.exists("/golden/missing", false));
        step("exists_watch_missing", () -> zk.exists("/golden/later", true));
        step("get_data_watch", () -> new String(zk.getData("/golden", true, st)) + " " + st);
        step("get_data_nonode", () -> zk.getData("/golden/missing", false, st));
        step("set_data", () -> zk.setData("/golden", "world".getBytes(), 0));
        step("set_data_bad_version", () -> zk.setData("/golden", "x".getBytes(), 99));
        step("get_children", () -> zk.getChildren("/golden", false));
        step("get_children2_watch", () -> zk.getChildren("/golden", true, st) + " " + st);
        step("create_fires_exists_and_child_watch", () -> zk.create("/golden/later", null, open, CreateMode.PERSISTENT));
        step("get_data_watch_later", () -> zk.getData("/golden/later", true, st));
        step("delete_fires_data_watch", () -> { zk.delete("/golden/later", -1); return "ok"; });
        step("sync", () -> { final LinkedBlockingQueue<Integer> q = new LinkedBlockingQueue<>();
            zk.sync("/golden", (rc, p, ctx) -> q.add(rc), null); return "rc " + q.take(); });

        comment("ACLs and auth");
        step("get_acl", () -> zk.getACL("/golden", st) + " " + st);
        List<ACL> acl = Arrays.asList(new ACL(Perms.READ, Ids.ANYONE_ID_UNSAFE),
            new ACL(Perms.ALL, new Id("digest", DigestAuthenticationProvider.generateDigest("golden:secret"))));
        step("set_acl", () -> zk.setACL("/golden/c2", acl, 0));
        step("get_acl_digest", () -> zk.getACL("/golden/c2", st) + " " + st);
        step("who_am_i", () -> zk.whoAmI());
        step("add_auth_digest", () -> { zk.addAuthInfo("digest", "golden:secret".getBytes()); Thread.sleep(300); return "sent"; });
        step("who_am_i_after_auth", () -> zk.whoAmI());

        comment("multi (14) and multiRead (22)");
        step("multi_ok", () -> zk.multi(Arrays.asList(
            Op.create("/golden/m1", "m".getBytes(), open, CreateMode.PERSISTENT),
            Op.setData("/golden/m1", "m2".getBytes(), 0),
            Op.check("/golden/m1", 1),
            Op.delete("/golden/m1", 1))));
        step("multi_fail", () -> zk.multi(Arrays.asList(
            Op.create("/golden/m2", null, open, CreateMode.PERSISTENT),
            Op.create("/golden", null, open, CreateMode.PERSISTENT),
            Op.setData("/golden/m2", "x".getBytes(), -1))));
        step("multi_container_ttl", () -> zk.multi(Arrays.asList(
            Op.create("/golden/mc", null, open, CreateMode.CONTAINER),
            Op.create("/golden/mt", "t".getBytes(), open, CreateMode.PERSISTENT_WITH_TTL, 600000))));
        step("multi_read", () -> zk.multi(Arrays.asList(
            Op.getData("/golden"), Op.getChildren("/golden"), Op.getData("/golden/missing"))));

        comment("persistent watches (106); the drop forces a reconnect: reattach handshake, re-sent auth, setWatches2 (105)");
        step("add_watch_persistent", () -> { zk.addWatch("/golden/pw", AddWatchMode.PERSISTENT); return "ok"; });
        step("add_watch_persistent_recursive", () -> { zk.addWatch("/golden/rw", AddWatchMode.PERSISTENT_RECURSIVE); return "ok"; });
        step("create_fires_persistent_watch", () -> zk.create("/golden/pw", null, open, CreateMode.PERSISTENT));
        step("create_child_fires_persistent_watch", () -> zk.create("/golden/pw/c", null, open, CreateMode.PERSISTENT));
        step("create_fires_recursive_watch", () -> zk.create("/golden/rw", null, open, CreateMode.PERSISTENT));
        step("create_child_fires_recursive_watch", () -> zk.create("/golden/rw/c", null, open, CreateMode.PERSISTENT));
        step("set_data_child_fires_recursive_watch", () -> zk.setData("/golden/rw/c", "r".getBytes(), -1));
        step("exists_watch_missing_2", () -> zk.exists("/golden/absent", true));
        step("get_data_watch_2", () -> new String(zk.getData("/golden/empty", true, st)));
        step("get_children_watch", () -> zk.getChildren("/golden/null", true));
        ctl("mark reconnect");
        ctl("drop");
        awaitState(Watcher.Event.KeeperState.Disconnected);
        awaitState(Watcher.Event.KeeperState.SyncConnected);
        Thread.sleep(300);

        comment("watch removal: removeWatches -> checkWatches (17), removeAllWatches -> removeWatches (18)");
        step("remove_watches_data", () -> { zk.removeWatches("/golden/empty", watcher, Watcher.WatcherType.Data, false); return "ok"; });
        step("remove_all_watches_children", () -> { zk.removeAllWatches("/golden/null", Watcher.WatcherType.Children, false); return "ok"; });
        step("remove_all_watches_any_persistent", () -> { zk.removeAllWatches("/golden/pw", Watcher.WatcherType.Any, false); return "ok"; });
        step("remove_all_watches_any_recursive", () -> { zk.removeAllWatches("/golden/rw", Watcher.WatcherType.Any, false); return "ok"; });
        step("remove_all_watches_nowatcher", () -> { zk.removeAllWatches("/golden/c2", Watcher.WatcherType.Any, false); return "ok"; });

        comment("misc reads");
        step("get_ephemerals", () -> zk.getEphemerals());
        step("get_ephemerals_prefix", () -> zk.getEphemerals("/golden/e"));
        step("get_all_children_number", () -> zk.getAllChildrenNumber("/golden"));

        comment("deletes");
        step("delete", () -> { zk.delete("/golden/null", -1); return "ok"; });
        step("delete_bad_version", () -> { zk.delete("/golden/c2", 5); return "ok"; });
        step("delete_nonode", () -> { zk.delete("/golden/nope", -1); return "ok"; });
        step("delete_not_empty", () -> { zk.delete("/golden", -1); return "ok"; });

        comment("idle for 6 s: client pings (xid -2, opcode 11) every ~1.3 s");
        ctl("mark idle");
        Thread.sleep(6000);

        comment("closeSession (-11)");
        step("close", () -> { zk.close(); return "closed"; });
        cs.close();
    }
}
