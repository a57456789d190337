/* The record walker: the records of a v2 batch (its decompressed record bytes) decoded and checked in C, for
 * records.walk, which is the only caller.
 *
 * One decoder (`next_record`) reads one record, checking every length and varint against the bytes as Kafka's
 * DefaultRecord.readFrom does; three loops drive it over a batch: `check_records` adds what Kafka's LogValidator
 * checks at produce time (offset deltas, keys, timestamps) and keeps nothing per record, `record_fields` writes
 * where every field lies into int64 columns for columnar reads, and `kept_records` copies the records the cleaner
 * keeps of a batch into the records of its rewritten batch (the length and timestamp delta written again from the
 * new base timestamp, the rest as it was). None makes a Python object per record, and all release the GIL while
 * they read the bytes (check_records only for a body of GIL_FREE_BYTES or more): the buffers they read are
 * pinned, what they write is theirs.
 *
 * Record layout (after its length varint): attributes int8 | timestampDelta varlong | offsetDelta varint |
 * keyLength varint | key | valueLength varint | value | headerCount varint | (keyLength, key, valueLength, value)*
 * Varints are zigzag, read with Java's int and long arithmetic (a varint is at most 5 bytes, a varlong 10); a
 * negative key or value length is a null, a negative header key length or header count is malformed.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_RECORD_BYTES 7 /* length, attributes, timestamp delta, offset delta, key length, value length, headers */
#define GIL_FREE_BYTES 65536 /* check_records releases the GIL for bodies this large (as records._batch's CRCs) */
#define RECORD_COLUMNS 7
#define HEADER_COLUMNS 4

typedef enum {
    WALK_OK = 0,
    WALK_PREMATURE_EOF,     /* a record's length varint or its bytes go past the end of the records */
    WALK_BYTES_REMAINING,   /* bytes after the last record */
    WALK_NEGATIVE_LENGTH,   /* a record length below zero */
    WALK_VARINT_TOO_LONG,   /* a varint longer than its type allows */
    WALK_FIELD_OVERRUN,     /* a field goes past the end of its record */
    WALK_SIZE_MISMATCH,     /* the fields end before the record does */
    WALK_HEADER_COUNT,      /* a negative header count */
    WALK_NULL_HEADER_KEY,   /* a header with a null key */
    WALK_OFFSET_DELTA,      /* check_records: offset deltas not 0, 1, ... count - 1 */
    WALK_NO_MEMORY,
} WalkStatus;

typedef struct {
    WalkStatus status;
    int64_t record;  /* index in its batch of the record at fault */
    int64_t value;   /* WALK_OFFSET_DELTA: the delta; WALK_HEADER_COUNT: the count */
} WalkError;

typedef struct {
    int64_t timestamp_delta, offset_delta, key_start, key_length, value_start, value_length, header_count;
} Record;

typedef struct {  /* a growing array of header fields, HEADER_COLUMNS int64 per header, row by row */
    int64_t *rows;
    Py_ssize_t used, capacity;
} Headers;

/* A zigzag varint of at most `max_bytes` bytes at *position, before `limit`: Java's int arithmetic (bits past
 * the 32nd dropped) for max_bytes 5, long for 10. WALK_FIELD_OVERRUN if it runs into `limit`. */
static inline WalkStatus read_varint(const uint8_t *data, Py_ssize_t *position, Py_ssize_t limit, int max_bytes,
                                     int64_t *value) {
    Py_ssize_t at = *position;
    if (at < limit && data[at] < 0x80) { /* the usual case: attributes, deltas under 64, short lengths */
        uint8_t byte = data[at];
        *value = (int64_t)(byte >> 1) ^ -(int64_t)(byte & 1);
        *position = at + 1;
        return WALK_OK;
    }
    if (at + 1 < limit && data[at + 1] < 0x80) { /* two bytes: a 100-byte record's length and value length */
        uint32_t raw = (uint32_t)(data[at] & 0x7F) | ((uint32_t)data[at + 1] << 7);
        *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        *position = at + 2;
        return WALK_OK;
    }
    uint64_t raw = 0;
    for (int index = 0; index < max_bytes; index++) {
        if (at >= limit)
            return WALK_FIELD_OVERRUN;
        uint8_t byte = data[at++];
        raw |= (uint64_t)(byte & 0x7F) << (7 * index);
        if (byte < 0x80) {
            *position = at;
            if (max_bytes == 5) {
                uint32_t narrow = (uint32_t)raw;
                *value = (int64_t)(int32_t)((narrow >> 1) ^ (0u - (narrow & 1u)));
            } else {
                *value = (int64_t)((raw >> 1) ^ (0ull - (raw & 1ull)));
            }
            return WALK_OK;
        }
    }
    return WALK_VARINT_TOO_LONG;
}

/* Skip a length-prefixed field (key or value) starting at *position inside a record ending at `limit`: its start
 * and length (negative: null). */
static inline WalkStatus read_field(const uint8_t *data, Py_ssize_t *position, Py_ssize_t limit, int64_t *start,
                                    int64_t *length) {
    WalkStatus status = read_varint(data, position, limit, 5, length);
    if (status != WALK_OK)
        return status;
    *start = *position;
    if (*length > 0) {
        if (*length > limit - *position)
            return WALK_FIELD_OVERRUN;
        *position += *length;
    }
    return WALK_OK;
}

/* The record at *position (before `end`, the end of the batch's records) into `record`, and its headers appended
 * to `headers` unless NULL; *position moves past the record. Inlined into both loops, so that `record` lives in
 * registers (a call per record was a tenth of the walk). */
static inline __attribute__((always_inline)) WalkStatus next_record(const uint8_t *data, Py_ssize_t *position,
                                                                    Py_ssize_t end, Record *record,
                                                                    Headers *headers) {
    int64_t length;
    WalkStatus status = read_varint(data, position, end, 5, &length);
    if (status == WALK_FIELD_OVERRUN)
        return WALK_PREMATURE_EOF;
    if (status != WALK_OK)
        return status;
    if (length < 0)
        return WALK_NEGATIVE_LENGTH;
    if (length > end - *position)
        return WALK_PREMATURE_EOF;
    Py_ssize_t at = *position + 1; /* the attributes byte */
    Py_ssize_t limit = *position + length;
    if (at > limit)
        return WALK_FIELD_OVERRUN;
    if ((status = read_varint(data, &at, limit, 10, &record->timestamp_delta)) != WALK_OK
        || (status = read_varint(data, &at, limit, 5, &record->offset_delta)) != WALK_OK
        || (status = read_field(data, &at, limit, &record->key_start, &record->key_length)) != WALK_OK
        || (status = read_field(data, &at, limit, &record->value_start, &record->value_length)) != WALK_OK
        || (status = read_varint(data, &at, limit, 5, &record->header_count)) != WALK_OK)
        return status;
    if (record->header_count < 0)
        return WALK_HEADER_COUNT;
    if (record->header_count > (limit - at) / 2) /* each header takes at least two bytes */
        return WALK_FIELD_OVERRUN;
    for (int64_t index = 0; index < record->header_count; index++) {
        int64_t key_start, key_length, value_start, value_length;
        if ((status = read_field(data, &at, limit, &key_start, &key_length)) != WALK_OK)
            return status;
        if (key_length < 0)
            return WALK_NULL_HEADER_KEY;
        if ((status = read_field(data, &at, limit, &value_start, &value_length)) != WALK_OK)
            return status;
        if (headers != NULL) {
            if (headers->used == headers->capacity) {
                Py_ssize_t capacity = headers->capacity ? 2 * headers->capacity : 256;
                int64_t *rows = realloc(headers->rows, (size_t)capacity * HEADER_COLUMNS * sizeof(int64_t));
                if (rows == NULL)
                    return WALK_NO_MEMORY;
                headers->rows = rows;
                headers->capacity = capacity;
            }
            int64_t *row = headers->rows + headers->used++ * HEADER_COLUMNS;
            row[0] = key_start;
            row[1] = key_length;
            row[2] = value_start;
            row[3] = value_length;
        }
    }
    if (at != limit)
        return WALK_SIZE_MISMATCH;
    *position = limit;
    return WALK_OK;
}

/* Raise ValueError saying what `error` found in a batch of `count` records in `size` bytes. */
static PyObject *raise_walk_error(WalkError error, int64_t count, Py_ssize_t size) {
    int64_t record = error.record;
    switch (error.status) {
    case WALK_PREMATURE_EOF:
        return PyErr_Format(PyExc_ValueError, "Incorrect declared batch size, premature EOF reached: record %lld "
                            "of %lld overruns the %zd bytes of records", (long long)record, (long long)count, size);
    case WALK_BYTES_REMAINING:
        return PyErr_Format(PyExc_ValueError, "Incorrect declared batch size, records still remaining in file "
                            "after record %lld", (long long)(count - 1));
    case WALK_NEGATIVE_LENGTH:
        return PyErr_Format(PyExc_ValueError, "Record %lld has a negative length", (long long)record);
    case WALK_VARINT_TOO_LONG:
        return PyErr_Format(PyExc_ValueError, "Record %lld has a varint longer than its type allows",
                            (long long)record);
    case WALK_FIELD_OVERRUN:
        return PyErr_Format(PyExc_ValueError, "Record %lld has fields that overrun its length", (long long)record);
    case WALK_SIZE_MISMATCH:
        return PyErr_Format(PyExc_ValueError, "Record %lld length disagrees with its fields", (long long)record);
    case WALK_HEADER_COUNT:
        return PyErr_Format(PyExc_ValueError, "Found invalid number of record headers %lld in record %lld",
                            (long long)error.value, (long long)record);
    case WALK_NULL_HEADER_KEY:
        return PyErr_Format(PyExc_ValueError, "Record %lld has a header with a null key", (long long)record);
    case WALK_OFFSET_DELTA:
        return PyErr_Format(PyExc_ValueError, "Record %lld has offset delta %lld: a batch's offset deltas must be "
                            "0 to %lld in order", (long long)record, (long long)error.value, (long long)(count - 1));
    case WALK_NO_MEMORY:
        return PyErr_NoMemory();
    case WALK_OK:
        break;
    }
    return PyErr_Format(PyExc_SystemError, "record walker: unknown status %d", (int)error.status);
}

/* -1 with ValueError unless `count` records could fit in `size` bytes: refused before any per-record work. */
static int refuse_impossible_count(int64_t count, Py_ssize_t size) {
    if (count >= 0 && count <= size / MIN_RECORD_BYTES)
        return 0;
    PyErr_Format(PyExc_ValueError, "Incorrect declared batch size, premature EOF reached: %lld records cannot fit "
                 "in %zd bytes", (long long)count, size);
    return -1;
}

typedef struct {  /* what check_records keeps: the first `limit` records at fault of each kind, and how many */
    int64_t limit;
    int64_t keyless_count, late_count;
    int64_t *keyless;           /* indexes; NULL until the first fault */
    int64_t *late, *late_times; /* indexes and timestamps */
} Faults;

/* Room for `limit` faults of each kind, taken at the first one (most batches have none). */
static WalkStatus faults_room(Faults *faults) {
    if (faults->keyless != NULL)
        return WALK_OK;
    faults->keyless = malloc((size_t)faults->limit * 3 * sizeof(int64_t));
    if (faults->keyless == NULL)
        return WALK_NO_MEMORY;
    faults->late = faults->keyless + faults->limit;
    faults->late_times = faults->late + faults->limit;
    return WALK_OK;
}

static PyObject *faults_answer(const Faults *faults) {
    PyObject *keyless = PyList_New(0), *late = PyList_New(0), *answer = NULL;
    if (keyless == NULL || late == NULL)
        goto done;
    for (int64_t index = 0; index < faults->keyless_count && index < faults->limit; index++) {
        PyObject *item = PyLong_FromLongLong(faults->keyless[index]);
        if (item == NULL || PyList_Append(keyless, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    for (int64_t index = 0; index < faults->late_count && index < faults->limit; index++) {
        PyObject *item = Py_BuildValue("(LL)", (long long)faults->late[index], (long long)faults->late_times[index]);
        if (item == NULL || PyList_Append(late, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    answer = Py_BuildValue("(LOO)", (long long)faults->keyless_count, keyless, late);
done:
    Py_XDECREF(keyless);
    Py_XDECREF(late);
    return answer;
}

/* The integer arguments of a fast call, from args[first] on (-1 and an exception if one is not an int). */
static int long_long_arguments(PyObject *const *args, int first, int n, long long *values[]) {
    for (int i = 0; i < n; i++) {
        *values[i] = PyLong_AsLongLong(args[first + i]);
        if (*values[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

static PyObject *check_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* arguments taken by hand, not with PyArg_ParseTuple, and the GIL released only for a body of at least
     * GIL_FREE_BYTES: for a small produce each cost more than walking its records */
    Py_buffer body;
    long long count, base_timestamp, earliest, latest, max_errors;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "check_records takes 8 arguments, not %zd", nargs);
        return NULL;
    }
    int keys_required = PyObject_IsTrue(args[3]), timed = PyObject_IsTrue(args[4]);
    if (keys_required < 0 || timed < 0 ||
        long_long_arguments(args, 1, 2, (long long *[]){&count, &base_timestamp}) < 0 ||
        long_long_arguments(args, 5, 3, (long long *[]){&earliest, &latest, &max_errors}) < 0 ||
        PyObject_GetBuffer(args[0], &body, PyBUF_SIMPLE) < 0)
        return NULL;
    if (refuse_impossible_count(count, body.len) < 0) {
        PyBuffer_Release(&body);
        return NULL;
    }
    PyObject *answer;
    Faults faults = {.limit = max_errors < 0 ? 0 : max_errors < count ? max_errors : count};
    WalkError error = {WALK_OK, 0, 0};
    const uint8_t *data = body.buf;
    Py_ssize_t end = body.len, position = 0;
    PyThreadState *released = end >= GIL_FREE_BYTES ? PyEval_SaveThread() : NULL;
    Record record = {0};
    for (int64_t index = 0; index < count; index++) {
        error.status = next_record(data, &position, end, &record, NULL);
        if (error.status == WALK_OK && record.offset_delta != index) {
            error.status = WALK_OFFSET_DELTA;
            error.value = record.offset_delta;
        }
        if (error.status != WALK_OK) {
            error.record = index;
            if (error.status == WALK_HEADER_COUNT)
                error.value = record.header_count;
            break;
        }
        if (keys_required && record.key_length < 0) {
            if (faults.keyless_count < faults.limit) {
                if ((error.status = faults_room(&faults)) != WALK_OK)
                    break;
                faults.keyless[faults.keyless_count] = index;
            }
            faults.keyless_count++;
        }
        if (timed) { /* base + delta as Java's longs add: wrapping */
            int64_t timestamp = (int64_t)((uint64_t)base_timestamp + (uint64_t)record.timestamp_delta);
            if (timestamp != -1 && (timestamp < earliest || timestamp > latest)) {
                if (faults.late_count < faults.limit) {
                    if ((error.status = faults_room(&faults)) != WALK_OK)
                        break;
                    faults.late[faults.late_count] = index;
                    faults.late_times[faults.late_count] = timestamp;
                }
                faults.late_count++;
            }
        }
    }
    if (error.status == WALK_OK && position != end) {
        error.status = WALK_BYTES_REMAINING;
        error.record = count;
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    PyBuffer_Release(&body);
    if (error.status != WALK_OK)
        answer = raise_walk_error(error, count, end);
    else if (faults.keyless_count || faults.late_count)
        answer = faults_answer(&faults);
    else
        answer = Py_NewRef(Py_None);
    free(faults.keyless);
    return answer;
}

static PyObject *record_fields(PyObject *module, PyObject *args) {
    Py_buffer data, ends, counts;
    int with_headers;
    if (!PyArg_ParseTuple(args, "y*y*y*p:record_fields", &data, &ends, &counts, &with_headers))
        return NULL;
    PyObject *columns = NULL, *header_columns = NULL, *answer = NULL;
    Headers headers = {NULL, 0, 0};
    Py_ssize_t batches = ends.len / (Py_ssize_t)sizeof(int64_t);
    if (ends.len != counts.len || ends.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_TypeError, "record_fields: ends and counts must be int64 arrays of one length");
        goto done;
    }
    const int64_t *body_ends = ends.buf, *body_counts = counts.buf;
    int64_t total = 0;
    Py_ssize_t begin = 0;
    for (Py_ssize_t batch = 0; batch < batches; batch++) {
        if (body_ends[batch] < begin || body_ends[batch] > data.len) {
            PyErr_SetString(PyExc_TypeError, "record_fields: batch ends must grow inside the data");
            goto done;
        }
        if (refuse_impossible_count(body_counts[batch], body_ends[batch] - begin) < 0)
            goto done;
        total += body_counts[batch];
        begin = body_ends[batch];
    }
    columns = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * RECORD_COLUMNS * sizeof(int64_t)));
    if (columns == NULL)
        goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(columns);
    const uint8_t *bytes = data.buf;
    WalkError error = {WALK_OK, 0, 0};
    Py_ssize_t failed_batch = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t position = 0;
    int64_t row = 0;
    Record record = {0};
    for (Py_ssize_t batch = 0; batch < batches && error.status == WALK_OK; batch++) {
        for (int64_t index = 0; index < body_counts[batch]; index++, row++) {
            error.status = next_record(bytes, &position, body_ends[batch], &record, with_headers ? &headers : NULL);
            if (error.status != WALK_OK) {
                error.record = index;
                error.value = record.header_count;
                break;
            }
            out[row] = record.timestamp_delta;
            out[total + row] = record.offset_delta;
            out[2 * total + row] = record.key_start;
            out[3 * total + row] = record.key_length;
            out[4 * total + row] = record.value_start;
            out[5 * total + row] = record.value_length;
            out[6 * total + row] = record.header_count;
        }
        if (error.status == WALK_OK && position != body_ends[batch]) {
            error.status = WALK_BYTES_REMAINING;
            error.record = body_counts[batch];
        }
        failed_batch = batch;
    }
    Py_END_ALLOW_THREADS
    if (error.status != WALK_OK) {
        Py_ssize_t batch_begin = failed_batch ? body_ends[failed_batch - 1] : 0;
        raise_walk_error(error, body_counts[failed_batch], body_ends[failed_batch] - batch_begin);
        goto done;
    }
    if (with_headers) {
        header_columns = PyBytes_FromStringAndSize(NULL, headers.used * HEADER_COLUMNS * sizeof(int64_t));
        if (header_columns == NULL)
            goto done;
        int64_t *columns_out = (int64_t *)PyBytes_AS_STRING(header_columns);
        for (Py_ssize_t entry = 0; entry < headers.used; entry++)  /* rows to columns */
            for (int column = 0; column < HEADER_COLUMNS; column++)
                columns_out[column * headers.used + entry] = headers.rows[entry * HEADER_COLUMNS + column];
    } else {
        header_columns = Py_NewRef(Py_None);
    }
    answer = PyTuple_Pack(2, columns, header_columns);
done:
    free(headers.rows);
    Py_XDECREF(columns);
    Py_XDECREF(header_columns);
    PyBuffer_Release(&data);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&counts);
    return answer;
}

/* Append the zigzag varint of `value` (a varlong: at most 10 bytes) at out; the bytes written. */
static inline Py_ssize_t write_varint(uint8_t *out, int64_t value) {
    uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t written = 0;
    while (raw >= 0x80) {
        out[written++] = (uint8_t)(raw | 0x80);
        raw >>= 7;
    }
    out[written++] = (uint8_t)raw;
    return written;
}

static PyObject *kept_records(PyObject *module, PyObject *args) {
    Py_buffer body, indexes;
    long long count, base_timestamp, max_timestamp;
    int log_append_time;
    PyObject *horizon;
    if (!PyArg_ParseTuple(args, "y*Ly*LLpO:kept_records", &body, &count, &indexes, &base_timestamp, &max_timestamp,
                          &log_append_time, &horizon))
        return NULL;
    PyObject *records = NULL, *answer = NULL;
    long long horizon_ms = 0;
    if (horizon != Py_None && (horizon_ms = PyLong_AsLongLong(horizon)) == -1 && PyErr_Occurred())
        goto done;
    Py_ssize_t kept = indexes.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *wanted = indexes.buf;
    if (indexes.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_TypeError, "kept_records: the indexes must be an int64 buffer");
        goto done;
    }
    for (Py_ssize_t i = 0; i < kept; i++)
        if (wanted[i] < (i ? wanted[i - 1] + 1 : 0) || wanted[i] >= count) {
            PyErr_SetString(PyExc_IndexError, "kept_records: the indexes must grow, below the record count");
            goto done;
        }
    if (refuse_impossible_count(count, body.len) < 0)
        goto done;
    /* each record grows by at most the 9 bytes its timestamp delta's varlong can gain (its length varint too: 4) */
    records = PyBytes_FromStringAndSize(NULL, body.len + kept * 13);
    if (records == NULL)
        goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(records);
    const uint8_t *data = body.buf;
    Py_ssize_t position = 0, written = 0;
    int64_t new_base = horizon == Py_None ? -1 : horizon_ms, latest = -1; /* encode_batch's, for no records */
    WalkError error = {WALK_OK, 0, 0};
    Record record = {0};
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t next = 0;
    for (int64_t index = 0; next < kept; index++) {
        Py_ssize_t start = position;
        error.status = next_record(data, &position, body.len, &record, NULL);
        if (error.status != WALK_OK) {
            error.record = index;
            error.value = record.header_count;
            break;
        }
        if (index != wanted[next])
            continue;
        int64_t timestamp = log_append_time ? max_timestamp
                            : (int64_t)((uint64_t)base_timestamp + (uint64_t)record.timestamp_delta);
        if (next == 0) {
            new_base = horizon == Py_None ? timestamp : horizon_ms;
            latest = timestamp;
        }
        latest = timestamp > latest ? timestamp : latest;
        next++;
        /* the fields after the timestamp delta are copied as they are; the length, attributes (0, as Kafka writes
         * them) and timestamp delta (from the new base) are written again */
        Py_ssize_t after_length = start, after_timestamp;
        int64_t unused;
        read_varint(data, &after_length, position, 5, &unused);
        after_timestamp = after_length + 1;
        read_varint(data, &after_timestamp, position, 10, &unused);
        uint8_t delta[10];
        Py_ssize_t delta_bytes = write_varint(delta, (int64_t)((uint64_t)timestamp - (uint64_t)new_base));
        Py_ssize_t rest = position - after_timestamp;
        written += write_varint(out + written, 1 + delta_bytes + rest);
        out[written++] = 0;
        memcpy(out + written, delta, (size_t)delta_bytes);
        written += delta_bytes;
        memcpy(out + written, data + after_timestamp, (size_t)rest);
        written += rest;
    }
    Py_END_ALLOW_THREADS
    if (error.status != WALK_OK) {
        raise_walk_error(error, count, body.len);
        goto done;
    }
    if (_PyBytes_Resize(&records, written) == 0)
        answer = Py_BuildValue("(OLL)", records, (long long)new_base, (long long)latest);
done:
    Py_XDECREF(records);
    PyBuffer_Release(&body);
    PyBuffer_Release(&indexes);
    return answer;
}

static PyMethodDef walk_methods[] = {
    {"check_records", (PyCFunction)(void (*)(void))check_records, METH_FASTCALL,
     "check_records(body, count, base_timestamp, keys_required, timed, earliest, latest, max_errors)\n--\n\n"
     "Walk the `count` records of one batch (`body`: its decompressed record bytes) with Kafka's produce-time\n"
     "checks: None if they pass, else (keyless total, first max_errors keyless indexes, first max_errors\n"
     "(index, timestamp) outside [earliest, latest] if `timed`). ValueError if the records are malformed or\n"
     "their offset deltas are not 0 to count - 1."},
    {"record_fields", record_fields, METH_VARARGS,
     "record_fields(data, ends, counts, with_headers)\n--\n\n"
     "Walk batches of records laid end to end in `data` (batch i ends at ends[i] and holds counts[i] records;\n"
     "both int64 buffers): (bytes of 7 int64 columns: timestamp delta, offset delta, key start, key length,\n"
     "value start, value length, header count; bytes of 4 int64 columns over all headers in order: key start,\n"
     "key length, value start, value length, or None without `with_headers`). ValueError if malformed."},
    {"kept_records", kept_records, METH_VARARGS,
     "kept_records(body, count, indexes, base_timestamp, max_timestamp, log_append_time, delete_horizon)\n--\n\n"
     "The records at `indexes` (growing) of one batch (`body`: its decompressed bytes, `count` records), encoded\n"
     "again as encode_batch writes them: (their bytes, the new base timestamp: `delete_horizon`, or if None the\n"
     "first kept record's timestamp, the latest kept timestamp). A log-append-time batch's records carry its\n"
     "max_timestamp. ValueError if the records are malformed, IndexError if the indexes do not grow below count."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef walk_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_walk",
    .m_doc = "The record walker in C (see records.walk).",
    .m_size = 0,
    .m_methods = walk_methods,
};

PyMODINIT_FUNC PyInit__walk(void) {
    PyObject *module = PyModule_Create(&walk_module);
    if (module != NULL && PyModule_AddIntConstant(module, "MIN_RECORD_BYTES", MIN_RECORD_BYTES) < 0)
        Py_CLEAR(module);
    return module;
}
