// The Java client's KafkaShareConsumer (kafka-clients 4.3.0, KIP-932) against a logstore broker.
// Usage: java ShareCheck <bootstrap> <scenario> [group]; prints one line of key=value results.
// The share group's partition is initialized by the caller before records are produced.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class ShareCheck {
    static final String TOPIC = "jshare";

    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, boolean explicit) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("max.poll.records", "10");
        c.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(c);
        consumer.subscribe(List.of(TOPIC));
        return consumer;
    }

    static void produce(String bootstrap, List<String> values) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (String v : values) producer.send(new ProducerRecord<>(TOPIC, 0, null, v)).get();
        }
    }

    static int count(ConsumerRecord<String, String> r) {
        return r.deliveryCount().map(Short::intValue).orElse(-1);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String scenario = args[1];
        String group = args.length > 2 ? args[2] : "jgroup";
        long deadline = System.currentTimeMillis() + 60_000;
        if (scenario.equals("compete")) {
            List<String> values = new ArrayList<>();
            for (int i = 0; i < 200; i++) values.add("v" + i);
            produce(bootstrap, values);
            ConcurrentHashMap<Long, Integer> seen = new ConcurrentHashMap<>();
            int[] got = new int[2];
            int[] twice = new int[1];
            ExecutorService pool = Executors.newFixedThreadPool(2);
            List<Future<?>> done = new ArrayList<>();
            for (int w = 0; w < 2; w++) {
                final int who = w;
                done.add(pool.submit(() -> {
                    try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, false)) {
                        while (seen.size() < 200 && System.currentTimeMillis() < deadline) {
                            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                                if (seen.putIfAbsent(r.offset(), who) != null) synchronized (twice) { twice[0]++; }
                                synchronized (got) { got[who]++; }
                            }
                        }
                        c.commitSync();  // implicit mode accepts on poll or commit; close alone releases
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) f.get();
            pool.shutdown();
            System.out.println("distinct=" + seen.size() + " twice=" + twice[0] + " a=" + got[0] + " b=" + got[1]);
        } else if (scenario.equals("explicit")) {
            produce(bootstrap, List.of("0", "1", "2", "3", "4", "5"));
            List<String> deliveries = new ArrayList<>();
            int failed = 0;
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true)) {
                long quiet = Long.MAX_VALUE;
                while (System.currentTimeMillis() < Math.min(deadline, quiet)) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        deliveries.add(r.value() + ":" + count(r));
                        AcknowledgeType kind = AcknowledgeType.ACCEPT;
                        if (count(r) == 1 && r.value().equals("3")) kind = AcknowledgeType.RELEASE;
                        if (r.value().equals("4")) kind = AcknowledgeType.REJECT;
                        c.acknowledge(r, kind);
                    }
                    for (Optional<org.apache.kafka.common.KafkaException> e : c.commitSync().values()) if (e.isPresent()) failed++;
                    if (deliveries.size() >= 7 && quiet == Long.MAX_VALUE) quiet = System.currentTimeMillis() + 3_000;
                }
            }
            Collections.sort(deliveries);
            System.out.println("deliveries=" + String.join(",", deliveries) + " failed=" + failed);
        } else if (scenario.equals("hold")) {  // acquire, print, die without closing
            produce(bootstrap, List.of("h0", "h1", "h2"));
            KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true);
            List<String> held = new ArrayList<>();
            while (held.isEmpty() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) held.add(String.valueOf(r.offset()));
            }
            System.out.println("held=" + String.join(",", held));
            System.out.flush();
            Runtime.getRuntime().halt(0);  // no close: the locks must run out
        } else if (scenario.equals("drain")) {  // every record of the topic still to do: offset:count
            int want = Integer.parseInt(args[3]);
            TreeMap<Long, Integer> got = new TreeMap<>();
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true)) {
                while (got.size() < want && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        got.put(r.offset(), count(r));
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    c.commitSync();
                }
            }
            StringBuilder out = new StringBuilder();
            got.forEach((o, n) -> out.append(out.length() == 0 ? "" : ",").append(o).append(':').append(n));
            System.out.println("got=" + out);
        } else if (scenario.equals("poison")) {  // release "poison" every time: the limit archives it
            produce(bootstrap, List.of("ok0", "poison", "ok1"));
            List<String> deliveries = new ArrayList<>();
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true)) {
                long quiet = Long.MAX_VALUE;
                while (System.currentTimeMillis() < Math.min(deadline, quiet)) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        deliveries.add(r.value() + ":" + count(r));
                        c.acknowledge(r, r.value().equals("poison") ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    }
                    c.commitSync();
                    if (deliveries.contains("poison:3") && quiet == Long.MAX_VALUE) quiet = System.currentTimeMillis() + 3_000;
                }
            }
            Collections.sort(deliveries);
            System.out.println("deliveries=" + String.join(",", deliveries));
        } else {
            throw new IllegalArgumentException(scenario);
        }
    }
}
