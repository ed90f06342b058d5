// A Curator LeaderLatch application under zkd ensemble's faults, driving
// them through the ensemble's HTTP fault API (a runnable example of testing
// an application against faults; see the README).
//
//   java -cp <curator, zookeeper and guava jars>:. LeaderLatchUnderFaults CONNECT API
//
// CONNECT is the ensemble's connect string, API the fault API's host:port.
// Two instances of the application run a LeaderLatch. A talks to one
// follower member only (an application pinned to its local ZooKeeper); B to
// every member. When A's member is isolated from its peers, A is cut off
// with it: its session expires on the majority side, its latch node goes,
// and B takes over. When B's session is expired on request, leadership
// moves back to A. Exits non-zero on the first failed check.
//
// (A on every member would keep leadership: its session moves to another
// member within its timeout, and Curator 5 keeps a latch whose node
// survived a reconnection.)

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Arrays;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class LeaderLatchUnderFaults {
    static String api;
    static List<String> members;

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        api = args[1];
        members = Arrays.asList(connect.split(","));

        int leader = ensembleLeader();
        int pinned = leader == 1 ? 2 : 1;
        CuratorFramework a = client(members.get(pinned - 1));
        LeaderLatch latchA = new LeaderLatch(a, "/app/leader", "A");
        latchA.start();
        waitFor(latchA::hasLeadership, "A leads", 15_000);

        // B on another member than A's, so that isolating A's member spares B.
        CuratorFramework b = null;
        for (int i = 0; i < 30 && b == null; i++) {
            CuratorFramework candidate = client(connect);
            if (member(candidate) != member(a)) {
                b = candidate;
            } else {
                candidate.close();
            }
        }
        if (b == null) throw new AssertionError("no session landed away from A's member");
        LeaderLatch latchB = new LeaderLatch(b, "/app/leader", "B");
        latchB.start();
        Thread.sleep(1000);
        check(latchA.hasLeadership() && !latchB.hasLeadership(), "A still leads alone");

        // Isolate A's member: A's session expires, B takes over.
        long started = System.nanoTime();
        fault("isolate", String.valueOf(pinned));
        waitFor(() -> latchB.hasLeadership() && !latchA.hasLeadership(), "leadership moved to B", 40_000);
        System.out.printf("leadership moved to B %.1f s after A's member was isolated%n",
            (System.nanoTime() - started) / 1e9);
        fault("heal");
        // A comes back: its expired session is replaced and its latch rejoins.
        waitFor(() -> participants(latchB).contains("A"), "A rejoined the latch", 30_000);

        // Expire B's session: B's latch node goes, and A (back, with a new
        // session, its latch rejoined) leads again.
        long session = b.getZookeeperClient().getZooKeeper().getSessionId();
        started = System.nanoTime();
        fault("expire-session", String.format("0x%x", session));
        waitFor(() -> latchA.hasLeadership() && !latchB.hasLeadership(), "leadership moved back to A", 30_000);
        System.out.printf("leadership moved back to A %.1f s after B's session was expired%n",
            (System.nanoTime() - started) / 1e9);

        latchA.close();
        latchB.close();
        a.close();
        b.close();
        System.out.println("curator fault checks passed");
    }

    /** The ids of the latch's participants (empty while they cannot be read). */
    static String participants(LeaderLatch latch) {
        try {
            StringBuilder ids = new StringBuilder();
            latch.getParticipants().forEach(p -> ids.append(p.getId()).append(' '));
            return ids.toString();
        } catch (Exception e) {
            return "";
        }
    }

    static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(
            connect, 10_000, 5_000, new ExponentialBackoffRetry(100, 10));
        c.start();
        if (!c.blockUntilConnected(15, java.util.concurrent.TimeUnit.SECONDS)) {
            throw new AssertionError("no connection to " + connect);
        }
        return c;
    }

    /** The member (1-based) the client is connected to, from its remote address. */
    static int member(CuratorFramework c) throws Exception {
        String desc = c.getZookeeperClient().getZooKeeper().toString();
        int at = desc.indexOf("remoteserver:");
        String remote = desc.substring(at + "remoteserver:".length()).split(" ")[0];
        String port = remote.substring(remote.lastIndexOf(':') + 1);
        for (int i = 0; i < members.size(); i++) {
            if (members.get(i).endsWith(":" + port)) return i + 1;
        }
        throw new AssertionError("not connected to a member: " + desc);
    }

    /** The member that leads the ensemble, from GET /status. */
    static int ensembleLeader() throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://" + api + "/status")).build();
        String body = HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString()).body();
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"leader\":\\s*(\\d+)").matcher(body);
        if (!m.find()) throw new AssertionError("no leader in " + body);
        return Integer.parseInt(m.group(1));
    }

    /** POSTs a fault to the ensemble's fault API; fails unless it was applied. */
    static void fault(String verb, String... args) throws Exception {
        StringBuilder body = new StringBuilder("{\"verb\": \"" + verb + "\", \"args\": [");
        for (int i = 0; i < args.length; i++) {
            body.append(i == 0 ? "" : ", ").append('"').append(args[i]).append('"');
        }
        body.append("]}");
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://" + api + "/faults"))
            .POST(HttpRequest.BodyPublishers.ofString(body.toString()))
            .header("content-type", "application/json")
            .build();
        HttpResponse<String> answer =
            HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString());
        if (answer.statusCode() != 200) {
            throw new AssertionError(verb + " refused: " + answer.body());
        }
        System.out.println("fault applied: " + verb + " " + String.join(" ", args));
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void waitFor(BooleanSupplier condition, String what, long ms) throws InterruptedException {
        long deadline = System.currentTimeMillis() + ms;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) throw new AssertionError("timed out: " + what);
            Thread.sleep(50);
        }
    }
}
