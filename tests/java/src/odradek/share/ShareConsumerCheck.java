package odradek.share;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka 4.3's KafkaShareConsumer in explicit acknowledgement mode against a broker: args bootstrap, topic, group,
 * count. It writes probes until its consumer gets one (a new share-partition starts at the log end), then count
 * records r0.. plus "release-me" and "reject-me"; it accepts every r record, releases release-me at its first
 * delivery and rejects reject-me, and prints each value with the delivery counts it came with, one per line, sorted,
 * once every r record is accepted and release-me came back.
 */
public final class ShareConsumerCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        Properties consumerProps = new Properties();
        consumerProps.put("bootstrap.servers", bootstrap);
        consumerProps.put("group.id", group);
        consumerProps.put("share.acknowledgement.mode", "explicit");
        Properties producerProps = new Properties();
        producerProps.put("bootstrap.servers", bootstrap);
        Map<String, List<Short>> seen = new TreeMap<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(consumerProps,
                new StringDeserializer(), new StringDeserializer());
             KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps, new StringSerializer(),
                     new StringSerializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            boolean started = false;
            while (!started && System.currentTimeMillis() < deadline) {
                producer.send(new ProducerRecord<>(topic, "probe")).get();
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(300))) {
                    consumer.acknowledge(record);
                    started = true;
                }
                consumer.commitSync();
            }
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, "r" + i));
            }
            producer.send(new ProducerRecord<>(topic, "release-me"));
            producer.send(new ProducerRecord<>(topic, "reject-me")).get();
            int accepted = 0;
            while ((accepted < count || seen.getOrDefault("release-me", List.of()).size() < 2)
                    && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(300))) {
                    if (record.value().equals("probe")) {
                        consumer.acknowledge(record);
                        continue;
                    }
                    short delivery = record.deliveryCount().orElse((short) -1);
                    seen.computeIfAbsent(record.value(), k -> new java.util.ArrayList<>()).add(delivery);
                    if (record.value().equals("release-me") && delivery == 1) {
                        consumer.acknowledge(record, AcknowledgeType.RELEASE);
                    } else if (record.value().equals("reject-me")) {
                        consumer.acknowledge(record, AcknowledgeType.REJECT);
                    } else {
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                        if (record.value().matches("r\\d+")) {
                            accepted++;
                        }
                    }
                }
                consumer.commitSync();
            }
        }
        for (Map.Entry<String, List<Short>> entry : seen.entrySet()) {
            System.out.println(entry.getKey() + " " + entry.getValue());
        }
    }
}
