/* The protocol's decoders: one Decoder object per (struct, version) of a schema, run over untrusted bytes.
 *
 * codec.py turns a schema and a version into a Decoder: the struct's class, the fields that version leaves out
 * (set to their defaults), the fields it carries in wire order and its tagged fields. Calling the Decoder,
 * `dec(buffer, pos) -> (obj, pos)`, reads one value of the struct starting at `pos`: it makes the object as
 * object.__new__ does and writes each field straight into its __slots__ slot. Done in Python, the same work was a
 * generated function per version whose interpretation of every length, varint and slice cost 3 us for a one-record
 * Produce; here it is a loop over a few C structs.
 *
 * What comes out is what the schema says: ints, bools, floats, str (strict UTF-8), bytes, uuid.UUID, lists, nested
 * structs, None where a nullable length is negative; a `records` field is a slice of the buffer object itself (a
 * memoryview stays a zero-copy view). Every length is checked against the end of the buffer before it is used, a
 * negative one where the field is not nullable is refused, a varint longer than 5 bytes too: all of them raise
 * ProtocolError (codec.run_decoder turns a bad UTF-8 string's UnicodeDecodeError into one as well).
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

typedef struct Decoder Decoder;

typedef struct {
    Py_ssize_t offset;  /* of the field's slot in the object */
    int type, nullable, compact;
    int element;        /* W_ARRAY: the element's type */
    Decoder *sub;       /* W_STRUCT, or an array of them: the struct's decoder (owned) */
    long long tag;      /* tagged fields only */
} Field;

typedef struct {
    Py_ssize_t offset;
    int how;
    PyObject *value;    /* DEFAULT_VALUE: the value (shared); DEFAULT_NEW_STRUCT: the class to call (owned) */
} Default;

struct Decoder {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    int flexible;
    Py_ssize_t n_defaults, n_fields, n_tagged;
    Default *defaults;
    Field *fields;
    Field *tagged;
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

static PyObject *decode_struct(Decoder *d, const Input *in, Py_ssize_t *pos);

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
                              Decoder *sub) {
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

static PyObject *decode_struct(Decoder *d, const Input *in, Py_ssize_t *pos) {
    if (Py_EnterRecursiveCall(" while decoding a struct"))
        return NULL;
    PyObject *obj = d->cls->tp_alloc(d->cls, 0);
    if (obj == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < d->n_defaults; i++) {
        const Default *def = &d->defaults[i];
        PyObject *value;
        if (def->how == DEFAULT_NEW_LIST)
            value = PyList_New(0);
        else if (def->how == DEFAULT_NEW_STRUCT)
            value = PyObject_CallNoArgs(def->value);
        else
            value = Py_NewRef(def->value);
        if (value == NULL)
            goto fail;
        set_slot(obj, def->offset, value);
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

static PyObject *decoder_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a decoder takes (buffer, pos)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Input in = {.buf = view.buf, .end = view.len, .source = args[0]};
    PyObject *result = NULL;
    if (pos < 0 || pos > view.len) {
        truncated();
    } else {
        PyObject *obj = decode_struct((Decoder *)self, &in, &pos);
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

static PyTypeObject DecoderType;

/* fields: (name, type, nullable, compact, element, sub decoder or None) each; tagged: the same with the tag first. */
static int parse_fields(Decoder *d, PyObject *seq, int with_tag, Field **out, Py_ssize_t *count) {
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
        PyObject *name, *sub;
        long long tag = 0;
        int ok = with_tag
            ? PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "LUiiiiO", &tag, &name, &f->type, &f->nullable,
                               &f->compact, &f->element, &sub)
            : PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "UiiiiO", &name, &f->type, &f->nullable,
                               &f->compact, &f->element, &sub);
        if (!ok || slot_offset(d->cls, name, &f->offset) < 0) {
            Py_DECREF(items);
            return -1;
        }
        f->tag = tag;
        int structs = f->type == W_STRUCT || (f->type == W_ARRAY && f->element == W_STRUCT);
        if (f->type < W_BOOL || f->type > W_STRUCT || (f->type == W_ARRAY && (f->element < W_BOOL ||
                                                                                  f->element > W_STRUCT ||
                                                                                  f->element == W_ARRAY)) ||
            structs != (sub != Py_None) || (structs && !Py_IS_TYPE(sub, &DecoderType))) {
            Py_DECREF(items);
            PyErr_SetString(PyExc_ValueError, "a field's type, element and decoder do not fit together");
            return -1;
        }
        f->sub = structs ? (Decoder *)Py_NewRef(sub) : NULL;
        *count = i + 1;
    }
    Py_DECREF(items);
    return 0;
}

static PyObject *decoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *cls, *defaults, *fields, *tagged;
    int flexible;
    static char *names[] = {"cls", "flexible", "defaults", "fields", "tagged", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!pOOO", names, &PyType_Type, &cls, &flexible, &defaults,
                                     &fields, &tagged))
        return NULL;
    Decoder *d = (Decoder *)type->tp_alloc(type, 0);
    if (d == NULL)
        return NULL;
    d->vectorcall = decoder_call;
    d->cls = (PyTypeObject *)Py_NewRef(cls);
    d->flexible = flexible;
    PyObject *items = PySequence_Fast(defaults, "defaults must be a sequence");
    if (items == NULL)
        goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    d->defaults = PyMem_Calloc(n ? n : 1, sizeof(Default));
    if (d->defaults == NULL) {
        Py_DECREF(items);
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Default *def = &d->defaults[i];
        PyObject *name, *value;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "UiO", &name, &def->how, &value) ||
            slot_offset(d->cls, name, &def->offset) < 0) {
            Py_DECREF(items);
            goto fail;
        }
        if (def->how < DEFAULT_VALUE || def->how > DEFAULT_NEW_STRUCT) {
            Py_DECREF(items);
            PyErr_SetString(PyExc_ValueError, "unknown kind of default");
            goto fail;
        }
        def->value = Py_NewRef(value);
        d->n_defaults = i + 1;
    }
    Py_DECREF(items);
    if (parse_fields(d, fields, 0, &d->fields, &d->n_fields) < 0 ||
        parse_fields(d, tagged, 1, &d->tagged, &d->n_tagged) < 0)
        goto fail;
    return (PyObject *)d;
fail:
    Py_DECREF(d);
    return NULL;
}

static void clear_fields(Field *fields, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        Py_CLEAR(fields[i].sub);
}

static int decoder_clear(Decoder *d) {
    for (Py_ssize_t i = 0; i < d->n_defaults; i++)
        Py_CLEAR(d->defaults[i].value);
    clear_fields(d->fields, d->n_fields);
    clear_fields(d->tagged, d->n_tagged);
    Py_CLEAR(d->cls);
    return 0;
}

static int decoder_traverse(Decoder *d, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < d->n_defaults; i++)
        Py_VISIT(d->defaults[i].value);
    for (Py_ssize_t i = 0; i < d->n_fields; i++)
        Py_VISIT(d->fields[i].sub);
    for (Py_ssize_t i = 0; i < d->n_tagged; i++)
        Py_VISIT(d->tagged[i].sub);
    Py_VISIT(d->cls);
    return 0;
}

static void decoder_dealloc(Decoder *d) {
    PyObject_GC_UnTrack(d);
    decoder_clear(d);
    PyMem_Free(d->defaults);
    PyMem_Free(d->fields);
    PyMem_Free(d->tagged);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *decoder_repr(Decoder *d) {
    return PyUnicode_FromFormat("<Decoder of %s>", d->cls ? d->cls->tp_name : "?");
}

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.protocol._decode.Decoder",
    .tp_doc = "Decoder(cls, flexible, defaults, fields, tagged): dec(buffer, pos) -> (obj, pos) for one struct "
              "at one version.",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = decoder_new,
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_traverse = (traverseproc)decoder_traverse,
    .tp_clear = (inquiry)decoder_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Decoder, vectorcall),
    .tp_repr = (reprfunc)decoder_repr,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_decode", .m_doc = "Decoders of the protocol's structs, one per version.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__decode(void) {
    if (PyType_Ready(&DecoderType) < 0)
        return NULL;
    PyObject *errors = PyImport_ImportModule("odradek.protocol.errors");
    if (errors == NULL)
        return NULL;
    ProtocolError = PyObject_GetAttrString(errors, "ProtocolError");
    Py_DECREF(errors);
    PyObject *uuid = PyImport_ImportModule("uuid");
    if (ProtocolError == NULL || uuid == NULL)
        return NULL;
    UUIDClass = PyObject_GetAttrString(uuid, "UUID");
    Py_DECREF(uuid);
    BytesKeyword = Py_BuildValue("(s)", "bytes");
    if (UUIDClass == NULL || BytesKeyword == NULL)
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
    if (PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
