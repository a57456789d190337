/* loadgen-wire-consumer: reads --topic from offset 0 of every partition it is given (of --partitions; all of them,
 * or with --member i --members k those p with p % k == i) in Fetch requests it encodes itself (v4, all its
 * partitions in each, one in flight, as librdkafka keeps one per broker) until --records records arrived, then
 * prints one JSON line (common.h) timed from the first request to the last answer, with its CPU time over that span
 * and the records read per partition ("bytes" counts --size bytes per record).
 *
 * Records are counted from each whole batch's header (its record count), never walked; the next offset of a
 * partition follows the last whole batch of its answer (an answer may end in a partial batch, cut at the size
 * limits). Limits come from -X: fetch.max.bytes, max.partition.fetch.bytes, fetch.wait.max.ms, fetch.min.bytes
 * (librdkafka's defaults otherwise). An error in an answer, or a minute without a record, ends the run (exit 2). */
#include "common.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FETCH_VERSION 4
#define BATCH_HEADER 61
#define STALL_SECONDS 60
#define CLIENT_ID "loadgen-wire"

static const char USAGE[] =
    "usage: loadgen-wire-consumer --bootstrap HOST:PORT --topic T --partitions P --records N\n"
    "                             [--member I --members K] [--size BYTES] [-X librdkafka.fetch.setting=value ...]\n";

static long setting(rd_kafka_conf_t *conf, const char *name, const char *otherwise) {
    char value[64];
    wire_setting(conf, name, otherwise, value, sizeof value);
    return atol(value);
}

int main(int argc, char **argv) {
    struct options opts;
    rd_kafka_conf_t *conf = parse_options(argc, argv, &opts, USAGE);
    int32_t max_bytes = (int32_t)setting(conf, "fetch.max.bytes", "52428800");
    int32_t partition_max_bytes = (int32_t)setting(conf, "max.partition.fetch.bytes", "1048576");
    int32_t max_wait_ms = (int32_t)setting(conf, "fetch.wait.max.ms", "500");
    int32_t min_bytes = (int32_t)setting(conf, "fetch.min.bytes", "1");
    rd_kafka_conf_destroy(conf);
    if (opts.partitions < 1)
        fail("options", "--partitions is required");
    int mine = 0, *partitions = malloc(sizeof(int) * opts.partitions);
    for (int p = opts.member; p < opts.partitions; p += opts.members)
        partitions[mine++] = p;
    if (mine == 0)
        fail("options", "no partition falls to this member");
    int64_t *next_offset = calloc(opts.partitions, sizeof *next_offset);
    long *partition_records = calloc(opts.partitions, sizeof *partition_records);

    size_t topic_length = strlen(opts.topic), client_length = strlen(CLIENT_ID);
    size_t request_size = 4 + 2 + 2 + 4 + 2 + client_length + 4 + 4 + 4 + 4 + 1 + 4 + 2 + topic_length + 4 +
                          (size_t)mine * 16;
    unsigned char *request = malloc(request_size), *offsets;
    {
        unsigned char *h = request;
        put32(h, (int32_t)(request_size - 4)), h += 4;
        put16(h, 1), h += 2; /* api key: Fetch */
        put16(h, FETCH_VERSION), h += 2;
        put32(h, 0), h += 4; /* correlation id, set per request */
        put16(h, (int16_t)client_length), memcpy(h + 2, CLIENT_ID, client_length), h += 2 + client_length;
        put32(h, -1), h += 4; /* replica id: a consumer */
        put32(h, max_wait_ms), h += 4;
        put32(h, min_bytes), h += 4;
        put32(h, max_bytes), h += 4;
        *h++ = 0; /* read uncommitted */
        put32(h, 1), h += 4;
        put16(h, (int16_t)topic_length), memcpy(h + 2, opts.topic, topic_length), h += 2 + topic_length;
        put32(h, mine), h += 4;
        offsets = h; /* per partition: index, fetch offset, partition max bytes */
    }
    int fd = wire_connect(opts.bootstrap);
    struct frame answer = {0};
    long seen = 0;
    char error[256];

    struct cpu_times cpu_before = cpu_now();
    double started = now_seconds(), last_progress = started;
    for (int32_t correlation = 0; seen < opts.records; correlation++) {
        put32(request + 8, correlation);
        for (int i = 0; i < mine; i++) {
            put32(offsets + i * 16, partitions[i]);
            put64(offsets + i * 16 + 4, next_offset[partitions[i]]);
            put32(offsets + i * 16 + 12, partition_max_bytes);
        }
        wire_send(fd, request, request_size);
        wire_receive(fd, &answer);
        const unsigned char *a = answer.data, *end = a + answer.size;
        if (answer.size < 14 || get32(a) != correlation || get32(a + 8) != 1)
            fail("fetch", "an answer that is not the one to this request");
        a += 12;
        a += 2 + get16(a); /* the topic's name */
        int32_t answered = get32(a);
        a += 4;
        long before = seen;
        for (int32_t i = 0; i < answered; i++) {
            if (end - a < 4 + 2 + 8 + 8 + 4)
                fail("fetch", "an answer cut short");
            int32_t partition = get32(a);
            int16_t code = get16(a + 4);
            int32_t aborted = get32(a + 22);
            a += 26 + (aborted > 0 ? (size_t)aborted * 16 : 0);
            int32_t length = get32(a);
            a += 4;
            if (partition < 0 || partition >= opts.partitions || length > end - a)
                fail("fetch", "an answer for a partition it was not asked for, or cut short");
            if (code != 0) {
                snprintf(error, sizeof error, "Fetch answered error code %d for partition %d", code, partition);
                fail("fetch", error);
            }
            const unsigned char *batch = a, *records_end = a + (length > 0 ? length : 0);
            while (records_end - batch >= BATCH_HEADER) {
                int64_t base = get64(batch), size = 12 + (int64_t)get32(batch + 8);
                if (size < BATCH_HEADER || size > records_end - batch)
                    break; /* the partial batch that ends an answer cut at a size limit */
                int64_t last = base + get32(batch + 23);
                if (last >= next_offset[partition]) {
                    long count = base >= next_offset[partition] ? get32(batch + 57) : last - next_offset[partition] + 1;
                    seen += count;
                    partition_records[partition] += count;
                    next_offset[partition] = last + 1;
                }
                batch += size;
            }
            a = records_end;
        }
        double now = now_seconds();
        if (seen > before)
            last_progress = now;
        else if (now - last_progress > STALL_SECONDS)
            fail("fetch", "no record for a minute");
    }
    double ended = now_seconds();
    report(seen, (long long)seen * opts.size, started, ended, cpu_before, cpu_now(), 0, "", partition_records,
           opts.partitions, "");
    return 0;
}
