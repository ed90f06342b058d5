// Curator's EnsembleTracker following a change of membership.
//
//   java -cp <curator, zookeeper and guava jars>:. EnsembleTrackerFollows CONNECT LEAVING
//
// CONNECT names one member only; the ensemble runs with reconfigEnabled and
// skipACL. The client writes, removes member LEAVING (the one it is
// connected to) through Curator's reconfig builder, and waits until its
// EnsembleTracker has rewritten the connection string from
// /zookeeper/config. It prints that string's members, then "kill", and
// waits for a line on stdin: the caller kills LEAVING. The client must then
// reach the others with the string it tracked, and write and read again.
// Every line it prints is compared with what it printed against ZooKeeper.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Arrays;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;

public class EnsembleTrackerFollows {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String leaving = args[1];
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .ensembleTracker(true)
                .sessionTimeoutMs(8_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new RetryNTimes(60, 500))
                .build();
        client.start();
        client.blockUntilConnected();
        client.create().forPath("/tracked-before", "b".getBytes());
        client.reconfig().leaving(leaving).forEnsemble();

        long deadline = System.currentTimeMillis() + 30_000;
        String tracked = client.getZookeeperClient().getCurrentConnectionString();
        while (tracked.equals(connect) || tracked.contains(connect)) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("the connection string stayed " + tracked);
            }
            Thread.sleep(100);
            tracked = client.getZookeeperClient().getCurrentConnectionString();
        }
        String[] members = tracked.split(",");
        Arrays.sort(members);
        System.out.println("tracked: " + String.join(",", members));
        System.out.println("kill");
        System.out.flush();

        new BufferedReader(new InputStreamReader(System.in)).readLine();
        client.create().forPath("/tracked-after", "a".getBytes());
        System.out.println("read before: " + new String(client.getData().forPath("/tracked-before")));
        System.out.println("read after: " + new String(client.getData().forPath("/tracked-after")));
        client.close();
        System.out.println("curator ensemble tracker: ok");
    }
}
