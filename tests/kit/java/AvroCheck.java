// Confluent's Java Avro serializers (kafka-avro-serializer and kafka-schema-registry-client 7.0.16
// over kafka-clients 4.3.0) against a logstore broker and its schema registry.
// Usage: java AvroCheck produce <bootstrap> <registry url> <topic> <count>
//          KafkaAvroSerializer writes <count> User records {name: "java-<i>", age: <i>}
//          (auto-registering the schema under <topic>-value); prints "sent=<count>"
//        java AvroCheck consume <bootstrap> <registry url> <topic> <count>
//          KafkaAvroDeserializer reads the first <count> records of partition 0; prints one
//          line per record: "<name> <age> <schema full name>"
import java.time.Duration;
import java.util.*;
import io.confluent.kafka.serializers.KafkaAvroDeserializer;
import io.confluent.kafka.serializers.KafkaAvroSerializer;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class AvroCheck {
    static final String USER = "{\"type\":\"record\",\"name\":\"User\",\"namespace\":\"shop\",\"fields\":["
        + "{\"name\":\"name\",\"type\":\"string\"},{\"name\":\"age\",\"type\":\"int\"}]}";

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], registry = args[2], topic = args[3];
        int count = Integer.parseInt(args[4]);
        if (mode.equals("produce")) {
            produce(bootstrap, registry, topic, count);
        } else {
            consume(bootstrap, registry, topic, count);
        }
    }

    static void produce(String bootstrap, String registry, String topic, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", KafkaAvroSerializer.class.getName());
        p.put("schema.registry.url", registry);
        p.put("acks", "all");
        Schema schema = new Schema.Parser().parse(USER);
        try (KafkaProducer<String, Object> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                GenericRecord user = new GenericData.Record(schema);
                user.put("name", "java-" + i);
                user.put("age", i);
                producer.send(new ProducerRecord<>(topic, "k" + i, user)).get();
            }
        }
        System.out.println("sent=" + count);
    }

    static void consume(String bootstrap, String registry, String topic, int count) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", KafkaAvroDeserializer.class.getName());
        p.put("schema.registry.url", registry);
        p.put("enable.auto.commit", "false");
        p.put("group.id", "avro-check");
        TopicPartition tp = new TopicPartition(topic, 0);
        int seen = 0;
        try (KafkaConsumer<String, Object> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, Object> r : consumer.poll(Duration.ofMillis(500))) {
                    GenericRecord user = (GenericRecord) r.value();
                    System.out.println(user.get("name") + " " + user.get("age") + " " + user.getSchema().getFullName());
                    seen++;
                    if (seen == count) break;
                }
            }
        }
        if (seen < count) {
            System.err.println("read " + seen + " of " + count);
            System.exit(1);
        }
    }
}
