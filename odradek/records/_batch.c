/* The checks of record batch v2 headers that every produced (and replicated) batch goes through, in one C loop.
 *
 * batch.validate_batches is Kafka's per-batch check of a Produce's records before any record is read: framing,
 * magic, CRC-32C, codec, the offset range against the record count, no control batch and a sequence for every
 * idempotent one from a client. In Python each of those was a few bytecodes on a namedtuple, 1.6 us for a
 * one-batch Produce; here the header is read once from the buffer, checked, and turned into the caller's
 * BatchHeader (a tuple subclass, filled in place), 0.3 us. The CRC is records._crc32c's, reached through the
 * capsule that module exports, so there is one implementation of it.
 *
 * A refusal raises Refused(code, message): the Kafka error code and Kafka's wording, which batch.py turns into a
 * KafkaError. The messages are the ones the Python checks gave.
 *
 * Beside the checks: what the log stamps on an appended batch (`stamped`, `rebased`), and the hops over a segment's
 * batch headers that reads make between its offset index entries (`hop_to_offset`, `hop_whole_batches`; the caller
 * reads the file a chunk at a time and hops again where a chunk ends): per batch, a few loads here against an
 * unpack and a dozen bytecodes in Python.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define BATCH_HEADER_SIZE 61
#define LOG_OVERHEAD 12      /* baseOffset + batchLength */
#define MAGIC_OFFSET 16
#define MAGIC_V2 2
#define ATTRIBUTES_OFFSET 21
#define HEADER_FIELDS 13
#define STAMPED_BYTES 16   /* base offset, batch length, leader epoch */
#define GIL_FREE_BYTES 65536 /* CRCs of batches this large run without the GIL, as records._crc32c's do */
#define CONTROL_BIT 0x20

/* Kafka's error codes (odradek.errors.ErrorCode) */
#define CORRUPT_MESSAGE 2
#define UNSUPPORTED_FOR_MESSAGE_FORMAT 43
#define UNSUPPORTED_COMPRESSION_TYPE 76
#define INVALID_RECORD 87

typedef uint32_t (*crc_extend)(uint32_t, const uint8_t *, size_t);

static crc_extend extend;
static PyObject *Refused;

static void *refuse(int code, PyObject *message) {
    if (message != NULL) {
        PyObject *args = Py_BuildValue("(iN)", code, message);
        if (args != NULL) {
            PyErr_SetObject(Refused, args);
            Py_DECREF(args);
        }
    }
    return NULL;
}

static inline int64_t read_be(const uint8_t *p, int size) {
    uint64_t v = 0;
    for (int i = 0; i < size; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

/* The 13 fields of the header at `p`, in BatchHeader's order. */
static void header_fields(const uint8_t *p, int64_t f[HEADER_FIELDS]) {
    f[0] = read_be(p, 8);                    /* base_offset */
    f[1] = (int32_t)read_be(p + 8, 4);       /* batch_length */
    f[2] = (int32_t)read_be(p + 12, 4);      /* partition_leader_epoch */
    f[3] = (int8_t)p[16];                    /* magic */
    f[4] = (uint32_t)read_be(p + 17, 4);     /* crc */
    f[5] = (int16_t)read_be(p + 21, 2);      /* attributes */
    f[6] = (int32_t)read_be(p + 23, 4);      /* last_offset_delta */
    f[7] = read_be(p + 27, 8);               /* base_timestamp */
    f[8] = read_be(p + 35, 8);               /* max_timestamp */
    f[9] = read_be(p + 43, 8);               /* producer_id */
    f[10] = (int16_t)read_be(p + 51, 2);     /* producer_epoch */
    f[11] = (int32_t)read_be(p + 53, 4);     /* base_sequence */
    f[12] = (int32_t)read_be(p + 57, 4);     /* record_count */
}

static PyObject *new_header(PyTypeObject *cls, const int64_t f[HEADER_FIELDS]) {
    PyObject *header = cls->tp_alloc(cls, HEADER_FIELDS);
    if (header == NULL)
        return NULL;
    for (int i = 0; i < HEADER_FIELDS; i++) {
        PyObject *value = PyLong_FromLongLong(f[i]);
        if (value == NULL) {
            Py_DECREF(header);
            return NULL;
        }
        PyTuple_SET_ITEM(header, i, value);
    }
    return header;
}

/* NULL with Refused set if the batch at `p` (`left` bytes from it to the end) fails a check; else its header. */
static PyObject *checked_header(const uint8_t *p, Py_ssize_t pos, Py_ssize_t left, int from_leader,
                                PyTypeObject *cls, Py_ssize_t *size) {
    if (left < LOG_OVERHEAD + 5)
        return refuse(CORRUPT_MESSAGE, PyUnicode_FromFormat("Trailing partial batch of %zd bytes", left));
    int magic = p[MAGIC_OFFSET];
    if (magic == 0 || magic == 1)
        return refuse(UNSUPPORTED_FOR_MESSAGE_FORMAT,
                      PyUnicode_FromFormat("Record batch magic %d where magic 2 is required", magic));
    if (magic != MAGIC_V2)
        return refuse(CORRUPT_MESSAGE, PyUnicode_FromFormat("Invalid record batch magic %d", magic));
    if (left < BATCH_HEADER_SIZE)
        return refuse(CORRUPT_MESSAGE, PyUnicode_FromFormat("Trailing partial batch of %zd bytes", left));
    int64_t f[HEADER_FIELDS];
    header_fields(p, f);
    int64_t length = f[1] + LOG_OVERHEAD;
    if (length < BATCH_HEADER_SIZE)
        return refuse(CORRUPT_MESSAGE, PyUnicode_FromFormat("Record batch length %lld is too small",
                                                            (long long)f[1]));
    if (length > left)
        return refuse(CORRUPT_MESSAGE, PyUnicode_FromFormat("Record batch of %lld bytes overruns the %zd bytes left",
                                                            (long long)length, left));
    uint32_t crc;
    size_t covered = (size_t)length - ATTRIBUTES_OFFSET;
    if (covered >= GIL_FREE_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        crc = extend(0, p + ATTRIBUTES_OFFSET, covered);
        Py_END_ALLOW_THREADS
    } else {
        crc = extend(0, p + ATTRIBUTES_OFFSET, covered);
    }
    if (crc != (uint32_t)f[4])
        return refuse(CORRUPT_MESSAGE, PyUnicode_FromFormat("Record batch at byte %zd fails its CRC", pos));
    int codec = (int)(f[5] & 0x07);
    if (codec > 4)
        return refuse(UNSUPPORTED_COMPRESSION_TYPE, PyUnicode_FromFormat("Unknown compression codec %d", codec));
    long long last_offset_delta = f[6], record_count = f[12];
    if (last_offset_delta < 0)
        return refuse(INVALID_RECORD, PyUnicode_FromFormat("Batch has an invalid offset range: [0, %lld]",
                                                           last_offset_delta));
    if (!from_leader) {
        if (record_count <= 0)
            return refuse(INVALID_RECORD, PyUnicode_FromFormat("Invalid reported count for record batch: %lld",
                                                               record_count));
        if (record_count != last_offset_delta + 1)
            return refuse(INVALID_RECORD, PyUnicode_FromFormat(
                "Inconsistent batch offset range [0, %lld] and count of records %lld", last_offset_delta,
                record_count));
        if (f[5] & CONTROL_BIT)
            return refuse(INVALID_RECORD, PyUnicode_FromString("Clients are not allowed to write control records"));
        if (f[9] >= 0 && f[11] < 0)
            return refuse(INVALID_RECORD, PyUnicode_FromFormat(
                "Invalid sequence number %lld in record batch with producerId %lld", (long long)f[11],
                (long long)f[9]));
    }
    *size = (Py_ssize_t)length;
    return new_header(cls, f);
}

static PyObject *validate_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[2]) || !PyType_IsSubtype((PyTypeObject *)args[2], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "validate_batches(data, from_leader, header_class: a tuple subclass)");
        return NULL;
    }
    int from_leader = PyObject_IsTrue(args[1]);
    if (from_leader < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *headers = PyList_New(0);
    const uint8_t *buf = view.buf;
    Py_ssize_t pos = 0;
    while (headers != NULL && pos < view.len) {
        Py_ssize_t size = 0;
        PyObject *header = checked_header(buf + pos, pos, view.len - pos, from_leader, (PyTypeObject *)args[2],
                                          &size);
        if (header == NULL || PyList_Append(headers, header) < 0)
            Py_CLEAR(headers);
        Py_XDECREF(header);
        pos += size;
    }
    PyBuffer_Release(&view);
    return headers;
}

/* A copy of `header` (a BatchHeader) with base offset `base_offset` and leader epoch `epoch` (None: its own). */
static PyObject *rebased_header(PyObject *header, PyObject *base_offset, PyObject *epoch) {
    if (!PyTuple_Check(header) || PyTuple_GET_SIZE(header) != HEADER_FIELDS || !PyLong_Check(base_offset) ||
        (epoch != Py_None && !PyLong_Check(epoch))) {
        PyErr_SetString(PyExc_TypeError, "(header: a BatchHeader, base_offset: int, partition_leader_epoch: int or "
                                         "None)");
        return NULL;
    }
    PyTypeObject *cls = Py_TYPE(header);
    PyObject *copy = cls->tp_alloc(cls, HEADER_FIELDS);
    if (copy == NULL)
        return NULL;
    for (int i = 0; i < HEADER_FIELDS; i++) {
        PyObject *value = i == 0 ? base_offset : i == 2 && epoch != Py_None ? epoch : PyTuple_GET_ITEM(header, i);
        PyTuple_SET_ITEM(copy, i, Py_NewRef(value));
    }
    return copy;
}

static PyObject *rebased(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "rebased(header, base_offset, partition_leader_epoch)");
        return NULL;
    }
    return rebased_header(args[0], args[1], args[2]);
}

static PyObject *stamped(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "stamped(header, base_offset, partition_leader_epoch=None)");
        return NULL;
    }
    PyObject *header = rebased_header(args[0], args[1], nargs == 3 ? args[2] : Py_None);
    if (header == NULL)
        return NULL;
    long long base_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(header, 0));
    long long length = PyLong_AsLongLong(PyTuple_GET_ITEM(header, 1));
    long long epoch = PyLong_AsLongLong(PyTuple_GET_ITEM(header, 2));
    if (PyErr_Occurred() || length < INT32_MIN || length > INT32_MAX || epoch < INT32_MIN || epoch > INT32_MAX) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_OverflowError, "batch length or leader epoch outside int32");
        Py_DECREF(header);
        return NULL;
    }
    uint8_t head[STAMPED_BYTES];
    uint64_t fields[3] = {(uint64_t)base_offset, (uint64_t)(uint32_t)length, (uint64_t)(uint32_t)epoch};
    int sizes[3] = {8, 4, 4};
    for (int f = 0, at = 0; f < 3; at += sizes[f], f++)
        for (int i = 0; i < sizes[f]; i++)
            head[at + i] = (uint8_t)(fields[f] >> (8 * (sizes[f] - 1 - i)));
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)head, STAMPED_BYTES);
    if (bytes == NULL) {
        Py_DECREF(header);
        return NULL;
    }
    return Py_BuildValue("(NN)", bytes, header);
}

/* ---- Hops over the batch headers of a log segment, within one chunk read from its file ------------------- */

enum { HOP_AT = 0, HOP_NEEDS_BYTES = 1, HOP_NONE = 2 };

/* The chunk's bytes, and the chunk-relative positions of the call: (chunk, at, end, ...). */
static int hop_arguments(PyObject *const *args, Py_buffer *view, Py_ssize_t *at, Py_ssize_t *end) {
    if (PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE) < 0)
        return -1;
    *at = PyLong_AsSsize_t(args[1]);
    *end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *hop_result(Py_buffer *view, int code, Py_ssize_t at) {
    PyBuffer_Release(view);
    return Py_BuildValue("(in)", code, at);
}

/* hop_to_offset(chunk, at, end, offset): from the batch at `at`, the first whose last offset is >= `offset`. */
static PyObject *hop_to_offset(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hop_to_offset(chunk, at, end, offset)");
        return NULL;
    }
    Py_buffer view;
    Py_ssize_t at, end;
    long long offset = PyLong_AsLongLong(args[3]);
    if ((offset == -1 && PyErr_Occurred()) || hop_arguments(args, &view, &at, &end) < 0)
        return NULL;
    const uint8_t *chunk = view.buf;
    while (at + BATCH_HEADER_SIZE <= end) {
        if (at < 0 || at + BATCH_HEADER_SIZE > view.len)
            return hop_result(&view, HOP_NEEDS_BYTES, at);
        const uint8_t *p = chunk + at;
        int64_t size = (int64_t)(int32_t)read_be(p + 8, 4) + LOG_OVERHEAD;
        if (p[MAGIC_OFFSET] != MAGIC_V2 || size < BATCH_HEADER_SIZE || at + size > end)
            return hop_result(&view, HOP_NONE, at);
        int64_t last_offset;  /* a damaged header's sum saturates instead of overflowing */
        if (__builtin_add_overflow(read_be(p, 8), (int64_t)(int32_t)read_be(p + 23, 4), &last_offset))
            last_offset = (int32_t)read_be(p + 23, 4) > 0 ? INT64_MAX : INT64_MIN;
        if (last_offset >= offset)
            return hop_result(&view, HOP_AT, at);
        at += (Py_ssize_t)size;
    }
    return hop_result(&view, HOP_NONE, at);
}

/* hop_whole_batches(chunk, at, end, limit, max_offset or None): from the batch at `at`, past every whole batch
 * that ends by `limit` and starts below `max_offset`; where that run ends. */
static PyObject *hop_whole_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "hop_whole_batches(chunk, at, end, limit, max_offset)");
        return NULL;
    }
    Py_buffer view;
    Py_ssize_t at, end;
    Py_ssize_t limit = PyLong_AsSsize_t(args[3]);
    int bounded = args[4] != Py_None;
    long long max_offset = bounded ? PyLong_AsLongLong(args[4]) : 0;
    if (PyErr_Occurred() || hop_arguments(args, &view, &at, &end) < 0)
        return NULL;
    const uint8_t *chunk = view.buf;
    while (at + LOG_OVERHEAD <= end) {
        if (at < 0 || at + LOG_OVERHEAD > view.len)
            return hop_result(&view, HOP_NEEDS_BYTES, at);
        const uint8_t *p = chunk + at;
        int64_t size = (int64_t)(int32_t)read_be(p + 8, 4) + LOG_OVERHEAD;
        if ((bounded && read_be(p, 8) >= max_offset) || size < BATCH_HEADER_SIZE || at + size > limit)
            break;
        at += (Py_ssize_t)size;
    }
    return hop_result(&view, HOP_AT, at);
}

/* FieldSum(first, second, constant): a read-only attribute of a tuple subclass that is item `first` plus item
 * `second` (none if -1) plus `constant`. BatchHeader's `size` and `last_offset` are read about ten times for each
 * produced batch; as Python properties each read ran a frame (75-90 ns), as this it is an addition. A sum beyond
 * int64 (a client's base offset near the top, say) is Python's exact one, as the properties gave. */
typedef struct {
    PyObject_HEAD
    Py_ssize_t first, second;
    long long constant;
} FieldSum;

static PyObject *field_sum_get(PyObject *self, PyObject *obj, PyObject *type) {
    FieldSum *sum = (FieldSum *)self;
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    Py_ssize_t needed = sum->first > sum->second ? sum->first : sum->second;
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) <= needed) {
        PyErr_Format(PyExc_TypeError, "FieldSum needs a tuple of more than %zd items", needed);
        return NULL;
    }
    PyObject *first = PyTuple_GET_ITEM(obj, sum->first);
    PyObject *second = sum->second >= 0 ? PyTuple_GET_ITEM(obj, sum->second) : NULL;
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(first, &overflow), other = 0;
    if (value == -1 && PyErr_Occurred())
        return NULL;
    if (second != NULL && !overflow) {
        other = PyLong_AsLongLongAndOverflow(second, &overflow);
        if (other == -1 && PyErr_Occurred())
            return NULL;
    }
    if (!overflow && !__builtin_add_overflow(value, other, &value) &&
        !__builtin_add_overflow(value, sum->constant, &value))
        return PyLong_FromLongLong(value);
    PyObject *constant = PyLong_FromLongLong(sum->constant);  /* beyond int64: Python's arithmetic */
    PyObject *partial = constant == NULL ? NULL : PyNumber_Add(first, constant);
    PyObject *result = partial == NULL || second == NULL ? Py_XNewRef(partial) : PyNumber_Add(partial, second);
    Py_XDECREF(constant);
    Py_XDECREF(partial);
    return result;
}

static PyObject *field_sum_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t first, second;
    long long constant;
    if (!PyArg_ParseTuple(args, "nnL:FieldSum", &first, &second, &constant))
        return NULL;
    if (first < 0 || second < -1) {
        PyErr_SetString(PyExc_ValueError, "FieldSum(first, second, constant): items from 0, second -1 for none");
        return NULL;
    }
    FieldSum *sum = (FieldSum *)type->tp_alloc(type, 0);
    if (sum != NULL) {
        sum->first = first;
        sum->second = second;
        sum->constant = constant;
    }
    return (PyObject *)sum;
}

static PyTypeObject FieldSumType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.records._batch.FieldSum",
    .tp_basicsize = sizeof(FieldSum),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FieldSum(first, second, constant): a read-only attribute of a tuple subclass, item `first` plus\n"
              "item `second` (-1: none) plus `constant`.",
    .tp_new = field_sum_new,
    .tp_descr_get = field_sum_get,
};

static PyMethodDef methods[] = {
    {"validate_batches", (PyCFunction)(void (*)(void))validate_batches, METH_FASTCALL,
     "validate_batches(data, from_leader, header_class) -> [header_class]: the headers of the v2 batches laid end\n"
     "to end in `data`, after the checks batch.validate_batches describes; Refused(code, message) if one fails."},
    {"hop_to_offset", (PyCFunction)(void (*)(void))hop_to_offset, METH_FASTCALL,
     "hop_to_offset(chunk, at, end, offset) -> (code, at): hopping from the batch at `at` of `chunk` (positions\n"
     "relative to its start; `end`, the end of the file's data), HOP_AT the first batch whose last offset is >=\n"
     "`offset`, HOP_NONE if none comes before `end` or a header is no plausible v2 batch, HOP_NEEDS_BYTES when\n"
     "the header at `at` is not all in `chunk` (read more from there)."},
    {"hop_whole_batches", (PyCFunction)(void (*)(void))hop_whole_batches, METH_FASTCALL,
     "hop_whole_batches(chunk, at, end, limit, max_offset) -> (code, at): HOP_AT the end of the run of whole\n"
     "batches from `at` that end by `limit` and start below `max_offset` (None: no bound), stopping at an\n"
     "implausible length; HOP_NEEDS_BYTES when a header's first 12 bytes are not all in `chunk`."},
    {"rebased", (PyCFunction)(void (*)(void))rebased, METH_FASTCALL,
     "rebased(header, base_offset, partition_leader_epoch) -> header: a copy with that base offset and epoch (None:\n"
     "its own), as the log stamps them."},
    {"stamped", (PyCFunction)(void (*)(void))stamped, METH_FASTCALL,
     "stamped(header, base_offset, partition_leader_epoch=None) -> (head, header): what the log stamps on one batch\n"
     "without LogAppendTime: its first 16 bytes as they are to be written (base offset, length, leader epoch, all\n"
     "before the CRC'd part) and its header after; None keeps the batch's own epoch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_batch", .m_doc = "Record batch v2 header checks.", .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__batch(void) {
    PyObject *crc32c = PyImport_ImportModule("odradek.records._crc32c");  /* PyCapsule_Import only looks it up */
    if (crc32c == NULL)
        return NULL;
    Py_DECREF(crc32c);
    extend = (crc_extend)PyCapsule_Import("odradek.records._crc32c.extend", 0);
    if (extend == NULL)
        return NULL;
    if (PyType_Ready(&FieldSumType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Refused = PyErr_NewExceptionWithDoc("odradek.records._batch.Refused",
                                        "A batch refused: args are (Kafka error code, message).", NULL, NULL);
    if (Refused == NULL || PyModule_AddObjectRef(m, "Refused", Refused) < 0 ||
        PyModule_AddObjectRef(m, "FieldSum", (PyObject *)&FieldSumType) < 0 ||
        PyModule_AddIntConstant(m, "HOP_AT", HOP_AT) < 0 ||
        PyModule_AddIntConstant(m, "HOP_NEEDS_BYTES", HOP_NEEDS_BYTES) < 0 ||
        PyModule_AddIntConstant(m, "HOP_NONE", HOP_NONE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
