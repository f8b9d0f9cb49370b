// The Java admin client (kafka-clients 4.3.0) against a logstore broker with several log.dirs:
// describeLogDirs, alterReplicaLogDirs, describeReplicaLogDirs.
// Usage: java LogDirsCheck <bootstrap> <topic> <partition> <target dir> <missing dir>;
// prints one line of key=value results.
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;

public class LogDirsCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], target = args[3], missing = args[4];
        int partition = Integer.parseInt(args[2]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            int broker = admin.describeCluster().nodes().get().iterator().next().id();
            TopicPartition tp = new TopicPartition(topic, partition);
            TopicPartitionReplica replica = new TopicPartitionReplica(topic, partition, broker);
            Map<String, LogDirDescription> dirs =
                admin.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker);
            String before = "";
            for (Map.Entry<String, LogDirDescription> e : dirs.entrySet()) {
                if (e.getValue().replicaInfos().containsKey(tp)) before = e.getKey();
            }
            String missingError = "none";
            try {
                admin.alterReplicaLogDirs(Map.of(replica, missing)).all().get();
            } catch (ExecutionException e) {
                missingError = e.getCause().getClass().getSimpleName();
            }
            admin.alterReplicaLogDirs(Map.of(replica, target)).all().get();
            String current = "";
            boolean sawFuture = false;
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                DescribeReplicaLogDirsResult.ReplicaLogDirInfo info =
                    admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
                current = info.getCurrentReplicaLogDir();
                if (info.getFutureReplicaLogDir() != null) sawFuture = true;
                if (target.equals(current) && info.getFutureReplicaLogDir() == null) break;
                Thread.sleep(100);
            }
            long total = dirs.values().iterator().next().totalBytes().orElse(-1L);
            System.out.println("dirs=" + dirs.size() + " before=" + before + " current=" + current
                + " sawFuture=" + sawFuture + " missing=" + missingError + " total=" + total);
        }
    }
}
