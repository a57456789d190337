/* loadgen-producer: sends --records records of --size bytes to --topic as fast as librdkafka lets it, then prints
 * one JSON line (common.h) timed from the first send to the last acknowledgement, with its CPU time over that span
 * and the records acknowledged per partition (what a consumer must then find there).
 *
 * Values come from a pool of 1024 prebuilt buffers handed to librdkafka without copying, each starting with 16
 * random hex digits (so that compression has real work) and padded with 'x'; --keys K gives record i the key
 * "key-<i % K>" from a prebuilt pool too, so the loop builds nothing per record.
 * Records without a key go to librdkafka's default partitioner (sticky for null keys), keyed ones by key hash.
 * Every librdkafka setting (acks, linger.ms, batch.size, compression.codec, ...) comes through -X name=value.
 *
 * With --rate R, record i is due at start + i/R on CLOCK_MONOTONIC: the loop sleeps until its slot (serving
 * acknowledgements meanwhile), then sends the record with its send time stamped over the value's first 16 hex
 * digits (common.h; copied, as each value is now unique) for loadgen-consumer --latency to subtract. The report adds
 * "rate_target" and "behind_schedule_ms", the most any record was sent after its slot: a producer that fell behind
 * did not offer the load it was asked to, and latencies measured under it do not count. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUE_POOL 1024
#define KEY_BYTES 16

static const char USAGE[] =
    "usage: loadgen-producer --bootstrap HOST:PORT --topic T --records N [--size BYTES] [--keys K] [--rate R]\n"
    "                        [-X librdkafka.setting=value ...]\n";

static long acknowledged, failed;
static long *partition_records; /* acknowledged, per partition */
static char first_error[256];

static void delivered(rd_kafka_t *rk, const rd_kafka_message_t *message, void *opaque) {
    (void)rk;
    (void)opaque;
    if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        acknowledged++;
        partition_records[message->partition]++;
    } else if (failed++ == 0) {
        snprintf(first_error, sizeof first_error, "%s", rd_kafka_err2str(message->err));
    }
}

static char *value_pool(int size) {
    char *pool = malloc((size_t)size * VALUE_POOL);
    unsigned long long state = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)getpid();
    for (int v = 0; v < VALUE_POOL; v++) {
        char *value = pool + (size_t)v * size;
        state ^= state << 13, state ^= state >> 7, state ^= state << 17; /* xorshift64 */
        snprintf(value, 17, "%016llx", state);
        memset(value + 16, 'x', size - 16);
    }
    return pool;
}

static char *key_pool(int keys) {
    char *pool = calloc(keys ? keys : 1, KEY_BYTES);
    for (int k = 0; k < keys; k++)
        snprintf(pool + (size_t)k * KEY_BYTES, KEY_BYTES, "key-%011d", k);
    return pool;
}

int main(int argc, char **argv) {
    struct options opts;
    char error[512];
    rd_kafka_conf_t *conf = parse_options(argc, argv, &opts, USAGE);
    rd_kafka_conf_set_dr_msg_cb(conf, delivered);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
    if (rk == NULL)
        fail("rd_kafka_new", error);
    rd_kafka_topic_t *topic = rd_kafka_topic_new(rk, opts.topic, NULL);
    const struct rd_kafka_metadata *metadata;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, topic, &metadata, 30000); /* connect before the clock */
    if (err)
        fail("metadata", rd_kafka_err2str(err));
    if (metadata->topic_cnt != 1 || metadata->topics[0].err || metadata->topics[0].partition_cnt < 1)
        fail(opts.topic, "topic not found in metadata");
    int partitions = metadata->topics[0].partition_cnt;
    partition_records = calloc(partitions, sizeof *partition_records);
    rd_kafka_metadata_destroy(metadata);

    char *values = value_pool(opts.size), *keys = key_pool(opts.keys);
    struct cpu_times cpu_before = cpu_now();
    char *stamped = malloc(opts.size);
    double started = now_seconds(), behind = 0;
    for (long i = 0; i < opts.records; i++) {
        char *value = values + (size_t)(i % VALUE_POOL) * opts.size;
        char *key = opts.keys ? keys + (size_t)(i % opts.keys) * KEY_BYTES : NULL;
        int copy = 0;
        if (opts.rate > 0) {
            double due = started + i / opts.rate, now;
            while ((now = now_seconds()) < due) {
                rd_kafka_poll(rk, 0);
                usleep(due - now < 0.001 ? (useconds_t)((due - now) * 1e6) : 1000);
            }
            if (now - due > behind)
                behind = now - due;
            memcpy(stamped, value, opts.size);
            char stamp[STAMP_BYTES + 1];
            snprintf(stamp, sizeof stamp, "%016llx", (unsigned long long)(now * 1e9));
            memcpy(stamped, stamp, STAMP_BYTES);
            value = stamped, copy = RD_KAFKA_MSG_F_COPY;
        }
        while (rd_kafka_produce(topic, RD_KAFKA_PARTITION_UA, copy, value, opts.size, key, key ? KEY_BYTES - 1 : 0,
                                NULL) == -1) {
            if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                fail("produce", rd_kafka_err2str(rd_kafka_last_error()));
            rd_kafka_poll(rk, 1); /* local queue full: serve acknowledgements until there is room */
        }
        if ((i & 1023) == 0)
            rd_kafka_poll(rk, 0); /* serve acknowledgements now and then */
    }
    if (rd_kafka_flush(rk, 120000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail("flush", "records still unacknowledged after 120 s");
    double ended = now_seconds();
    char extra[128] = "";
    if (opts.rate > 0)
        snprintf(extra, sizeof extra, ", \"rate_target\": %.1f, \"behind_schedule_ms\": %.3f", opts.rate,
                 behind * 1e3);
    report(acknowledged, (long long)acknowledged * opts.size, started, ended, cpu_before, cpu_now(), failed,
           first_error, partition_records, partitions, extra);
    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(rk);
    return failed ? 1 : 0;
}
