// The Java client's half of bench/txn_bench.py: idempotent or transactional produce.
//
// Usage: java TxnBench <bootstrap> <topic> <idempotent|transactional> <records> <per-txn> <warm-up topic>
//
// One producer (acks=all, idempotence, linger.ms=5, batch.size=1 MiB, 100-byte values, partition 0;
// transactional.id only in transactional mode) first sends 100 units of <per-txn> records to the
// warm-up topic, untimed (the JIT, the producer id, the connections), then <records> to <topic>:
// in transactional mode <per-txn> records per transaction (begin, send, commitTransaction), in
// idempotent mode the same sends with no transaction. Timed from the first send to the last
// acknowledgement (flush). Prints one line: records=<n> seconds=<s>.
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnBench {
    static final int WARM_UP_UNITS = 100;

    static void send(KafkaProducer<byte[], byte[]> producer, String topic, long records, int perTxn, boolean txn) {
        byte[] value = new byte[100];
        for (long sent = 0; sent < records; ) {
            long count = Math.min(perTxn, records - sent);
            if (txn) producer.beginTransaction();
            for (long i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, 0, null, value));
            if (txn) producer.commitTransaction();
            sent += count;
        }
        producer.flush();
    }

    public static void main(String[] args) {
        if (args.length != 6) {
            System.err.println("usage: java TxnBench <bootstrap> <topic> <idempotent|transactional> <records> <per-txn> <warm-up topic>");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], mode = args[2], warmTopic = args[5];
        long records = Long.parseLong(args[3]);
        int perTxn = Integer.parseInt(args[4]);
        boolean txn = mode.equals("transactional");
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("batch.size", "1048576");
        p.put("buffer.memory", "268435456");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        if (txn) p.put("transactional.id", "txn-bench-" + topic);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            if (txn) producer.initTransactions();
            send(producer, warmTopic, (long) WARM_UP_UNITS * perTxn, perTxn, txn);
            long start = System.nanoTime();
            send(producer, topic, records, perTxn, txn);
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("records=%d seconds=%.6f%n", records, seconds);
        }
    }
}
