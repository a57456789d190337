/* The protocol's codecs: one Decoder and one Encoder object per (struct, version) of a schema.
 *
 * codec.py turns a schema and a version into them: the struct's class, the fields that version carries in wire
 * order, its tagged fields, and the fields it lacks (a decoder sets them to their defaults; a strict encoder
 * refuses a non-ignorable one set away from its default, as Kafka's generated code does). Done in Python, the same
 * work was a generated function per version, and its interpretation of every length, varint and slice cost 3 us
 * to decode a one-record Produce and 2 us to encode its answer; here it is a loop over a few C structs, reading and
 * writing the objects' __slots__ directly.
 *
 * Decoding, `dec(buffer, pos) -> (obj, pos)`, reads one value of the struct from untrusted bytes: it makes the
 * object as object.__new__ does and fills its slots. What comes out is what the schema says: ints, bools, floats,
 * str (strict UTF-8), bytes, uuid.UUID, lists, nested structs, None where a nullable length is negative; a
 * `records` field is a slice of the buffer object itself (a memoryview stays a zero-copy view). Every length is
 * checked against the end of the buffer before it is used, a negative one where the field is not nullable is
 * refused, a varint longer than 5 bytes too: all of them raise ProtocolError (codec.run_decoder turns a bad UTF-8
 * string's UnicodeDecodeError into one as well).
 *
 * Encoding, `enc(obj, chunks)`, appends the bytes of `obj` to the list `chunks`: one bytes chunk for everything in
 * memory, except that a `records` FileRegion (for sendfile) is a chunk of its own, never read here; the encoder's
 * `answer` makes a whole response frame that way, size prefix and header included. An element of an array of
 * structs that is an `Encoded` (the struct encoded ahead) is copied as it is. Numbers out of their field's range
 * raise struct.error, as struct.pack did.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

enum {
    W_BOOL = 1, W_INT8, W_INT16, W_UINT16, W_INT32, W_INT64, W_FLOAT64, W_UUID, W_STRING, W_BYTES, W_RECORDS,
    W_ARRAY, W_STRUCT,
};

enum { DEFAULT_VALUE = 0, DEFAULT_NEW_LIST = 1, DEFAULT_NEW_STRUCT = 2 };

typedef struct Codec Codec;

/* One field of a struct at one version, for either direction. */
typedef struct {
    PyObject *name;           /* owned */
    Py_ssize_t offset;        /* of its __slots__ slot in the struct's objects */
    int type, nullable, compact;
    int element;              /* W_ARRAY: the element's type */
    Codec *sub;               /* W_STRUCT, or an array of them: that struct's codec, of the same direction (owned) */
    long long tag;            /* tagged fields */
    int how;                  /* its default: DEFAULT_VALUE, a new empty list, or a new struct (decoders only) */
    PyObject *default_value;  /* the value, or the struct's class to call (owned) */
} Field;

/* A Decoder or an Encoder: one struct at one version. */
struct Codec {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    int version, flexible;
    Py_ssize_t n_absent, n_fields, n_tagged;
    Field *absent;      /* fields the version lacks: a decoder sets their defaults, a strict encoder checks them */
    Field *fields;      /* the version's fields in wire order */
    Field *tagged;      /* its tagged fields, in tag order */
    PyObject *encoded;  /* encoders: the class of values encoded ahead (codec.Encoded), copied as they are */
};

static PyObject *ProtocolError;  /* odradek.protocol.errors.ProtocolError */
static PyObject *UUIDClass;      /* uuid.UUID */
static PyObject *BytesKeyword;   /* ("bytes",): the keyword names of UUID(bytes=...) */

typedef struct {
    const uint8_t *buf;
    Py_ssize_t end;
    PyObject *source;  /* the buffer object, sliced for records */
} Input;

static int truncated(void) {
    PyErr_SetString(ProtocolError, "frame truncated");
    return -1;
}

static int read_uvarint(const Input *in, Py_ssize_t *pos, long long *out) {
    long long value = 0;
    Py_ssize_t start = *pos;
    for (int i = 0; i < 5; i++) {
        if (start + i >= in->end)
            return truncated();
        uint8_t b = in->buf[start + i];
        value |= (long long)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *pos = start + i + 1;
            *out = value;
            return 0;
        }
    }
    PyErr_Format(ProtocolError, "varint longer than 5 bytes at offset %zd", start);
    return -1;
}

static inline uint64_t big_endian(const uint8_t *p, int size) {
    uint64_t v = 0;
    for (int i = 0; i < size; i++)
        v = (v << 8) | p[i];
    return v;
}

/* A length prefix: a compact one (unsigned varint, minus one) or an int16 (strings) / int32 (the rest). */
static int read_length(const Input *in, Py_ssize_t *pos, int compact, int type, long long *n) {
    if (compact) {
        if (read_uvarint(in, pos, n) < 0)
            return -1;
        *n -= 1;
        return 0;
    }
    int size = type == W_STRING ? 2 : 4;
    if (*pos + size > in->end)
        return truncated();
    uint64_t raw = big_endian(in->buf + *pos, size);
    *n = size == 2 ? (long long)(int16_t)raw : (long long)(int32_t)raw;
    *pos += size;
    return 0;
}

static const int FIXED_SIZE[] = {
    [W_BOOL] = 1, [W_INT8] = 1, [W_INT16] = 2, [W_UINT16] = 2, [W_INT32] = 4, [W_INT64] = 8, [W_FLOAT64] = 8,
    [W_UUID] = 16,
};

static PyObject *decode_struct(Codec *d, const Input *in, Py_ssize_t *pos);

/* One fixed-size value at `p` (its bytes are known to be there). */
static PyObject *fixed_value(int type, const uint8_t *p) {
    switch (type) {
    case W_BOOL: return PyBool_FromLong(p[0] != 0);
    case W_INT8: return PyLong_FromLong((int8_t)p[0]);
    case W_INT16: return PyLong_FromLong((int16_t)big_endian(p, 2));
    case W_UINT16: return PyLong_FromLong((long)big_endian(p, 2));
    case W_INT32: return PyLong_FromLong((int32_t)big_endian(p, 4));
    case W_INT64: return PyLong_FromLongLong((int64_t)big_endian(p, 8));
    case W_FLOAT64: {
        uint64_t bits = big_endian(p, 8);
        double value;
        memcpy(&value, &bits, sizeof value);
        return PyFloat_FromDouble(value);
    }
    case W_UUID: {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)p, 16);
        if (raw == NULL)
            return NULL;
        PyObject *args[] = {raw};
        PyObject *value = PyObject_Vectorcall(UUIDClass, args, 0, BytesKeyword);
        Py_DECREF(raw);
        return value;
    }
    }
    PyErr_SetString(PyExc_SystemError, "not a fixed-size type");
    return NULL;
}

/* A value of `type`; `nullable` and `compact` as the field says, `element` and `sub` for arrays and structs. */
static PyObject *decode_value(const Input *in, Py_ssize_t *pos, int type, int nullable, int compact, int element,
                              Codec *sub) {
    if (type <= W_UUID) {
        int size = FIXED_SIZE[type];
        if (*pos + size > in->end) {
            truncated();
            return NULL;
        }
        PyObject *value = fixed_value(type, in->buf + *pos);
        *pos += size;
        return value;
    }
    if (type == W_STRUCT) {
        if (nullable) {
            if (*pos + 1 > in->end) {
                truncated();
                return NULL;
            }
            if ((int8_t)in->buf[(*pos)++] < 0)
                Py_RETURN_NONE;
        }
        return decode_struct(sub, in, pos);
    }
    long long n;
    if (read_length(in, pos, compact, type, &n) < 0)
        return NULL;
    if (n < 0) {
        if (nullable || type == W_RECORDS)
            Py_RETURN_NONE;
        PyErr_Format(ProtocolError, "negative length %lld for a non-nullable field", n);
        return NULL;
    }
    if (type == W_ARRAY) {
        int size = element <= W_UUID ? FIXED_SIZE[element] : 1;
        if (n > (in->end - *pos) / size) {
            truncated();
            return NULL;
        }
        PyObject *list = PyList_New((Py_ssize_t)n);
        if (list == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
            PyObject *item = decode_value(in, pos, element, 0, compact, 0, sub);
            if (item == NULL) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, i, item);
        }
        return list;
    }
    if (n > in->end - *pos) {
        truncated();
        return NULL;
    }
    const char *start = (const char *)in->buf + *pos;
    Py_ssize_t stop = *pos + (Py_ssize_t)n;
    PyObject *value;
    if (type == W_STRING) {
        value = PyUnicode_DecodeUTF8(start, (Py_ssize_t)n, NULL);
    } else if (type == W_BYTES) {
        value = PyBytes_FromStringAndSize(start, (Py_ssize_t)n);
    } else {
        PyObject *from = PyLong_FromSsize_t(*pos), *to = PyLong_FromSsize_t(stop), *slice = NULL;
        if (from != NULL && to != NULL)
            slice = PySlice_New(from, to, NULL);
        Py_XDECREF(from);
        Py_XDECREF(to);
        value = slice == NULL ? NULL : PyObject_GetItem(in->source, slice);
        Py_XDECREF(slice);
    }
    if (value != NULL)
        *pos = stop;
    return value;
}

static inline void set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) {
    PyObject **slot = (PyObject **)((char *)obj + offset);
    PyObject *old = *slot;
    *slot = value;
    Py_XDECREF(old);
}

static PyObject *decode_field(const Input *in, Py_ssize_t *pos, const Field *f) {
    return decode_value(in, pos, f->type, f->nullable, f->compact, f->element, f->sub);
}

/* A new reference to the default of field `f`. */
static PyObject *default_of(const Field *f) {
    if (f->how == DEFAULT_NEW_LIST)
        return PyList_New(0);
    if (f->how == DEFAULT_NEW_STRUCT)
        return PyObject_CallNoArgs(f->default_value);
    return Py_NewRef(f->default_value);
}

static PyObject *decode_struct(Codec *d, const Input *in, Py_ssize_t *pos) {
    if (Py_EnterRecursiveCall(" while decoding a struct"))
        return NULL;
    PyObject *obj = d->cls->tp_alloc(d->cls, 0);
    if (obj == NULL)
        goto fail;
    for (int list = 0; list < 2; list++) {  /* the version's absent fields, and its tagged ones until a tag says */
        const Field *defaults = list ? d->tagged : d->absent;
        for (Py_ssize_t i = 0, n = list ? d->n_tagged : d->n_absent; i < n; i++) {
            PyObject *value = default_of(&defaults[i]);
            if (value == NULL)
                goto fail;
            set_slot(obj, defaults[i].offset, value);
        }
    }
    for (Py_ssize_t i = 0; i < d->n_fields; i++) {
        PyObject *value = decode_field(in, pos, &d->fields[i]);
        if (value == NULL)
            goto fail;
        set_slot(obj, d->fields[i].offset, value);
    }
    if (d->flexible) {
        if (*pos >= in->end) {
            truncated();
            goto fail;
        }
        long long count, tag, size;
        if (read_uvarint(in, pos, &count) < 0)
            goto fail;
        for (long long t = 0; t < count; t++) {
            if (read_uvarint(in, pos, &tag) < 0 || read_uvarint(in, pos, &size) < 0)
                goto fail;
            if (size > in->end - *pos) {
                truncated();
                goto fail;
            }
            Py_ssize_t after = *pos + (Py_ssize_t)size;
            for (Py_ssize_t i = 0; i < d->n_tagged; i++) {
                if (d->tagged[i].tag == tag) {
                    PyObject *value = decode_field(in, pos, &d->tagged[i]);
                    if (value == NULL)
                        goto fail;
                    set_slot(obj, d->tagged[i].offset, value);
                    break;
                }
            }
            *pos = after;  /* a tagged field's size says where the next begins, whatever its value took */
        }
    }
    Py_LeaveRecursiveCall();
    return obj;
fail:
    Py_XDECREF(obj);
    Py_LeaveRecursiveCall();
    return NULL;
}

static PyTypeObject DecoderType, EncoderType;

/* One value of `d`'s struct read from `buffer` at `pos`: (obj, pos after it). */
static PyObject *decode_at(Codec *d, PyObject *buffer, Py_ssize_t pos) {
    Py_buffer view;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Input in = {.buf = view.buf, .end = view.len, .source = buffer};
    PyObject *result = NULL;
    if (pos < 0 || pos > view.len) {
        truncated();
    } else {
        PyObject *obj = decode_struct(d, &in, &pos);
        if (obj != NULL) {
            PyObject *end = PyLong_FromSsize_t(pos);
            result = end == NULL ? NULL : PyTuple_Pack(2, obj, end);
            Py_XDECREF(end);
            Py_DECREF(obj);
        }
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *decoder_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a decoder takes (buffer, pos)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    return decode_at((Codec *)self, args[0], pos);
}

/* A parse failure of untrusted bytes (ProtocolError, or a ValueError such as bad UTF-8) raised again as
 * ProtocolError("malformed <what>: <reason>"); any other error is left as it is. */
static PyObject *malformed(PyObject *what) {
    if (!PyErr_ExceptionMatches(ProtocolError) && !PyErr_ExceptionMatches(PyExc_ValueError))
        return NULL;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject *reason = PyObject_Str(value);
    if (reason != NULL)
        PyErr_Format(ProtocolError, "malformed %S: %U", what, reason);
    Py_XDECREF(reason);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return NULL;
}

/* decoder.run(buffer, pos, what): as a call, with every parse failure a ProtocolError naming `what`. */
static PyObject *decoder_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "run(buffer, pos, what)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    PyObject *result = decode_at((Codec *)self, args[0], pos);
    return result != NULL ? result : malformed(args[2]);
}

static PyObject *RequestHeaderWhat;  /* "request header" */

/* `obj` as a one-dimensional memoryview of bytes: itself if it is one, else one made or cast (frames' rule for any
 * frame, responses too: records fields become slices of it). */
static PyObject *byte_view(PyObject *module, PyObject *obj) {
    if (!PyMemoryView_Check(obj))
        return PyMemoryView_FromObject(obj);
    Py_buffer *b = PyMemoryView_GET_BUFFER(obj);
    if (b->ndim == 1 && (b->format == NULL || strcmp(b->format, "B") == 0))
        return Py_NewRef(obj);
    return PyObject_CallMethod(obj, "cast", "s", "B");
}

/* decode_request(frame, decodings) -> (header, body), or None for a (key, version) not in `decodings`. */
static PyObject *decode_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "decode_request(frame, decodings: dict)");
        return NULL;
    }
    PyObject *frame = byte_view(module, args[0]);
    if (frame == NULL)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(frame);
        return NULL;
    }
    PyObject *result = NULL, *header = NULL, *body = NULL, *key = NULL;
    Input in = {.buf = view.buf, .end = view.len, .source = frame};
    if (view.len < 8) {
        PyErr_Format(ProtocolError, "request frame of %zd bytes is shorter than a header", view.len);
        goto done;
    }
    key = PyLong_FromUnsignedLong((unsigned long)big_endian(in.buf, 4));
    PyObject *decoding = key == NULL ? NULL : PyDict_GetItemWithError(args[1], key);
    if (decoding == NULL) {
        if (!PyErr_Occurred())
            result = Py_NewRef(Py_None);
        goto done;
    }
    /* (header decoder, body decoder, what), looked at directly: PyArg_ParseTuple cost 480 instructions a request */
    if (!PyTuple_Check(decoding) || PyTuple_GET_SIZE(decoding) != 3 ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(decoding, 0), &DecoderType) ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(decoding, 1), &DecoderType) ||
        !PyUnicode_Check(PyTuple_GET_ITEM(decoding, 2))) {
        PyErr_SetString(PyExc_TypeError, "decode_request: a decoding is (header Decoder, body Decoder, str)");
        goto done;
    }
    PyObject *header_decoder = PyTuple_GET_ITEM(decoding, 0), *body_decoder = PyTuple_GET_ITEM(decoding, 1),
             *what = PyTuple_GET_ITEM(decoding, 2);
    Py_ssize_t pos = 0;
    header = decode_struct((Codec *)header_decoder, &in, &pos);
    if (header == NULL) {
        malformed(RequestHeaderWhat);
        goto done;
    }
    body = decode_struct((Codec *)body_decoder, &in, &pos);
    if (body == NULL) {
        malformed(what);
        goto done;
    }
    result = PyTuple_Pack(2, header, body);
done:
    Py_XDECREF(key);
    Py_XDECREF(header);
    Py_XDECREF(body);
    PyBuffer_Release(&view);
    Py_DECREF(frame);
    return result;
}

/* The offset of the __slots__ slot `name` of `cls`. */
static int slot_offset(PyTypeObject *cls, PyObject *name, Py_ssize_t *offset) {
    PyObject *descr = PyObject_GetAttr((PyObject *)cls, name);
    if (descr == NULL)
        return -1;
    int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
             ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
    if (ok)
        *offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%R is not a __slots__ field of %R", name, cls);
        return -1;
    }
    return 0;
}


/* Whether (type, element) names a field type: any type, arrays of anything but arrays. */
static int valid_type(int type, int element) {
    if (type < W_BOOL || type > W_STRUCT)
        return 0;
    return type != W_ARRAY || (element >= W_BOOL && element <= W_STRUCT && element != W_ARRAY);
}

/* Each (name, type, nullable, compact, element, sub codec or None, tag, how, default) of `seq`, for a codec of
 * `type` over `cls`. */
static int parse_fields(PyTypeObject *type, PyTypeObject *cls, PyObject *seq, Field **out, Py_ssize_t *count) {
    PyObject *items = PySequence_Fast(seq, "fields must be a sequence");
    if (items == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    *out = PyMem_Calloc(n ? n : 1, sizeof(Field));
    if (*out == NULL) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return -1;
    }
    *count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Field *f = &(*out)[i];
        PyObject *name, *sub, *default_value;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "UiiiiOLiO", &name, &f->type, &f->nullable,
                              &f->compact, &f->element, &sub, &f->tag, &f->how, &default_value) ||
            slot_offset(cls, name, &f->offset) < 0) {
            Py_DECREF(items);
            return -1;
        }
        int structs = f->type == W_STRUCT || (f->type == W_ARRAY && f->element == W_STRUCT);
        if (!valid_type(f->type, f->element) || structs != (sub != Py_None) || (structs && !Py_IS_TYPE(sub, type)) ||
            f->how < DEFAULT_VALUE || f->how > DEFAULT_NEW_STRUCT ||
            (f->how == DEFAULT_NEW_STRUCT && type == &EncoderType)) {  /* encoders compare with an instance */
            Py_DECREF(items);
            PyErr_SetString(PyExc_ValueError, "a field's type, element, codec and default do not fit together");
            return -1;
        }
        f->name = Py_NewRef(name);
        f->sub = structs ? (Codec *)Py_NewRef(sub) : NULL;
        f->default_value = Py_NewRef(default_value);
        *count = i + 1;
    }
    Py_DECREF(items);
    return 0;
}

static PyObject *decoder_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *encoder_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

/* Decoder(cls, version, flexible, absent, fields, tagged) and Encoder(the same, encoded). */
static PyObject *codec_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *cls, *absent, *fields, *tagged, *encoded = NULL;
    int version, flexible;
    static char *names[] = {"cls", "version", "flexible", "absent", "fields", "tagged", "encoded", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!ipOOO|O!", names, &PyType_Type, &cls, &version, &flexible,
                                     &absent, &fields, &tagged, &PyType_Type, &encoded))
        return NULL;
    int encoder = type == &EncoderType;
    if (encoder != (encoded != NULL) || (encoded && !PyType_IsSubtype((PyTypeObject *)encoded, &PyBytes_Type))) {
        PyErr_SetString(PyExc_TypeError, "an encoder, and only an encoder, takes the class of encoded values (bytes)");
        return NULL;
    }
    Codec *c = (Codec *)type->tp_alloc(type, 0);
    if (c == NULL)
        return NULL;
    c->vectorcall = encoder ? encoder_call : decoder_call;
    c->cls = (PyTypeObject *)Py_NewRef(cls);
    c->encoded = Py_XNewRef(encoded);
    c->version = version;
    c->flexible = flexible;
    if (parse_fields(type, c->cls, absent, &c->absent, &c->n_absent) < 0 ||
        parse_fields(type, c->cls, fields, &c->fields, &c->n_fields) < 0 ||
        parse_fields(type, c->cls, tagged, &c->tagged, &c->n_tagged) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static void clear_fields(Field *fields, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_CLEAR(fields[i].name);
        Py_CLEAR(fields[i].sub);
        Py_CLEAR(fields[i].default_value);
    }
}

static int codec_clear(Codec *c) {
    clear_fields(c->absent, c->n_absent);
    clear_fields(c->fields, c->n_fields);
    clear_fields(c->tagged, c->n_tagged);
    Py_CLEAR(c->cls);
    Py_CLEAR(c->encoded);
    return 0;
}

static int visit_fields(Field *fields, Py_ssize_t n, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_VISIT(fields[i].sub);
        Py_VISIT(fields[i].default_value);
    }
    return 0;
}

static int codec_traverse(Codec *c, visitproc visit, void *arg) {
    int failed = visit_fields(c->absent, c->n_absent, visit, arg) || visit_fields(c->fields, c->n_fields, visit, arg) ||
                 visit_fields(c->tagged, c->n_tagged, visit, arg);
    if (failed)
        return failed;
    Py_VISIT(c->cls);
    Py_VISIT(c->encoded);
    return 0;
}

static void codec_dealloc(Codec *c) {
    PyObject_GC_UnTrack(c);
    codec_clear(c);
    PyMem_Free(c->absent);
    PyMem_Free(c->fields);
    PyMem_Free(c->tagged);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *codec_repr(Codec *c) {
    return PyUnicode_FromFormat("<%s of %s v%d>", Py_TYPE(c)->tp_name, c->cls ? c->cls->tp_name : "?", c->version);
}

/* ---- Initializers ------------------------------------------------------------------------------------------ */

/* `Initializer(cls, fields, new)`: the keyword-only __init__ of a schema class, `fields` its (name, how, default)
 * in declaration order; made, it is set as the class's __init__ and its call (`construct`). A field not given (or
 * given as the `new` marker) gets its default: the value, a new empty list, or a new struct of its class. Written
 * in Python and called through type.__call__, the same cost 0.55 us for a PartitionProduceResponse, one of the
 * objects every answer makes per partition; this, 0.16 us. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *new_marker;
    Py_ssize_t n_fields;
    Field *fields;  /* name (interned), offset, how and default_value used */
} Initializer;

#define MAX_INIT_FIELDS 64  /* a bit each in the mask of given fields */

static PyObject *construct(PyObject *cls, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *InitName;  /* "__init__" */

static PyObject *initializer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *cls, *seq, *new_marker;
    static char *names[] = {"cls", "fields", "new", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OO", names, &PyType_Type, &cls, &seq, &new_marker))
        return NULL;
    PyObject *items = PySequence_Fast(seq, "fields must be a sequence");
    if (items == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    if (n > MAX_INIT_FIELDS) {
        Py_DECREF(items);
        return PyErr_Format(PyExc_ValueError, "at most %d fields", MAX_INIT_FIELDS);
    }
    Initializer *init = (Initializer *)type->tp_alloc(type, 0);
    if (init == NULL || (init->fields = PyMem_Calloc(n ? n : 1, sizeof(Field))) == NULL) {
        Py_DECREF(items);
        Py_XDECREF(init);
        return PyErr_NoMemory();
    }
    init->cls = (PyTypeObject *)Py_NewRef(cls);
    init->new_marker = Py_NewRef(new_marker);
    for (Py_ssize_t i = 0; i < n; i++) {
        Field *f = &init->fields[i];
        PyObject *name, *default_value;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "UiO", &name, &f->how, &default_value) ||
            slot_offset(init->cls, name, &f->offset) < 0) {
            Py_DECREF(items);
            Py_DECREF(init);
            return NULL;
        }
        if (f->how < DEFAULT_VALUE || f->how > DEFAULT_NEW_STRUCT) {
            Py_DECREF(items);
            Py_DECREF(init);
            return PyErr_Format(PyExc_ValueError, "no default kind %d", f->how);
        }
        f->name = Py_NewRef(name);
        PyUnicode_InternInPlace(&f->name);  /* keywords are interned: found by identity */
        f->default_value = Py_NewRef(default_value);
        init->n_fields = i + 1;
    }
    Py_DECREF(items);
    if (PyObject_SetAttr(cls, InitName, (PyObject *)init) < 0) {
        Py_DECREF(init);
        return NULL;
    }
    init->cls->tp_vectorcall = construct;  /* after the __init__ is set: the class, called, fills its objects here */
    return (PyObject *)init;
}

/* The index of the field named `key`, or -1. */
static Py_ssize_t field_index(const Initializer *init, PyObject *key) {
    for (Py_ssize_t i = 0; i < init->n_fields; i++)
        if (init->fields[i].name == key)
            return i;
    for (Py_ssize_t i = 0; i < init->n_fields; i++)
        if (PyUnicode_Check(key) && PyUnicode_Compare(init->fields[i].name, key) == 0)
            return i;
    return -1;
}

/* Field `key` of `obj` set to `value` (the `new` marker leaves it to its default), marked in `given`. */
static int set_given(const Initializer *init, PyObject *obj, PyObject *key, PyObject *value, uint64_t *given) {
    Py_ssize_t i = field_index(init, key);
    if (i < 0) {
        PyErr_Format(PyExc_TypeError, "%s.__init__() got an unexpected keyword argument %R", init->cls->tp_name, key);
        return -1;
    }
    if (value != init->new_marker) {
        *given |= (uint64_t)1 << i;
        set_slot(obj, init->fields[i].offset, Py_NewRef(value));
    }
    return 0;
}

/* Every field of `obj` not in `given` set to its default. */
static int set_defaults(const Initializer *init, PyObject *obj, uint64_t given) {
    for (Py_ssize_t i = 0; i < init->n_fields; i++) {
        if (!(given & ((uint64_t)1 << i))) {
            PyObject *value = default_of(&init->fields[i]);
            if (value == NULL)
                return -1;
            set_slot(obj, init->fields[i].offset, value);
        }
    }
    return 0;
}

static PyObject *positional(const Initializer *init) {
    return PyErr_Format(PyExc_TypeError, "%s.__init__() takes keyword arguments only", init->cls->tp_name);
}

/* init(obj, **fields): __init__ called as a method (super().__init__, or a class whose call is not `construct`). */
static PyObject *initializer_call(Initializer *init, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) != 1 || !PyObject_TypeCheck(PyTuple_GET_ITEM(args, 0), init->cls))
        return positional(init);
    PyObject *obj = PyTuple_GET_ITEM(args, 0);
    uint64_t given = 0;
    if (kwargs != NULL) {
        Py_ssize_t position = 0;
        PyObject *key, *value;
        while (PyDict_Next(kwargs, &position, &key, &value))
            if (set_given(init, obj, key, value, &given) < 0)
                return NULL;
    }
    if (set_defaults(init, obj, given) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyTypeObject InitializerType;

/* cls(**fields), the class's own vectorcall: the object made as object.__new__ makes it and filled by its
 * Initializer, without the keyword dict, argument tuple and method lookup of type.__call__. A class whose
 * __init__ is no longer its Initializer is called as any class is. */
static PyObject *construct(PyObject *cls, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *found = PyDict_GetItemWithError(type->tp_dict, InitName);
    if (found == NULL || !Py_IS_TYPE(found, &InitializerType) || ((Initializer *)found)->cls != type) {
        if (PyErr_Occurred())
            return NULL;
        return _PyObject_MakeTpCall(PyThreadState_Get(), cls, args, PyVectorcall_NARGS(nargsf), kwnames);
    }
    Initializer *init = (Initializer *)found;
    if (PyVectorcall_NARGS(nargsf))
        return positional(init);
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL)
        return NULL;
    uint64_t given = 0;
    for (Py_ssize_t i = 0, n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0; i < n; i++) {
        if (set_given(init, obj, PyTuple_GET_ITEM(kwnames, i), args[i], &given) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    if (set_defaults(init, obj, given) < 0) {
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

/* As a method: bound to an instance (the flag Py_TPFLAGS_METHOD_DESCRIPTOR spares __init__ calls the binding). */
static PyObject *initializer_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int initializer_clear(Initializer *init) {
    clear_fields(init->fields, init->n_fields);
    Py_CLEAR(init->cls);
    Py_CLEAR(init->new_marker);
    return 0;
}

static int initializer_traverse(Initializer *init, visitproc visit, void *arg) {
    int failed = visit_fields(init->fields, init->n_fields, visit, arg);
    if (failed)
        return failed;
    Py_VISIT(init->cls);
    Py_VISIT(init->new_marker);
    return 0;
}

static void initializer_dealloc(Initializer *init) {
    PyObject_GC_UnTrack(init);
    initializer_clear(init);
    PyMem_Free(init->fields);
    Py_TYPE(init)->tp_free((PyObject *)init);
}

static PyTypeObject InitializerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "odradek.protocol._codec.Initializer",
    .tp_basicsize = sizeof(Initializer),
    .tp_doc = "Initializer(cls, fields, new): the keyword-only __init__ of a schema class.",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR, .tp_new = initializer_new,
    .tp_dealloc = (destructor)initializer_dealloc, .tp_traverse = (traverseproc)initializer_traverse,
    .tp_clear = (inquiry)initializer_clear, .tp_call = (ternaryfunc)initializer_call,
    .tp_descr_get = initializer_get,
};

/* ---- Encoders ---------------------------------------------------------------------------------------------- */

static PyObject *StructError;  /* struct.error: what struct.pack raised for a number out of its field's range */
static PyObject *FileRegionClass;

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    PyObject *chunks;  /* the list the encoder appends to; NULL where everything must stay in `data` */
    Py_ssize_t done;   /* bytes already in `chunks` (file regions by their length) */
} Out;

static int reserve(Out *out, Py_ssize_t n) {
    if (out->len + n <= out->cap)
        return 0;
    Py_ssize_t cap = out->cap ? out->cap : 256;
    while (cap < out->len + n)
        cap *= 2;
    char *data = PyMem_Realloc(out->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->data = data;
    out->cap = cap;
    return 0;
}

static int put(Out *out, const void *bytes, Py_ssize_t n) {
    if (n == 0)
        return 0;
    if (reserve(out, n) < 0)
        return -1;
    memcpy(out->data + out->len, bytes, n);
    out->len += n;
    return 0;
}

static int put_big_endian(Out *out, uint64_t value, int size) {
    if (reserve(out, size) < 0)
        return -1;
    for (int i = size - 1; i >= 0; i--) {
        out->data[out->len + i] = (char)(value & 0xFF);
        value >>= 8;
    }
    out->len += size;
    return 0;
}

static int put_uvarint(Out *out, uint64_t value) {
    uint8_t bytes[10];
    int n = 0;
    while (value > 0x7F) {
        bytes[n++] = (uint8_t)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    bytes[n++] = (uint8_t)value;
    return put(out, bytes, n);
}

/* What is in `data` so far, as one bytes chunk of the output list. */
static int flush_chunk(Out *out) {
    if (out->len == 0)
        return 0;
    PyObject *chunk = PyBytes_FromStringAndSize(out->data, out->len);
    if (chunk == NULL)
        return -1;
    int failed = PyList_Append(out->chunks, chunk);
    Py_DECREF(chunk);
    out->done += out->len;
    out->len = 0;
    return failed;
}

/* A FileRegion of `length` bytes as a chunk of its own, after what came before it. */
static int put_region(Out *out, PyObject *region, Py_ssize_t length) {
    if (out->chunks == NULL) {
        PyErr_SetString(PyExc_TypeError, "a file region cannot be encoded inside a tagged field");
        return -1;
    }
    if (flush_chunk(out) < 0 || PyList_Append(out->chunks, region) < 0)
        return -1;
    out->done += length;
    return 0;
}

static int put_length(Out *out, Py_ssize_t n, int compact, int type) {
    if (compact)
        return put_uvarint(out, (uint64_t)(n + 1));
    if (type == W_STRING) {
        if (n > 32767) {
            PyErr_Format(StructError, "a string of %zd bytes is longer than an int16 length allows", n);
            return -1;
        }
        return put_big_endian(out, (uint16_t)(int16_t)n, 2);
    }
    if (n > INT32_MAX) {
        PyErr_Format(StructError, "a length of %zd does not fit an int32", n);
        return -1;
    }
    return put_big_endian(out, (uint32_t)(int32_t)n, 4);
}

static int put_integer(Out *out, PyObject *value, int size, long long lo, long long hi, const char *what) {
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(value, &overflow);  /* an int, or anything with __index__ */
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (overflow || n < lo || n > hi) {
        PyErr_Format(StructError, "%s requires %lld <= number <= %lld", what, lo, hi);
        return -1;
    }
    return put_big_endian(out, (uint64_t)n, size);
}

static int encode_struct(Codec *e, PyObject *obj, Out *out);

static int put_fixed(Out *out, int type, PyObject *value) {
    switch (type) {
    case W_BOOL: {
        int truth = PyObject_IsTrue(value);
        if (truth < 0)
            return -1;
        uint8_t byte = (uint8_t)truth;
        return put(out, &byte, 1);
    }
    case W_INT8: return put_integer(out, value, 1, INT8_MIN, INT8_MAX, "int8");
    case W_INT16: return put_integer(out, value, 2, INT16_MIN, INT16_MAX, "int16");
    case W_UINT16: return put_integer(out, value, 2, 0, UINT16_MAX, "uint16");
    case W_INT32: return put_integer(out, value, 4, INT32_MIN, INT32_MAX, "int32");
    case W_INT64: return put_integer(out, value, 8, INT64_MIN, INT64_MAX, "int64");
    case W_FLOAT64: {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return put_big_endian(out, bits, 8);
    }
    case W_UUID: {
        PyObject *raw = PyObject_GetAttrString(value, "bytes");
        if (raw == NULL)
            return -1;
        char bytes[16] = {0};
        char *data;
        Py_ssize_t n;
        int failed = PyBytes_AsStringAndSize(raw, &data, &n);
        if (!failed)
            memcpy(bytes, data, n < 16 ? n : 16);
        Py_DECREF(raw);
        return failed ? -1 : put(out, bytes, 16);
    }
    }
    PyErr_SetString(PyExc_SystemError, "not a fixed-size type");
    return -1;
}

static int put_value(Codec *owner, Out *out, PyObject *value, int type, int nullable, int compact, int element,
                     Codec *sub) {
    if (type <= W_UUID)
        return put_fixed(out, type, value);
    if (type == W_STRUCT) {
        if (nullable) {
            uint8_t marker = value == Py_None ? 0xFF : 1;
            if (put(out, &marker, 1) < 0)
                return -1;
            if (value == Py_None)
                return 0;
        }
        return encode_struct(sub, value, out);
    }
    if (value == Py_None && (nullable || type == W_RECORDS))
        return put_length(out, -1, compact, type);
    if (type == W_STRING) {
        Py_ssize_t n;
        const char *text = PyUnicode_AsUTF8AndSize(value, &n);
        if (text == NULL || put_length(out, n, compact, type) < 0)
            return -1;
        return put(out, text, n);
    }
    if (type == W_ARRAY) {
        PyObject *items = PySequence_Fast(value, "an array field holds a sequence");
        if (items == NULL)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
        int failed = put_length(out, n, compact, W_ARRAY);
        for (Py_ssize_t i = 0; i < n && !failed; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(items, i);
            if (element == W_STRUCT && (PyObject *)Py_TYPE(item) == owner->encoded)
                failed = put(out, PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item));
            else
                failed = put_value(owner, out, item, element, 0, compact, 0, sub);
        }
        Py_DECREF(items);
        return failed ? -1 : 0;
    }
    if (type == W_RECORDS && (PyObject *)Py_TYPE(value) == FileRegionClass) {
        PyObject *length = PyObject_GetAttrString(value, "length");
        if (length == NULL)
            return -1;
        Py_ssize_t n = PyLong_AsSsize_t(length);
        Py_DECREF(length);
        if ((n == -1 && PyErr_Occurred()) || put_length(out, n, compact, type) < 0)
            return -1;
        return put_region(out, value, n);
    }
    Py_buffer view;  /* bytes, or records in memory */
    if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0)
        return -1;
    int failed = put_length(out, view.len, compact, type);
    if (!failed)
        failed = put(out, view.buf, view.len);
    PyBuffer_Release(&view);
    return failed;
}

/* A new reference to field `f` of `obj`: read from its slot when `obj` is of the encoder's class. */
static PyObject *field_value(Codec *e, PyObject *obj, const Field *f) {
    if (Py_TYPE(obj) == e->cls) {
        PyObject *value = *(PyObject **)((char *)obj + f->offset);
        if (value != NULL)
            return Py_NewRef(value);
    }
    return PyObject_GetAttr(obj, f->name);
}

static int struct_is_default(Codec *e, PyObject *obj);

/* 1 if `value` is field `f`'s default, 0 if not, -1 on error. A struct of the field's class is compared field by
 * field through its encoder (what it would put on the wire against what its default would), not with its Python
 * __eq__: Fetch's answer has three tagged struct fields per partition, and their __eq__ was 3% of a Fetch. */
static int is_default(const Field *f, PyObject *value) {
    if (value == f->default_value)
        return 1;
    if (f->how == DEFAULT_NEW_LIST)
        return PyObject_Not(value);
    if (f->default_value == Py_None)
        return value == Py_None;
    if (f->type == W_STRUCT && Py_TYPE(value) == f->sub->cls && Py_TYPE(f->default_value) == f->sub->cls)
        return struct_is_default(f->sub, value);
    return PyObject_RichCompareBool(value, f->default_value, Py_EQ);
}

/* 1 if every field encoder `e` looks at in `obj` (of its class) is at its default, 0 if not, -1 on error. */
static int struct_is_default(Codec *e, PyObject *obj) {
    const Field *lists[3] = {e->absent, e->fields, e->tagged};
    const Py_ssize_t counts[3] = {e->n_absent, e->n_fields, e->n_tagged};
    if (Py_EnterRecursiveCall(" while comparing a struct with its default"))
        return -1;
    int unset = 1;
    for (int list = 0; list < 3 && unset == 1; list++) {
        for (Py_ssize_t i = 0; i < counts[list] && unset == 1; i++) {
            PyObject *value = field_value(e, obj, &lists[list][i]);
            unset = value == NULL ? -1 : is_default(&lists[list][i], value);
            Py_XDECREF(value);
        }
    }
    Py_LeaveRecursiveCall();
    return unset;
}

static int encode_struct(Codec *e, PyObject *obj, Out *out) {
    if (Py_EnterRecursiveCall(" while encoding a struct"))
        return -1;
    int failed = 0;
    for (Py_ssize_t i = 0; i < e->n_absent && !failed; i++) {  /* a strict encoder's: nothing the version lacks */
        const Field *f = &e->absent[i];
        PyObject *value = field_value(e, obj, f);
        int unset = value == NULL ? -1 : is_default(f, value);
        Py_XDECREF(value);
        if (unset == 0)
            PyErr_Format(ProtocolError, "%s.%U is set but does not exist in version %d", Py_TYPE(obj)->tp_name,
                         f->name, e->version);
        failed = unset != 1;
    }
    for (Py_ssize_t i = 0; i < e->n_fields && !failed; i++) {
        const Field *f = &e->fields[i];
        PyObject *value = field_value(e, obj, f);
        failed = value == NULL || put_value(e, out, value, f->type, f->nullable, f->compact, f->element, f->sub) < 0;
        Py_XDECREF(value);
    }
    if (e->flexible && !failed && e->n_tagged == 0) {
        uint8_t none = 0;  /* no tagged fields */
        failed = put(out, &none, 1) < 0;
    } else if (e->flexible && !failed) {
        /* each tagged field away from its default: tag, size, value (encoded apart first, for its size) */
        Out tagged = {0};
        long long count = 0;
        for (Py_ssize_t i = 0; i < e->n_tagged && !failed; i++) {
            const Field *f = &e->tagged[i];
            PyObject *value = field_value(e, obj, f);
            int unset = value == NULL ? -1 : is_default(f, value);
            if (unset == 0) {
                Out one = {0};
                failed = put_value(e, &one, value, f->type, f->nullable, 1, f->element, f->sub) < 0 ||
                         put_uvarint(&tagged, (uint64_t)f->tag) < 0 || put_uvarint(&tagged, one.len) < 0 ||
                         put(&tagged, one.data, one.len) < 0;
                PyMem_Free(one.data);
                count++;
            } else {
                failed = unset < 0;
            }
            Py_XDECREF(value);
        }
        if (!failed)
            failed = put_uvarint(out, (uint64_t)count) < 0 || put(out, tagged.data, tagged.len) < 0;
        PyMem_Free(tagged.data);
    }
    Py_LeaveRecursiveCall();
    return failed ? -1 : 0;
}

static PyObject *encoder_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) ||
        !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "an encoder takes (obj, list of chunks)");
        return NULL;
    }
    Out out = {.chunks = args[1]};
    int failed = encode_struct((Codec *)self, args[0], &out) < 0 || flush_chunk(&out) < 0;
    PyMem_Free(out.data);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

/* answer(correlation_id, flexible_header, body) -> [chunks]: the whole response frame, its size first. */
static PyObject *encoder_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "answer(correlation_id, flexible_header, body)");
        return NULL;
    }
    long correlation_id = PyLong_AsLong(args[0]);
    int flexible_header = PyObject_IsTrue(args[1]);
    if ((correlation_id == -1 && PyErr_Occurred()) || flexible_header < 0)
        return NULL;
    PyObject *chunks = PyList_New(0);
    if (chunks == NULL)
        return NULL;
    Out out = {.chunks = chunks};
    uint8_t tags = 0;
    int failed = put_big_endian(&out, 0, 4) < 0 ||  /* the size, written below */
                 put_big_endian(&out, (uint32_t)correlation_id, 4) < 0 ||
                 (flexible_header && put(&out, &tags, 1) < 0) ||
                 encode_struct((Codec *)self, args[2], &out) < 0;
    if (!failed) {
        Py_ssize_t size = out.done + out.len - 4;
        if (size > INT32_MAX) {
            PyErr_Format(StructError, "a response of %zd bytes is larger than a frame can say", size);
            failed = 1;
        } else {
            failed = flush_chunk(&out) < 0;
            if (!failed) {  /* the first chunk, made here and seen by no one else yet, gets the size */
                char *first = PyBytes_AS_STRING(PyList_GET_ITEM(chunks, 0));
                for (int i = 0; i < 4; i++)
                    first[i] = (char)((uint32_t)size >> (24 - 8 * i));
            }
        }
    }
    PyMem_Free(out.data);
    if (failed) {
        Py_DECREF(chunks);
        return NULL;
    }
    return chunks;
}

static PyMethodDef decoder_methods[] = {
    {"run", (PyCFunction)(void (*)(void))decoder_run, METH_FASTCALL,
     "run(buffer, pos, what) -> (obj, pos): the decoder's call on untrusted bytes, every parse failure (a\n"
     "ProtocolError, or a ValueError such as bad UTF-8) raised as ProtocolError('malformed <what>: <reason>')."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef encoder_methods[] = {
    {"answer", (PyCFunction)(void (*)(void))encoder_answer, METH_FASTCALL,
     "answer(correlation_id, flexible_header, body) -> [chunks]: the response frame of `body`, size prefix and\n"
     "header included: bytes chunks, with each FileRegion of a records field a chunk of its own."},
    {NULL, NULL, 0, NULL},
};

/* The two types differ in name, what a call does (codec_new sets it) and their methods (`run`, `answer`). */
#define CODEC_TYPE(name, doc, methods) {                                                                         \
    PyVarObject_HEAD_INIT(NULL, 0)                                                                                 \
    .tp_name = "odradek.protocol._codec." name, .tp_doc = doc, .tp_basicsize = sizeof(Codec),                      \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, .tp_new = codec_new,          \
    .tp_dealloc = (destructor)codec_dealloc, .tp_traverse = (traverseproc)codec_traverse,                          \
    .tp_clear = (inquiry)codec_clear, .tp_call = PyVectorcall_Call,                                                \
    .tp_vectorcall_offset = offsetof(Codec, vectorcall), .tp_repr = (reprfunc)codec_repr, .tp_methods = methods,   \
}

static PyTypeObject DecoderType = CODEC_TYPE(
    "Decoder", "Decoder(cls, version, flexible, absent, fields, tagged): dec(buffer, pos) -> (obj, pos) for one "
    "struct at one version.", decoder_methods);

static PyTypeObject EncoderType = CODEC_TYPE(
    "Encoder", "Encoder(cls, version, flexible, absent, fields, tagged, encoded): enc(obj, chunks) appends the "
    "encoding of `obj` to the list `chunks`.", encoder_methods);

static PyMethodDef module_methods[] = {
    {"byte_view", (PyCFunction)byte_view, METH_O,
     "byte_view(frame) -> memoryview: `frame` as a one-dimensional view of bytes (itself if it is one), whose slices\n"
     "decoded records fields are."},
    {"decode_request", (PyCFunction)(void (*)(void))decode_request, METH_FASTCALL,
     "decode_request(frame, decodings) -> (header, body) of a request frame (no size prefix), or None when its\n"
     "(api key, version), as one big-endian uint32, is not a key of `decodings`, whose values are (header decoder,\n"
     "body decoder, what a failure names); every parse failure is a ProtocolError, as Decoder.run raises it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_codec", .m_methods = module_methods,
    .m_doc = "Decoders and encoders of the protocol's structs, one per version.",
    .m_size = -1,
};

static PyObject *imported(const char *module_name, const char *name) {
    PyObject *module = PyImport_ImportModule(module_name);
    if (module == NULL)
        return NULL;
    PyObject *value = PyObject_GetAttrString(module, name);
    Py_DECREF(module);
    return value;
}

PyMODINIT_FUNC PyInit__codec(void) {
    if (PyType_Ready(&DecoderType) < 0 || PyType_Ready(&EncoderType) < 0 || PyType_Ready(&InitializerType) < 0)
        return NULL;
    ProtocolError = imported("odradek.protocol.errors", "ProtocolError");
    UUIDClass = imported("uuid", "UUID");
    StructError = imported("struct", "error");
    FileRegionClass = imported("odradek.records.region", "FileRegion");
    BytesKeyword = Py_BuildValue("(s)", "bytes");
    InitName = PyUnicode_InternFromString("__init__");
    RequestHeaderWhat = PyUnicode_FromString("request header");
    if (ProtocolError == NULL || UUIDClass == NULL || StructError == NULL || FileRegionClass == NULL ||
        BytesKeyword == NULL || InitName == NULL || RequestHeaderWhat == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    static const struct { const char *name; int value; } constants[] = {
        {"BOOL", W_BOOL}, {"INT8", W_INT8}, {"INT16", W_INT16}, {"UINT16", W_UINT16}, {"INT32", W_INT32},
        {"INT64", W_INT64}, {"FLOAT64", W_FLOAT64}, {"UUID", W_UUID}, {"STRING", W_STRING}, {"BYTES", W_BYTES},
        {"RECORDS", W_RECORDS}, {"ARRAY", W_ARRAY}, {"STRUCT", W_STRUCT}, {"DEFAULT_VALUE", DEFAULT_VALUE},
        {"DEFAULT_NEW_LIST", DEFAULT_NEW_LIST}, {"DEFAULT_NEW_STRUCT", DEFAULT_NEW_STRUCT},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddObjectRef(m, "Initializer", (PyObject *)&InitializerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
