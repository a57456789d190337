/* What the load generator's producer and consumer share: their command line, the librdkafka configuration built
 * from it, the clock, and the one-line JSON report each process prints at the end. */
#ifndef LOADGEN_COMMON_H
#define LOADGEN_COMMON_H

#include <librdkafka/rdkafka.h>

struct options {
    const char *bootstrap;
    const char *topic;
    long records;   /* producer: records to send; consumer: records to read from its partitions */
    int size;       /* producer: value bytes */
    int keys;       /* producer: distinct keys, 0 for none */
    int member;     /* consumer: this process reads the partitions p with p % members == member */
    int members;
    double rate;         /* producer: records/s on a fixed schedule, each value stamped with its send time; 0: flat out */
    long latency_warmup; /* consumer: >= 0 reads those stamps, reporting latencies of all but the first this many */
    int partitions;      /* wire programs: the topic's partitions (they send no Metadata request) */
};

/* Parses argv into opts and a librdkafka configuration (every "-X name=value"); exits with a message on error. */
rd_kafka_conf_t *parse_options(int argc, char **argv, struct options *opts, const char *usage);

double now_seconds(void); /* CLOCK_MONOTONIC: one clock for every process on the machine */

struct cpu_times {
    double user, system;
};
struct cpu_times cpu_now(void); /* getrusage(RUSAGE_SELF): every thread of this process, librdkafka's included */

/* Prints {"records", "bytes", "started", "ended", "seconds", "records_per_s", "mb_per_s", "cpu_user",
 * "cpu_system", "cpu_per_record_us", "errors", "first_error", "librdkafka", "partition_records"} on one line of
 * stdout; partition_records lists the records sent to (acknowledged) or read from each partition of the topic;
 * extra is more JSON members (", \"name\": value ..."), or "". */
void report(long records, long long bytes, double started, double ended, struct cpu_times before,
            struct cpu_times after, long errors, const char *first_error, const long *partition_records,
            int partitions, const char *extra);

/* The send-time stamp at the start of a value: CLOCK_MONOTONIC nanoseconds as STAMP_BYTES hex digits. */
#define STAMP_BYTES 16

void fail(const char *what, const char *why);

#endif
