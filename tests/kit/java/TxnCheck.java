// The Java client (kafka-clients 4.3.0) against a logstore broker: transactions.
// Usage: java TxnCheck <bootstrap> <scenario>; prints one line of key=value results.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.*;

public class TxnCheck {
    static Properties producerProps(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String isolation) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("isolation.level", isolation);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(c);
    }

    /** Values of every partition of the topic from the start, read until `expected` and a quiet second. */
    static List<String> readAll(String bootstrap, String topic, String isolation, int expected) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, "unused-" + UUID.randomUUID(), isolation)) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(topic).forEach(info -> tps.add(new TopicPartition(topic, info.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) values.add(r.value());
                if (values.size() >= expected && quietUntil == Long.MAX_VALUE) quietUntil = System.currentTimeMillis() + 1000;
            }
        }
        Collections.sort(values);
        return values;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String scenario = args[1];
        if (scenario.equals("commit-abort")) {
            try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, "java-txn"))) {
                p.initTransactions();
                p.beginTransaction();
                for (int i = 0; i < 100; i++) p.send(new ProducerRecord<>("jtx", i % 2, null, "c" + i));
                p.commitTransaction();
                p.beginTransaction();
                for (int i = 0; i < 50; i++) p.send(new ProducerRecord<>("jtx", i % 2, null, "a" + i));
                p.flush();
                p.abortTransaction();
            }
            System.out.println("committed=" + readAll(bootstrap, "jtx", "read_committed", 100).size()
                + " uncommitted=" + readAll(bootstrap, "jtx", "read_uncommitted", 150).size());
        } else if (scenario.equals("fence")) {
            KafkaProducer<String, String> zombie = new KafkaProducer<>(producerProps(bootstrap, "java-fence"));
            zombie.initTransactions();
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>("jtx", 0, null, "zombie")).get();
            try (KafkaProducer<String, String> next = new KafkaProducer<>(producerProps(bootstrap, "java-fence"))) {
                next.initTransactions();
                // As with Kafka: the produce fails INVALID_PRODUCER_EPOCH (abortable, KIP-588), and the
                // abort that must follow is refused PRODUCER_FENCED by the coordinator.
                String fenced = "no";
                try {
                    zombie.send(new ProducerRecord<>("jtx", 0, null, "late"));
                    zombie.commitTransaction();
                } catch (ProducerFencedException e) {
                    fenced = "yes";
                } catch (org.apache.kafka.common.errors.InvalidProducerEpochException e) {
                    try {
                        zombie.abortTransaction();
                        fenced = "abort-allowed";
                    } catch (ProducerFencedException e2) {
                        fenced = "yes";
                    }
                } catch (Exception e) {
                    fenced = e.getClass().getSimpleName();
                }
                System.out.println("fenced=" + fenced);
            }
            zombie.close(Duration.ofSeconds(1));
        } else if (scenario.equals("kip848")) {
            // KIP-848: the Java consumer with group.protocol=consumer (ConsumerGroupHeartbeat).
            try (KafkaProducer<String, String> seed = new KafkaProducer<>(producerProps(bootstrap, "java-848-seed"))) {
                seed.initTransactions();
                seed.beginTransaction();
                for (int i = 0; i < 100; i++) seed.send(new ProducerRecord<>("j848", i % 2, null, "" + i));
                seed.commitTransaction();
            }
            int first = 0, second = 0;
            for (int round = 0; round < 2; round++) {
                Properties c = new Properties();
                c.put("bootstrap.servers", bootstrap);
                c.put("group.id", "java-848");
                c.put("group.protocol", "consumer");
                c.put("auto.offset.reset", "earliest");
                c.put("enable.auto.commit", "false");
                c.put("key.deserializer", StringDeserializer.class.getName());
                c.put("value.deserializer", StringDeserializer.class.getName());
                int seen = 0;
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                    consumer.subscribe(List.of("j848"));
                    long deadline = System.currentTimeMillis() + (round == 0 ? 30_000 : 5_000);
                    while (System.currentTimeMillis() < deadline && (round == 1 || seen < 100)) {
                        seen += consumer.poll(Duration.ofMillis(200)).count();
                    }
                    consumer.commitSync();
                }
                if (round == 0) first = seen; else second = seen;
            }
            System.out.println("first=" + first + " second=" + second);
        } else if (scenario.equals("eos")) {
            try (KafkaProducer<String, String> seed = new KafkaProducer<>(producerProps(bootstrap, "java-seed"))) {
                seed.initTransactions();
                seed.beginTransaction();
                for (int i = 0; i < 200; i++) seed.send(new ProducerRecord<>("jin", i % 2, null, "" + i));
                seed.commitTransaction();
            }
            int processed = 0;
            try (KafkaConsumer<String, String> c = consumer(bootstrap, "java-eos", "read_committed");
                 KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, "java-eos"))) {
                p.initTransactions();
                c.subscribe(List.of("jin"));
                long deadline = System.currentTimeMillis() + 60_000;
                while (processed < 200 && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(500));
                    if (records.isEmpty()) continue;
                    p.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        p.send(new ProducerRecord<>("jout", r.partition(), null, "x" + r.value()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                    p.commitTransaction();
                    processed += records.count();
                }
            }
            long committedOffsets = 0;
            try (KafkaConsumer<String, String> c = consumer(bootstrap, "java-eos", "read_committed")) {
                Map<TopicPartition, OffsetAndMetadata> got = c.committed(Set.of(new TopicPartition("jin", 0), new TopicPartition("jin", 1)));
                for (OffsetAndMetadata o : got.values()) if (o != null) committedOffsets += o.offset();
            }
            List<String> out = readAll(bootstrap, "jout", "read_committed", 200);
            System.out.println("processed=" + processed + " out=" + out.size() + " distinct=" + new HashSet<>(out).size()
                + " committed=" + committedOffsets);
        }
    }
}
