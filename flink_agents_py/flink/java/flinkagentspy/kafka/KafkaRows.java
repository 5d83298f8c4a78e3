/*
 * flink-agents-py: the two Kafka (de)serialization schemas PyFlink's builders cannot express.
 *
 * PyFlink's KafkaSourceBuilder only takes value-only deserializers (no partition, offset or
 * key), and its KafkaRecordSerializationSchemaBuilder cannot take the record key from a field
 * of the element. These classes plug into Flink's own KafkaSource and KafkaSink (from
 * flink-sql-connector-kafka, whose Kafka client is relocated under
 * org.apache.flink.kafka.shaded) and exchange plain Rows with Python:
 *
 *   source: ConsumerRecord -> Row(topic STRING, partition INT, offset BIGINT,
 *                                 timestamp BIGINT, key BYTES, value BYTES)
 *   sink:   Row(topic STRING, key STRING, value STRING) -> ProducerRecord
 *
 * Source keys and values stay bytes, so Python decodes them strictly: a value that is not
 * UTF-8 is reported with its partition and offset, and a key that is not UTF-8 is kept as
 * its bytes (a Java decode would turn every invalid byte into U+FFFD, and two distinct keys
 * into one). Nulls pass through. Decoding and parsing
 * happen in Python, so a malformed value reaches the job instead of failing the source.
 *
 * Compiled by flink_agents_py.flink.kafka_jars() (javac, once, cached by content hash).
 */
package flinkagentspy.kafka;

import java.nio.charset.StandardCharsets;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/** Holder of the Row-based Kafka schemas (see the file comment). */
public final class KafkaRows {

    private KafkaRows() {}

    /** Field names of the rows the source emits. */
    public static final String[] SOURCE_FIELDS = {
        "topic", "partition", "offset", "timestamp", "key", "value"
    };

    /** The type of the rows the source emits. */
    public static TypeInformation<Row> sourceType() {
        return Types.ROW_NAMED(SOURCE_FIELDS, Types.STRING, Types.INT, Types.LONG, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.PRIMITIVE_ARRAY(Types.BYTE));
    }

    private static byte[] bytes(Object text) {
        return text == null ? null : text.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Every Kafka record as a Row with its topic, partition, offset, timestamp, key, value. */
    public static final class RecordRowDeserializer implements KafkaRecordDeserializationSchema<Row> {
        private static final long serialVersionUID = 1L;

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
            out.collect(Row.of(record.topic(), record.partition(), record.offset(),
                    record.timestamp(), record.key(), record.value()));
        }

        @Override
        public TypeInformation<Row> getProducedType() {
            return sourceType();
        }
    }

    /**
     * Row(topic, key, value) to a Kafka record of that topic (partitioned by key hash).
     *
     * <p>The record gets no timestamp from Flink (the producer stamps the send time): outputs of
     * agent timers carry timer timestamps (the end-of-input drain's is 2^63 - 2), which brokers
     * reject as too far in the future.
     */
    public static final class TopicKeyValueSerializer implements KafkaRecordSerializationSchema<Row> {
        private static final long serialVersionUID = 1L;

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Row element, KafkaSinkContext context,
                                                        Long timestamp) {
            Object topic = element.getField(0);
            if (topic == null) {
                throw new IllegalArgumentException("a record for the Kafka sink has no topic");
            }
            return new ProducerRecord<>(topic.toString(), null, null,
                    bytes(element.getField(1)), bytes(element.getField(2)));
        }
    }
}
