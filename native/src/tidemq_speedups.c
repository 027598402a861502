/*
 * tidemq_speedups: TideMQ's per-record loops in C. Ten entry points: nine functions and one
 * type, and use_crc32 / crc32_backend, which choose and tell whose crc32 they all use.
 *
 *   stamp_batch  append: validate one producer batch and stamp the broker's fields and the
 *                record CRC into the group's private copy (CommitLog._stamp_and_write).
 *   scan_chunk   dispatch: read CommitLog records into ConsumeQueue units and index entries
 *                (Dispatcher._dispatch_chunk).
 *   index_put    dispatch: chain index entries into an IndexFile (IndexFile.put_hashed).
 *   unit_runs    pull: consume-queue units -> CommitLog runs to copy (StoreReader).
 *   scan_records client: check every record of a pull reply (record.scan_records).
 *   decode_messages client: a pull reply's records as lazy messages (message.decode_records).
 *   scan_positions  Spark source: a pull reply's record positions and queue offsets
 *                (analytics decode.decode_reply).
 *   popped_json  HTTP gateway: a Pop reply's records written as the pop answer's JSON array
 *                (tidemq.gateway.messages.popped_json).
 *   encode_batch client: pack a producer batch's records, CRCs included (record.encode_batch).
 *   Syncer       SYNC_FLUSH group commit for asyncio appends: a thread that fdatasyncs
 *                without ever taking the GIL and reports through an eventfd (syncer.py).
 *
 * Each is an exact replacement for a Python twin that defines the contract and stays the
 * fallback (`<name>_py` in store/loops.py, store/index.py, tidemq.common.record and
 * tidemq.gateway.messages; syncer.PySyncer); hypothesis tests (tests/unit/store/test_loops.py,
 * test_syncer.py, tests/unit/common/test_record.py, tests/unit/gateway/test_popped_json.py)
 * hold the two to identical results. Record layout: tidemq.common.record (big-endian, 88-byte
 * header). Nothing here allocates per record except the Python objects the contract returns
 * (ints, tuples, decode_messages' messages).
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE /* memmem */
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <dlfcn.h>

#define HEADER_SIZE 88
#define MIN_RECORD_SIZE (HEADER_SIZE + 3)
#define FILLER_MIN 8
#define CQ_UNIT_SIZE 20
#define MESSAGE_MAGIC 0xDAA320A7u
#define BLANK_MAGIC 0xCBD43194u

/* header offsets */
#define OFF_CRC 8
#define OFF_QUEUE_ID 12
#define OFF_QUEUE_OFFSET 20
#define OFF_PHYSICAL_OFFSET 28
#define OFF_STORE_TIMESTAMP 56
#define OFF_BODY_LEN 84
#define STAMP_SIZE 16 /* store_timestamp + store_host */

static inline uint32_t rd_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline int64_t rd_i64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)rd_u32(p) << 32) | rd_u32(p + 4));
}

static inline void wr_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void wr_i64(unsigned char *p, int64_t v)
{
    wr_u32(p, (uint32_t)((uint64_t)v >> 32));
    wr_u32(p + 4, (uint32_t)v);
}

/* ISA-L's crc32 (zlib's values, several times faster on a 1 KiB record), found by use_crc32
 * in the python-isal extension the process already loaded; NULL: zlib's. */
typedef uint32_t (*crc32_fn)(uint32_t, const unsigned char *, uint64_t);
static crc32_fn fast_crc32 = NULL;

static inline uint32_t crc_of(uint32_t crc, const unsigned char *p, Py_ssize_t n)
{
    if (fast_crc32 != NULL)
        return fast_crc32(crc, p, (uint64_t)n);
    /* zlib takes uInt lengths; records are far below 4 GiB, but stay correct anyway */
    while (n > 0) {
        uInt take = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)n;
        crc = (uint32_t)crc32(crc, p, take);
        p += take;
        n -= take;
    }
    return crc;
}

/* METH_FASTCALL plumbing shared by every function below. */
static int check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t expected)
{
    if (nargs == expected)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, expected,
                 nargs);
    return -1;
}

static void release_buffers(Py_buffer *views, int n)
{
    while (n-- > 0)
        PyBuffer_Release(&views[n]);
}

/* views[i] of objs[i] with flags[i]; on failure the ones already taken are released. */
static int get_buffers(Py_buffer *views, PyObject *const *objs, const int *flags, int n)
{
    for (int i = 0; i < n; i++) {
        if (PyObject_GetBuffer(objs[i], &views[i], flags[i]) < 0) {
            release_buffers(views, i);
            return -1;
        }
    }
    return 0;
}

/* Arguments of METH_FASTCALL functions as C integers; -1 with an exception set on error. */
static int as_ssize(PyObject *obj, Py_ssize_t *out)
{
    Py_ssize_t v = PyLong_AsSsize_t(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

static int as_i64(PyObject *obj, int64_t *out)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */

PyDoc_STRVAR(stamp_batch_doc,
"stamp_batch(buf, pos, size, topic_field, queue_id, queue_offset, cursor, segment_end,\n"
"            segment_size, max_size, stamp, chunk_phys, chunk_start)\n"
"--\n\n"
"Validate and stamp the records of buf[pos:size] (one producer batch for one queue).\n"
"Returns (pos, queue_offset, cursor, segment_end, chunk_phys, chunk_start,\n"
"physical_offsets, new_chunks), or None if a record is invalid (nothing to trust then:\n"
"the caller asks the Python version for the precise error).");

static PyObject *stamp_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("stamp_batch", nargs, 13))
        return NULL;
    Py_ssize_t pos, size, segment_size, max_size, chunk_start;
    int64_t queue_id, queue_offset, cursor, segment_end, chunk_phys;
    if (as_ssize(args[1], &pos) || as_ssize(args[2], &size) || as_i64(args[4], &queue_id)
        || as_i64(args[5], &queue_offset) || as_i64(args[6], &cursor)
        || as_i64(args[7], &segment_end) || as_ssize(args[8], &segment_size)
        || as_ssize(args[9], &max_size) || as_i64(args[11], &chunk_phys)
        || as_ssize(args[12], &chunk_start))
        return NULL;

    Py_buffer views[3];
    PyObject *const objs[3] = {args[0], args[3], args[10]};
    const int flags[3] = {PyBUF_WRITABLE, PyBUF_SIMPLE, PyBUF_SIMPLE};
    if (get_buffers(views, objs, flags, 3))
        return NULL;
    const Py_buffer *buf = &views[0], *topic = &views[1], *stamp = &views[2];
    PyObject *result = NULL, *offsets = NULL, *chunks = NULL;
    if (stamp->len != STAMP_SIZE || pos < 0 || size > buf->len || segment_size <= 0) {
        PyErr_SetString(PyExc_ValueError, "stamp_batch: bad stamp size or buffer bounds");
        goto done;
    }
    offsets = PyList_New(0);
    chunks = PyList_New(0);
    if (offsets == NULL || chunks == NULL)
        goto done;

    unsigned char *base = (unsigned char *)buf->buf;
    const unsigned char *topic_field = (const unsigned char *)topic->buf;
    const Py_ssize_t topic_len = topic->len;
    int valid = 1;
    while (pos < size) {
        unsigned char *rec = base + pos;
        if (pos + HEADER_SIZE > size) {
            valid = 0;
            break;
        }
        const int32_t total = (int32_t)rd_u32(rec);
        const uint32_t magic = rd_u32(rec + 4);
        const int32_t body_len = (int32_t)rd_u32(rec + OFF_BODY_LEN);
        const Py_ssize_t end = pos + total;
        if (magic != MESSAGE_MAGIC || total < MIN_RECORD_SIZE || end > size || total > max_size) {
            valid = 0;
            break;
        }
        const Py_ssize_t body_end = pos + HEADER_SIZE + (Py_ssize_t)body_len;
        if (!(pos + HEADER_SIZE <= body_end && body_end <= end - 3)) {
            valid = 0;
            break;
        }
        const Py_ssize_t topic_end = body_end + topic_len;
        if (topic_end + 2 > end || memcmp(base + body_end, topic_field, (size_t)topic_len) != 0
            || topic_end + 2 + (Py_ssize_t)((base[topic_end] << 8) | base[topic_end + 1]) != end) {
            valid = 0;
            break;
        }
        if (cursor + total + FILLER_MIN > segment_end) { /* roll: filler, next segment */
            PyObject *chunk = Py_BuildValue("(LnnL)", (long long)chunk_phys, chunk_start, pos,
                                            (long long)cursor);
            if (chunk == NULL || PyList_Append(chunks, chunk) < 0) {
                Py_XDECREF(chunk);
                goto done;
            }
            Py_DECREF(chunk);
            cursor = chunk_phys = segment_end;
            chunk_start = pos;
            segment_end += segment_size;
        }
        wr_u32(rec + OFF_QUEUE_ID, (uint32_t)queue_id);
        wr_i64(rec + OFF_QUEUE_OFFSET, queue_offset);
        wr_i64(rec + OFF_PHYSICAL_OFFSET, cursor);
        memcpy(rec + OFF_STORE_TIMESTAMP, stamp->buf, STAMP_SIZE);
        wr_u32(rec + OFF_CRC, crc_of(0, rec + OFF_QUEUE_ID, total - OFF_QUEUE_ID));
        PyObject *physical = PyLong_FromLongLong(cursor);
        if (physical == NULL || PyList_Append(offsets, physical) < 0) {
            Py_XDECREF(physical);
            goto done;
        }
        Py_DECREF(physical);
        queue_offset += 1;
        cursor += total;
        pos = end;
    }
    if (!valid) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = Py_BuildValue("(nLLLLnOO)", pos, (long long)queue_offset, (long long)cursor,
                           (long long)segment_end, (long long)chunk_phys, chunk_start, offsets,
                           chunks);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(chunks);
    release_buffers(views, 3);
    return result;
}

/* ---------------------------------------------------------------------------------------- */

/* The value of property `name` (with its \x01) in p[start:end): the first occurrence that
 * begins the properties or follows a \x02; the value runs to the next \x02 or to `end`. */
static int property_value(const unsigned char *p, Py_ssize_t start, Py_ssize_t end,
                          const char *name, size_t name_len, Py_ssize_t *value_at,
                          Py_ssize_t *value_end)
{
    Py_ssize_t from = start;
    while (from < end) {
        const unsigned char *hit = memmem(p + from, (size_t)(end - from), name, name_len);
        if (hit == NULL)
            return 0;
        Py_ssize_t at = hit - p;
        if (at == start || p[at - 1] == 0x02) {
            Py_ssize_t v = at + (Py_ssize_t)name_len;
            const unsigned char *stop = memchr(p + v, 0x02, (size_t)(end - v));
            *value_at = v;
            *value_end = stop == NULL ? end : stop - p;
            return 1;
        }
        from = at + 1;
    }
    return 0;
}

static int add_entry(PyObject *entries, uint32_t hashed, int64_t physical, int64_t store_ts)
{
    PyObject *entry = Py_BuildValue("(kLL)", (unsigned long)(hashed & 0x7FFFFFFFu),
                                    (long long)physical, (long long)store_ts);
    if (entry == NULL)
        return -1;
    int rc = PyList_Append(entries, entry);
    Py_DECREF(entry);
    return rc;
}

static int add_run(PyObject *runs, const unsigned char *topic, Py_ssize_t topic_len,
                   int64_t queue_id, int64_t first, Py_ssize_t unit_start, Py_ssize_t unit_end)
{
    PyObject *run = Py_BuildValue("(y#LLnn)", (const char *)topic, topic_len,
                                  (long long)queue_id, (long long)first, unit_start, unit_end);
    if (run == NULL)
        return -1;
    int rc = PyList_Append(runs, run);
    Py_DECREF(run);
    return rc;
}

PyDoc_STRVAR(scan_chunk_doc,
"scan_chunk(chunk, units)\n"
"--\n\n"
"Scan the CommitLog records at the start of `chunk`, packing one ConsumeQueue unit per\n"
"record into `units`. Returns (pos, filler, bad, runs, entries): pos is where scanning\n"
"stopped; filler: a segment's blank filler was reached; bad: no record at pos; runs:\n"
"(topic bytes, queue id, first queue offset, unit start, unit end) per run of consecutive\n"
"offsets of one queue; entries: (key hash, physical offset, store ms) for the index.");

static PyObject *scan_chunk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("scan_chunk", nargs, 2))
        return NULL;
    Py_buffer views[2];
    const int flags[2] = {PyBUF_SIMPLE, PyBUF_WRITABLE};
    if (get_buffers(views, args, flags, 2))
        return NULL;
    const Py_buffer *chunk = &views[0], *units = &views[1];
    PyObject *result = NULL;
    PyObject *runs = PyList_New(0), *entries = PyList_New(0);
    if (runs == NULL || entries == NULL)
        goto done;

    const unsigned char *p = (const unsigned char *)chunk->buf;
    unsigned char *out = (unsigned char *)units->buf;
    const Py_ssize_t size = chunk->len;
    Py_ssize_t pos = 0, unit_at = 0, run_start = 0;
    int filler = 0, bad = 0;
    /* the current run: its queue (topic field = length byte + name, inside chunk) */
    const unsigned char *run_topic = NULL;
    Py_ssize_t run_topic_len = 0;
    int64_t run_queue_id = -1, run_first = 0, run_next = -1;
    uint32_t key_crc = 0; /* crc32 of "topic#": index keys are topic#key */

    while (pos + HEADER_SIZE <= size) {
        const unsigned char *rec = p + pos;
        const int32_t total = (int32_t)rd_u32(rec);
        const uint32_t magic = rd_u32(rec + 4);
        if (magic != MESSAGE_MAGIC || total <= 0) {
            if (magic == BLANK_MAGIC)
                filler = 1;
            else
                bad = 1;
            goto scanned;
        }
        const Py_ssize_t end = pos + total;
        if (end > size)
            goto scanned;
        const int64_t queue_id = (int32_t)rd_u32(rec + OFF_QUEUE_ID);
        const int64_t queue_offset = rd_i64(rec + OFF_QUEUE_OFFSET);
        const int64_t physical = rd_i64(rec + OFF_PHYSICAL_OFFSET);
        const int64_t store_ts = rd_i64(rec + OFF_STORE_TIMESTAMP);
        const int32_t body_len = (int32_t)rd_u32(rec + OFF_BODY_LEN);
        const Py_ssize_t topic_at = pos + HEADER_SIZE + (Py_ssize_t)body_len;
        if (body_len < 0 || topic_at + 1 > end) {
            bad = 1;
            goto scanned;
        }
        const Py_ssize_t topic_len = 1 + p[topic_at]; /* with its length byte */
        const Py_ssize_t props_at = topic_at + topic_len + 2;
        if (props_at > end || props_at - 2 + 2 + ((p[props_at - 2] << 8) | p[props_at - 1]) != end) {
            bad = 1;
            goto scanned;
        }
        int same_queue = queue_id == run_queue_id && topic_len == run_topic_len
                         && memcmp(p + topic_at, run_topic, (size_t)topic_len) == 0;
        if (!same_queue || queue_offset != run_next) {
            if (unit_at > run_start
                && add_run(runs, run_topic + 1, run_topic_len - 1, run_queue_id, run_first,
                           run_start, unit_at) < 0)
                goto done;
            if (!same_queue) {
                run_topic = p + topic_at;
                run_topic_len = topic_len;
                run_queue_id = queue_id;
                key_crc = crc_of(crc_of(0, run_topic + 1, topic_len - 1),
                                 (const unsigned char *)"#", 1);
            }
            run_first = queue_offset;
            run_start = unit_at;
        }
        run_next = queue_offset + 1;

        Py_ssize_t at, stop;
        uint32_t tags_hash = 0;
        if (property_value(p, props_at, end, "TAGS\x01", 5, &at, &stop))
            tags_hash = crc_of(0, p + at, stop - at);
        if (unit_at + CQ_UNIT_SIZE > units->len) {
            PyErr_SetString(PyExc_ValueError, "scan_chunk: units buffer too small");
            goto done;
        }
        wr_i64(out + unit_at, physical);
        wr_u32(out + unit_at + 8, (uint32_t)total);
        wr_i64(out + unit_at + 12, (int64_t)tags_hash);
        unit_at += CQ_UNIT_SIZE;
        if (property_value(p, props_at, end, "UNIQ_KEY\x01", 9, &at, &stop) && stop > at
            && add_entry(entries, crc_of(key_crc, p + at, stop - at), physical, store_ts) < 0)
            goto done;
        if (property_value(p, props_at, end, "KEYS\x01", 5, &at, &stop)) {
            while (at <= stop) { /* keys separated by spaces; empty ones skipped */
                const unsigned char *space = memchr(p + at, ' ', (size_t)(stop - at));
                Py_ssize_t key_end = space == NULL ? stop : space - p;
                if (key_end > at
                    && add_entry(entries, crc_of(key_crc, p + at, key_end - at), physical,
                                 store_ts) < 0)
                    goto done;
                at = key_end + 1;
            }
        }
        pos = end;
    }
    /* fewer than a header's bytes left: a filler (8 bytes) or a record cut by the chunk */
    if (pos + FILLER_MIN <= size && rd_u32(p + pos + 4) == BLANK_MAGIC)
        filler = 1;
scanned:
    if (unit_at > run_start
        && add_run(runs, run_topic + 1, run_topic_len - 1, run_queue_id, run_first, run_start,
                   unit_at) < 0)
        goto done;
    result = Py_BuildValue("(nOOOO)", pos, filler ? Py_True : Py_False, bad ? Py_True : Py_False,
                           runs, entries);
done:
    Py_XDECREF(runs);
    Py_XDECREF(entries);
    release_buffers(views, 2);
    return result;
}

/* ---------------------------------------------------------------------------------------- */

#define INDEX_HEADER_SIZE 40
#define INDEX_ENTRY_SIZE 20

PyDoc_STRVAR(index_put_doc,
"index_put(mm, slots, entries_at, count, begin_ts, end_ts, entries)\n"
"--\n\n"
"Chain (key hash, physical offset, store ms) entries into an IndexFile mapping: entry\n"
"`count` onwards, each slot pointing at its newest entry. Returns (count, end_ts).");

static PyObject *index_put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("index_put", nargs, 7))
        return NULL;
    Py_ssize_t slots, entries_at, count;
    int64_t begin_ts, end_ts;
    if (as_ssize(args[1], &slots) || as_ssize(args[2], &entries_at) || as_ssize(args[3], &count)
        || as_i64(args[4], &begin_ts) || as_i64(args[5], &end_ts))
        return NULL;
    PyObject *entries = PySequence_Fast(args[6], "index_put: entries must be a sequence");
    if (entries == NULL)
        return NULL;
    Py_buffer mm;
    if (PyObject_GetBuffer(args[0], &mm, PyBUF_WRITABLE) < 0) {
        Py_DECREF(entries);
        return NULL;
    }
    PyObject *result = NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(entries);
    if (slots <= 0 || count < 0 || INDEX_HEADER_SIZE + slots * 4 > entries_at
        || entries_at + (count + n) * INDEX_ENTRY_SIZE > mm.len) {
        PyErr_SetString(PyExc_ValueError, "index_put: the entries do not fit the index file");
        goto done;
    }
    unsigned char *base = (unsigned char *)mm.buf;
    PyObject **items = PySequence_Fast_ITEMS(entries);
    for (Py_ssize_t i = 0; i < n; i++) {
        long long hashed, physical, store_ts;
        if (!PyArg_ParseTuple(items[i], "LLL", &hashed, &physical, &store_ts))
            goto done;
        if (hashed < 0) {
            PyErr_SetString(PyExc_ValueError, "index_put: a key hash is negative");
            goto done;
        }
        unsigned char *slot = base + INDEX_HEADER_SIZE + (hashed % slots) * 4;
        int64_t previous = (int32_t)rd_u32(slot);
        if (!(0 <= previous && previous < count))
            previous = 0;
        int64_t diff = store_ts - begin_ts;
        diff = diff < 0 ? 0 : diff / 1000;
        if (diff > 0x7FFFFFFF)
            diff = 0x7FFFFFFF;
        if (store_ts > end_ts)
            end_ts = store_ts;
        unsigned char *entry = base + entries_at + count * INDEX_ENTRY_SIZE;
        wr_u32(entry, (uint32_t)hashed);
        wr_i64(entry + 4, physical);
        wr_u32(entry + 12, (uint32_t)diff);
        wr_u32(entry + 16, (uint32_t)previous);
        wr_u32(slot, (uint32_t)count);
        count += 1;
    }
    result = Py_BuildValue("(nL)", count, (long long)end_ts);
done:
    PyBuffer_Release(&mm);
    Py_DECREF(entries);
    return result;
}

/* ---------------------------------------------------------------------------------------- */

PyDoc_STRVAR(unit_runs_doc,
"unit_runs(units, max_bytes)\n"
"--\n\n"
"The ConsumeQueue units of an unfiltered pull: how many to take (sizes adding up to\n"
"max_bytes, at least one) and the CommitLog runs they make, [(physical offset, length)]:\n"
"a new run wherever a record does not start where the previous one ended.");

static PyObject *unit_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("unit_runs", nargs, 2))
        return NULL;
    int64_t max_bytes;
    if (as_i64(args[1], &max_bytes))
        return NULL;
    Py_buffer raw;
    if (PyObject_GetBuffer(args[0], &raw, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *runs = PyList_New(0);
    const unsigned char *p = (const unsigned char *)raw.buf;
    const Py_ssize_t units = raw.len / CQ_UNIT_SIZE;
    if (runs == NULL || units == 0) {
        if (runs != NULL)
            PyErr_SetString(PyExc_ValueError, "unit_runs: no units");
        goto done;
    }
    int64_t total = 0, run_start = rd_i64(p), run_end = run_start;
    Py_ssize_t take = 0;
    for (Py_ssize_t i = 0; i < units; i++) {
        const unsigned char *unit = p + i * CQ_UNIT_SIZE;
        int64_t physical = rd_i64(unit), size = (int32_t)rd_u32(unit + 8);
        if (take > 0 && total + size > max_bytes)
            break;
        if (physical != run_end) {
            PyObject *run = Py_BuildValue("(LL)", (long long)run_start,
                                          (long long)(run_end - run_start));
            if (run == NULL || PyList_Append(runs, run) < 0) {
                Py_XDECREF(run);
                goto done;
            }
            Py_DECREF(run);
            run_start = physical;
        }
        run_end = physical + size;
        total += size;
        take++;
    }
    PyObject *last = Py_BuildValue("(LL)", (long long)run_start, (long long)(run_end - run_start));
    if (last == NULL || PyList_Append(runs, last) < 0) {
        Py_XDECREF(last);
        goto done;
    }
    Py_DECREF(last);
    result = Py_BuildValue("(nO)", take, runs);
done:
    Py_XDECREF(runs);
    PyBuffer_Release(&raw);
    return result;
}

/* ---------------------------------------------------------------------------------------- */

/* Where the record at `pos` ends if it is whole and framed as record.checked_header wants
 * (magic, sizes, the topic's and the properties' lengths adding up), else -1. */
static Py_ssize_t framed_record_end(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end)
{
    const unsigned char *h = p + pos;
    if (end - pos < HEADER_SIZE)
        return -1;
    const int32_t total = (int32_t)rd_u32(h), body_len = (int32_t)rd_u32(h + OFF_BODY_LEN);
    const Py_ssize_t stop = pos + total;
    const Py_ssize_t body_end = pos + HEADER_SIZE + (Py_ssize_t)body_len;
    if (rd_u32(h + 4) != MESSAGE_MAGIC || total < MIN_RECORD_SIZE || stop > end || body_len < 0
        || body_end + 3 > stop)
        return -1;
    const Py_ssize_t topic_end = body_end + 1 + p[body_end];
    if (topic_end + 2 > stop || topic_end + 2 + ((p[topic_end] << 8) | p[topic_end + 1]) != stop)
        return -1;
    return stop;
}

/* framed_record_end, and the record's CRC (with crc_of) matching its stamped one; else -1. */
static Py_ssize_t valid_record_end(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end)
{
    const Py_ssize_t stop = framed_record_end(p, pos, end);
    if (stop < 0
        || crc_of(0, p + pos + OFF_QUEUE_ID, stop - pos - OFF_QUEUE_ID) != rd_u32(p + pos + OFF_CRC))
        return -1;
    return stop;
}

PyDoc_STRVAR(scan_records_doc,
"scan_records(buf, verify_crc, crc32)\n"
"--\n\n"
"record.scan_records in one C pass: [(position, HEADER fields)] of every record of buf, or\n"
"None if one is not a whole valid record (the caller asks the Python version for the\n"
"precise error). `crc32` is called on a memoryview of each record's checked bytes; None:\n"
"the crc32 of these loops (crc32_backend), without a Python call per record.");

static PyObject *scan_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("scan_records", nargs, 3))
        return NULL;
    int verify = PyObject_IsTrue(args[1]);
    if (verify < 0)
        return NULL;
    PyObject *crc_fn = args[2];
    const int own_crc = verify && crc_fn == Py_None;   /* checked here, not by a Python call */
    Py_ssize_t (*const record_end)(const unsigned char *, Py_ssize_t, Py_ssize_t) =
        own_crc ? valid_record_end : framed_record_end;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *found = PyList_New(0);
    const unsigned char *p = (const unsigned char *)view.buf;
    const Py_ssize_t end = view.len;
    Py_ssize_t pos = 0;
    int valid = 1;
    while (found != NULL && pos < end) {
        const unsigned char *h = p + pos;
        const Py_ssize_t stop = record_end(p, pos, end);
        if (stop < 0) {
            valid = 0;
            break;
        }
        const int32_t total = (int32_t)rd_u32(h), body_len = (int32_t)rd_u32(h + OFF_BODY_LEN);
        const uint32_t magic = rd_u32(h + 4), crc = rd_u32(h + OFF_CRC);
        if (verify && !own_crc) {
            PyObject *checked = PyMemoryView_FromMemory((char *)h + OFF_QUEUE_ID,
                                                        total - OFF_QUEUE_ID, PyBUF_READ);
            PyObject *value = checked == NULL ? NULL : PyObject_CallOneArg(crc_fn, checked);
            Py_XDECREF(checked);
            if (value == NULL)
                goto fail;
            unsigned long computed = PyLong_AsUnsignedLong(value);
            Py_DECREF(value);
            if (computed == (unsigned long)-1 && PyErr_Occurred())
                goto fail;
            if (computed != crc) {
                valid = 0;
                break;
            }
        }
        /* the HEADER fields: >iIIiiqqiq8sq8siqi */
        PyObject *item = Py_BuildValue(
            "(n(iIIiiLLiLy#Ly#iLi))", pos, total, (unsigned int)magic, (unsigned int)crc,
            (int)(int32_t)rd_u32(h + 12), (int)(int32_t)rd_u32(h + 16), (long long)rd_i64(h + 20),
            (long long)rd_i64(h + 28), (int)(int32_t)rd_u32(h + 36), (long long)rd_i64(h + 40),
            (const char *)h + 48, (Py_ssize_t)8, (long long)rd_i64(h + 56), (const char *)h + 64,
            (Py_ssize_t)8, (int)(int32_t)rd_u32(h + 72), (long long)rd_i64(h + 76), (int)body_len);
        if (item == NULL || PyList_Append(found, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        pos = stop;
    }
    PyBuffer_Release(&view);
    if (found != NULL && !valid) {
        Py_DECREF(found);
        Py_RETURN_NONE;
    }
    return found;
fail:
    Py_XDECREF(found);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */

PyDoc_STRVAR(scan_positions_doc,
"scan_positions(buf)\n"
"--\n\n"
"scan_records for a columnar reader (the Spark source): every record of buf framed and\n"
"CRC-checked (without the GIL), and its position and queue offset returned as two bytes\n"
"objects of native int64s (numpy.frombuffer), no tuple per record; or None if a record is\n"
"not whole and valid (the caller asks record.scan_records for the precise error).");

static PyObject *scan_positions(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("scan_positions", nargs, 1))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    const Py_ssize_t end = view.len;
    Py_ssize_t count = 0, pos = 0;
    Py_BEGIN_ALLOW_THREADS   /* the buffer stays exported: it cannot change meanwhile */
    while (pos < end) {
        const Py_ssize_t stop = valid_record_end(p, pos, end);
        if (stop < 0)
            break;
        count++;
        pos = stop;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (pos < end) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *positions = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (positions != NULL && offsets != NULL) {
        int64_t *at = (int64_t *)PyBytes_AS_STRING(positions);
        int64_t *queue_offsets = (int64_t *)PyBytes_AS_STRING(offsets);
        for (Py_ssize_t i = 0, here = 0; i < count; i++) {
            at[i] = here;
            queue_offsets[i] = rd_i64(p + here + OFF_QUEUE_OFFSET);
            here += (int32_t)rd_u32(p + here);
        }
        result = PyTuple_Pack(2, positions, offsets);
    }
    Py_XDECREF(positions);
    Py_XDECREF(offsets);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------------------------------- */

PyDoc_STRVAR(decode_messages_doc,
"decode_messages(buf, cls, broker_name)\n"
"--\n\n"
"The lazy messages of a pull reply in one C pass (message.decode_records): every record of\n"
"the bytes object buf framed and CRC-checked (zlib's crc32, record.record_crc32's values),\n"
"one `cls` instance per record made without __init__, its slots _buf = buf, _pos = the\n"
"record's position, _broker = broker_name and _hd, _body, _dec = None; or None if a record is\n"
"not whole and valid (the caller asks the Python decode for the precise error).");

static const char *const MESSAGE_SLOTS[] = {"_buf", "_pos", "_hd", "_broker", "_body", "_dec"};
#define N_MESSAGE_SLOTS 6

static PyObject *decode_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("decode_messages", nargs, 3))
        return NULL;
    PyObject *buf = args[0], *broker = args[2];
    if (!PyBytes_Check(buf) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "decode_messages: buf must be bytes and cls a type");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[1];
    PyObject *slots[N_MESSAGE_SLOTS] = {NULL};
    PyObject *found = NULL;
    for (int i = 0; i < N_MESSAGE_SLOTS; i++) {   /* the slots' member descriptors */
        slots[i] = PyObject_GetAttrString((PyObject *)cls, MESSAGE_SLOTS[i]);
        if (slots[i] == NULL)
            goto done;
        if (Py_TYPE(slots[i])->tp_descr_set == NULL) {
            PyErr_Format(PyExc_TypeError, "decode_messages: %s is not a slot of the class",
                         MESSAGE_SLOTS[i]);
            goto done;
        }
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(buf);
    const Py_ssize_t end = PyBytes_GET_SIZE(buf);
    found = PyList_New(0);
    for (Py_ssize_t pos = 0; found != NULL && pos < end;) {
        const Py_ssize_t stop = valid_record_end(p, pos, end);
        if (stop < 0) {
            Py_CLEAR(found);
            found = Py_NewRef(Py_None);
            break;
        }
        PyObject *message = cls->tp_alloc(cls, 0);
        PyObject *position = PyLong_FromSsize_t(pos);
        PyObject *values[N_MESSAGE_SLOTS] = {buf, position, Py_None, broker, Py_None, Py_None};
        int failed = message == NULL || position == NULL;
        for (int i = 0; !failed && i < N_MESSAGE_SLOTS; i++)
            failed = Py_TYPE(slots[i])->tp_descr_set(slots[i], message, values[i]) < 0;
        Py_XDECREF(position);
        if (failed || PyList_Append(found, message) < 0) {
            Py_XDECREF(message);
            Py_CLEAR(found);
            break;
        }
        Py_DECREF(message);
        pos = stop;
    }
done:
    for (int i = 0; i < N_MESSAGE_SLOTS; i++)
        Py_XDECREF(slots[i]);
    return found;
}

/* ---------------------------------------------------------------------------------------- */

PyDoc_STRVAR(use_crc32_doc,
"use_crc32(path)\n"
"--\n\n"
"Compute every CRC of these loops with ISA-L's crc32_gzip_refl from the shared object at\n"
"path (python-isal's isal_zlib extension, already loaded by the process), if it exports\n"
"it and it gives zlib's crc32 values, chained ones included. True if in use, else False\n"
"(zlib's stays).");

static PyObject *use_crc32(PyObject *module, PyObject *path)
{
    (void)module;
    const char *name = PyUnicode_AsUTF8(path);
    if (name == NULL)
        return NULL;
    void *library = dlopen(name, RTLD_NOW | RTLD_NOLOAD);   /* only what is loaded already */
    crc32_fn candidate = library == NULL ? NULL : (crc32_fn)dlsym(library, "crc32_gzip_refl");
    if (candidate == NULL) {
        if (library != NULL)
            dlclose(library);
        Py_RETURN_FALSE;
    }
    unsigned char sample[1031];
    for (size_t i = 0; i < sizeof sample; i++)
        sample[i] = (unsigned char)(i * 131 + 7);
    for (size_t len = 0; len <= sizeof sample; len += 1 + len / 3) {
        uint32_t by_zlib = (uint32_t)crc32(0, sample, (uInt)len);
        uint32_t chained = (uint32_t)crc32(by_zlib, sample, (uInt)(sizeof sample - len));
        if (candidate(0, sample, len) != by_zlib
            || candidate(by_zlib, sample, sizeof sample - len) != chained) {
            dlclose(library);
            Py_RETURN_FALSE;
        }
    }
    fast_crc32 = candidate;   /* the library stays open for the life of the process */
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(crc32_backend_doc,
"crc32_backend()\n"
"--\n\n"
"Whose crc32 these loops use: \"isal\" (after use_crc32) or \"zlib\".");

static PyObject *crc32_backend(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyUnicode_FromString(fast_crc32 != NULL ? "isal" : "zlib");
}

/* ---------------------------------------------------------------------------------------- */
/* Syncer: requests (file descriptors, ticket) are merged while the thread is busy; each pass
 * fdatasyncs every file of the merged requests once and records (highest ticket, errno).
 * Descriptors are dup()ed at request time, so a segment closed later is still the file synced
 * (never a reused descriptor number); one already closed is skipped. The thread never touches
 * a Python object. */

typedef struct {
    int64_t ticket;
    int err;
} SyncDone;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started, joined, stopping, notify_fd;
    int *fds; /* pending, dup()ed */
    Py_ssize_t nfds, cap_fds;
    int64_t ticket; /* highest pending ticket */
    int has_pending;
    SyncDone *done;
    Py_ssize_t ndone, cap_done;
    int lost; /* a result could not be recorded (out of memory) */
} Syncer;

static int sync_files(int *fds, Py_ssize_t n)
{
    int err = 0;
    struct stat *seen = malloc(sizeof(struct stat) * (size_t)(n > 0 ? n : 1));
    Py_ssize_t nseen = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        struct stat st;
        int dup_of_seen = 0;
        if (seen != NULL && fstat(fds[i], &st) == 0) {
            for (Py_ssize_t j = 0; j < nseen && !dup_of_seen; j++)
                dup_of_seen = seen[j].st_dev == st.st_dev && seen[j].st_ino == st.st_ino;
            if (!dup_of_seen)
                seen[nseen++] = st;
        }
        if (!dup_of_seen && fdatasync(fds[i]) != 0 && err == 0)
            err = errno;
        close(fds[i]);
    }
    free(seen);
    return err;
}

static void *syncer_main(void *arg)
{
    Syncer *self = (Syncer *)arg;
    static const uint64_t one = 1;
    pthread_mutex_lock(&self->mu);
    for (;;) {
        while (!self->has_pending && !self->stopping)
            pthread_cond_wait(&self->cv, &self->mu);
        if (!self->has_pending)
            break; /* stopping, and every request served */
        int *fds = self->fds;
        Py_ssize_t nfds = self->nfds;
        int64_t ticket = self->ticket;
        self->fds = NULL;
        self->nfds = self->cap_fds = 0;
        self->has_pending = 0;
        pthread_mutex_unlock(&self->mu);

        int err = sync_files(fds, nfds);
        free(fds);

        pthread_mutex_lock(&self->mu);
        if (self->ndone == self->cap_done) {
            Py_ssize_t cap = self->cap_done ? self->cap_done * 2 : 16;
            SyncDone *grown = realloc(self->done, sizeof(SyncDone) * (size_t)cap);
            if (grown == NULL) {
                self->lost = 1;
            } else {
                self->done = grown;
                self->cap_done = cap;
            }
        }
        if (self->ndone < self->cap_done)
            self->done[self->ndone++] = (SyncDone){ticket, err};
        pthread_mutex_unlock(&self->mu);
        ssize_t wrote;
        do {
            wrote = write(self->notify_fd, &one, sizeof one);
        } while (wrote < 0 && errno == EINTR);
        pthread_mutex_lock(&self->mu);
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

static int Syncer_init(Syncer *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"notify_fd", NULL};
    int notify_fd;
    if (self->started) {
        PyErr_SetString(PyExc_RuntimeError, "Syncer already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i", kwlist, &notify_fd))
        return -1;
    self->notify_fd = notify_fd;
    if (pthread_mutex_init(&self->mu, NULL) != 0 || pthread_cond_init(&self->cv, NULL) != 0) {
        PyErr_SetString(PyExc_OSError, "Syncer: cannot create its lock");
        return -1;
    }
    int rc = pthread_create(&self->thread, NULL, syncer_main, self);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->started = 1;
    return 0;
}

PyDoc_STRVAR(Syncer_request_doc,
"request(fds, ticket)\n--\n\n"
"Have the files fdatasynced (merged with the requests already waiting); `ticket` (a log\n"
"offset) is reported by poll() once they are.");

static PyObject *Syncer_request(Syncer *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("Syncer.request", nargs, 2))
        return NULL;
    int64_t ticket;
    if (as_i64(args[1], &ticket))
        return NULL;
    PyObject *seq = PySequence_Fast(args[0], "request: fds must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *dups = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (dups == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    Py_ssize_t ndups = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (fd == -1 && PyErr_Occurred())
            goto fail;
        int copy = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
        if (copy < 0 && errno == EBADF)
            continue; /* its segment was closed (deleted) meanwhile: nothing to flush */
        if (copy < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        dups[ndups++] = copy;
    }
    Py_DECREF(seq);
    pthread_mutex_lock(&self->mu);
    if (self->stopping || !self->started) {
        pthread_mutex_unlock(&self->mu);
        for (Py_ssize_t i = 0; i < ndups; i++)
            close(dups[i]);
        free(dups);
        PyErr_SetString(PyExc_RuntimeError, "the syncer is closed");
        return NULL;
    }
    if (self->nfds + ndups > self->cap_fds) {
        Py_ssize_t cap = (self->nfds + ndups) * 2;
        int *grown = realloc(self->fds, sizeof(int) * (size_t)cap);
        if (grown == NULL) {
            pthread_mutex_unlock(&self->mu);
            for (Py_ssize_t i = 0; i < ndups; i++)
                close(dups[i]);
            free(dups);
            return PyErr_NoMemory();
        }
        self->fds = grown;
        self->cap_fds = cap;
    }
    memcpy(self->fds + self->nfds, dups, sizeof(int) * (size_t)ndups);
    self->nfds += ndups;
    if (!self->has_pending || ticket > self->ticket)
        self->ticket = ticket;
    self->has_pending = 1;
    pthread_cond_signal(&self->cv);
    pthread_mutex_unlock(&self->mu);
    free(dups);
    Py_RETURN_NONE;
fail:
    for (Py_ssize_t i = 0; i < ndups; i++)
        close(dups[i]);
    free(dups);
    Py_DECREF(seq);
    return NULL;
}

PyDoc_STRVAR(Syncer_poll_doc,
"poll()\n--\n\n"
"The passes finished since the last poll, oldest first: [(ticket, errno)], errno 0 when\n"
"every file of the pass was synced.");

static PyObject *Syncer_poll(Syncer *self, PyObject *Py_UNUSED(ignored))
{
    pthread_mutex_lock(&self->mu);
    Py_ssize_t n = self->ndone;
    SyncDone *done = self->done;
    int lost = self->lost;
    self->done = NULL;
    self->ndone = self->cap_done = 0;
    self->lost = 0;
    pthread_mutex_unlock(&self->mu);
    PyObject *result = lost ? NULL : PyList_New(n);
    if (lost)
        PyErr_SetString(PyExc_MemoryError, "the syncer lost a result (out of memory)");
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *item = Py_BuildValue("(Li)", (long long)done[i].ticket, done[i].err);
        if (item == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, item);
    }
    free(done);
    return result;
}

static void syncer_stop(Syncer *self)
{
    if (!self->started || self->joined)
        return;
    pthread_mutex_lock(&self->mu);
    self->stopping = 1;
    pthread_cond_signal(&self->cv);
    pthread_mutex_unlock(&self->mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->joined = 1;
}

PyDoc_STRVAR(Syncer_close_doc,
"close()\n--\n\nServe the waiting requests, then stop the thread (poll() still works).");

static PyObject *Syncer_close(Syncer *self, PyObject *Py_UNUSED(ignored))
{
    syncer_stop(self);
    Py_RETURN_NONE;
}

static void Syncer_dealloc(Syncer *self)
{
    syncer_stop(self);
    for (Py_ssize_t i = 0; i < self->nfds; i++)
        close(self->fds[i]);
    free(self->fds);
    free(self->done);
    if (self->started) {
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->cv);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Syncer_methods[] = {
    {"request", (PyCFunction)(void (*)(void))Syncer_request, METH_FASTCALL, Syncer_request_doc},
    {"poll", (PyCFunction)Syncer_poll, METH_NOARGS, Syncer_poll_doc},
    {"close", (PyCFunction)Syncer_close, METH_NOARGS, Syncer_close_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SyncerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tidemq_speedups.Syncer",
    .tp_doc = PyDoc_STR("Syncer(notify_fd): fdatasync on request in a thread without the GIL;\n"
                        "each finished pass writes 1 to the eventfd `notify_fd`."),
    .tp_basicsize = sizeof(Syncer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Syncer_init,
    .tp_dealloc = (destructor)Syncer_dealloc,
    .tp_methods = Syncer_methods,
};

/* ---------------------------------------------------------------------------------------- */

#define MESSAGE_MAGIC 0xDAA320A7u
#define HEADER_SIZE 88
#define MAX_PROPERTIES_SIZE (32 * 1024)

PyDoc_STRVAR(encode_batch_doc,
"encode_batch(topic_head, items, born_timestamp, born_host)\n"
"--\n\n"
"The records of one producer batch in one new bytes object, CRCs included: exactly what\n"
"record.encode_batch's Python loop makes. topic_head is the topic's length byte and name;\n"
"items is a list of (body, encoded properties, sys_flag) with bytes bodies and properties.\n"
"Returns None for anything else or anything invalid (properties over the limit, a flag or\n"
"size out of range): the caller runs the Python loop, which raises the precise error.");

static PyObject *encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("encode_batch", nargs, 4) < 0)
        return NULL;
    PyObject *topic_head = args[0], *items = args[1], *born_host = args[3];
    if (!PyBytes_Check(topic_head) || !PyList_Check(items) || !PyBytes_Check(born_host)
        || PyBytes_GET_SIZE(born_host) != 8)
        Py_RETURN_NONE;
    long long born_ts = PyLong_AsLongLong(args[2]);
    if (born_ts == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t count = PyList_GET_SIZE(items), topic_len = PyBytes_GET_SIZE(topic_head);
    Py_ssize_t fixed = HEADER_SIZE + topic_len + 2, total = 0;
    for (Py_ssize_t i = 0; i < count; i++) { /* check and size everything before writing */
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0))
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1))
            || !PyLong_CheckExact(PyTuple_GET_ITEM(item, 2)))
            Py_RETURN_NONE;
        Py_ssize_t body_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 0));
        Py_ssize_t props_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 1));
        long flag = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
        if (flag == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        Py_ssize_t size = fixed + body_len + props_len;
        if (props_len > MAX_PROPERTIES_SIZE || flag < INT32_MIN || flag > INT32_MAX
            || size > INT32_MAX || total > PY_SSIZE_T_MAX - size)
            Py_RETURN_NONE;
        total += size;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    const unsigned char *host = (const unsigned char *)PyBytes_AS_STRING(born_host);
    const char *topic = PyBytes_AS_STRING(topic_head);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        PyObject *body = PyTuple_GET_ITEM(item, 0), *props = PyTuple_GET_ITEM(item, 1);
        Py_ssize_t body_len = PyBytes_GET_SIZE(body), props_len = PyBytes_GET_SIZE(props);
        Py_ssize_t size = fixed + body_len + props_len;
        memset(p, 0, HEADER_SIZE);
        wr_u32(p, (uint32_t)size);
        wr_u32(p + 4, MESSAGE_MAGIC);
        wr_u32(p + 36, (uint32_t)(int32_t)PyLong_AsLong(PyTuple_GET_ITEM(item, 2)));
        wr_i64(p + 40, (int64_t)born_ts);
        memcpy(p + 48, host, 8);
        wr_u32(p + OFF_BODY_LEN, (uint32_t)body_len);
        unsigned char *at = p + HEADER_SIZE;
        memcpy(at, PyBytes_AS_STRING(body), (size_t)body_len);
        at += body_len;
        memcpy(at, topic, (size_t)topic_len);
        at += topic_len;
        at[0] = (unsigned char)(props_len >> 8);
        at[1] = (unsigned char)props_len;
        memcpy(at + 2, PyBytes_AS_STRING(props), (size_t)props_len);
        wr_u32(p + OFF_CRC, crc_of(0, p + OFF_QUEUE_ID, size - OFF_QUEUE_ID));
        p += size;
    }
    return out;
}

/* ---------------------------------------------------------------------------------------- */
/* popped_json: the HTTP gateway's pop answer written straight from the Pop reply's records. */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Out;

static int out_reserve(Out *o, Py_ssize_t more)
{
    if (o->cap - o->len >= more)
        return 0;
    Py_ssize_t cap = o->cap > 0 ? o->cap : 4096;
    while (cap - o->len < more) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *grown = PyMem_Realloc(o->p, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = grown;
    o->cap = cap;
    return 0;
}

static int out_put(Out *o, const void *s, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0)
        return -1;
    memcpy(o->p + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

#define OUT_LIT(o, s) out_put((o), (s), (Py_ssize_t)sizeof(s) - 1)

static int out_i64(Out *o, int64_t v)
{
    char digits[24], *d = digits + sizeof digits;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--d = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--d = '-';
    return out_put(o, d, digits + sizeof digits - d);
}

/* Whether s[0:n] is UTF-8 as Python's strict decoder reads it (no surrogates, no overlong
 * forms, nothing past U+10FFFF). */
static int utf8_valid(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {   /* ASCII eight bytes at a time */
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (word & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        const unsigned char c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            const unsigned char low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
            if (i + 2 >= n || s[i + 1] < low || s[i + 1] > high || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            const unsigned char low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
            if (i + 3 >= n || s[i + 1] < low || s[i + 1] > high || (s[i + 2] & 0xC0) != 0x80
                || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* A JSON string of UTF-8 text as orjson writes it: '"', '\\' and the control characters
 * escaped (\b \t \n \f \r, else \u00xx), everything else as is. */
static int out_json_string(Out *o, const unsigned char *s, Py_ssize_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (n > (PY_SSIZE_T_MAX - 2) / 6) {
        PyErr_NoMemory();
        return -1;
    }
    if (out_reserve(o, 6 * n + 2) < 0)
        return -1;
    char *d = o->p + o->len;
    *d++ = '"';
    Py_ssize_t run = 0;   /* start of the bytes not copied yet */
    for (Py_ssize_t i = 0; i < n; i++) {
        while (i + 8 <= n) {   /* skip eight bytes at a time while none needs escaping */
            uint64_t w;
            memcpy(&w, s + i, 8);
            const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
            const uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
            if ((((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote)
                 | ((backslash - ones) & ~backslash)) & highs)
                break;   /* a byte below 0x20, '"' or '\\' may be here: look byte by byte */
            i += 8;
        }
        if (i >= n)
            break;
        const unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        memcpy(d, s + run, (size_t)(i - run));
        d += i - run;
        run = i + 1;
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\b': *d++ = 'b'; break;
        case '\t': *d++ = 't'; break;
        case '\n': *d++ = 'n'; break;
        case '\f': *d++ = 'f'; break;
        case '\r': *d++ = 'r'; break;
        default:
            *d++ = 'u';
            *d++ = '0';
            *d++ = '0';
            *d++ = hex[c >> 4];
            *d++ = hex[c & 15];
        }
    }
    memcpy(d, s + run, (size_t)(n - run));
    d += n - run;
    *d++ = '"';
    o->len = d - o->p;
    return 0;
}

/* A JSON string of s in standard base64 with padding (base64.b64encode). */
static int out_base64_string(Out *o, const unsigned char *s, Py_ssize_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n > (PY_SSIZE_T_MAX - 8) / 2) {
        PyErr_NoMemory();
        return -1;
    }
    if (out_reserve(o, (n + 2) / 3 * 4 + 2) < 0)
        return -1;
    char *d = o->p + o->len;
    *d++ = '"';
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        const uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        *d++ = alphabet[v >> 18];
        *d++ = alphabet[(v >> 12) & 63];
        *d++ = alphabet[(v >> 6) & 63];
        *d++ = alphabet[v & 63];
    }
    if (n - i == 1) {
        const uint32_t v = (uint32_t)s[i] << 16;
        *d++ = alphabet[v >> 18];
        *d++ = alphabet[(v >> 12) & 63];
        *d++ = '=';
        *d++ = '=';
    } else if (n - i == 2) {
        const uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        *d++ = alphabet[v >> 18];
        *d++ = alphabet[(v >> 12) & 63];
        *d++ = alphabet[(v >> 6) & 63];
        *d++ = '=';
    }
    *d++ = '"';
    o->len = d - o->p;
    return 0;
}

/* One property of a record (record.decode_properties: items split on \x02, empty ones
 * skipped, the name up to the first \x01, the value after it). */
typedef struct {
    const unsigned char *name, *value;
    Py_ssize_t name_len, value_len;
} Prop;

#define MAX_RENDERED_PROPS 64   /* more: the Python rendering (its dict) takes the record */

static int same_name(const Prop *a, const unsigned char *name, Py_ssize_t len)
{
    return a->name_len == len && memcmp(a->name, name, (size_t)len) == 0;
}

/* The number of properties in p[0:n), -1 past MAX_RENDERED_PROPS. */
static int parse_props(const unsigned char *p, Py_ssize_t n, Prop *props)
{
    int count = 0;
    Py_ssize_t at = 0;
    while (at < n) {
        const unsigned char *stop = memchr(p + at, 0x02, (size_t)(n - at));
        const Py_ssize_t end = stop == NULL ? n : stop - p;
        if (end > at) {
            if (count == MAX_RENDERED_PROPS)
                return -1;
            const unsigned char *sep = memchr(p + at, 0x01, (size_t)(end - at));
            Prop *prop = &props[count++];
            prop->name = p + at;
            if (sep == NULL) {
                prop->name_len = end - at;
                prop->value = p + end;
                prop->value_len = 0;
            } else {
                prop->name_len = sep - (p + at);
                prop->value = sep + 1;
                prop->value_len = p + end - (sep + 1);
            }
        }
        at = end + 1;
    }
    return count;
}

/* The value of the last property named `name` (the dict's), NULL if none. */
static const Prop *last_prop(const Prop *props, int count, const char *name)
{
    const Py_ssize_t len = (Py_ssize_t)strlen(name);
    for (int i = count - 1; i >= 0; i--)
        if (same_name(&props[i], (const unsigned char *)name, len))
            return &props[i];
    return NULL;
}

static int out_prop_string(Out *o, const Prop *prop)
{
    return prop == NULL ? OUT_LIT(o, "\"\"") : out_json_string(o, prop->value, prop->value_len);
}

/* One popped record as the gateway's JSON object (messages.received_json); 1 if it cannot be
 * rendered here (compressed, not UTF-8, too many properties), -1 with an exception set. */
static int render_popped(Out *o, const unsigned char *h, Py_ssize_t total, PyObject *system,
                         const char *broker, Py_ssize_t broker_len, const char *handle,
                         Py_ssize_t handle_len)
{
    static const char hex[] = "0123456789ABCDEF";
    const uint32_t sys_flag = rd_u32(h + 36);
    if (sys_flag & 0x1)   /* record.SYS_FLAG_COMPRESSED: the Python rendering decompresses */
        return 1;
    const Py_ssize_t body_len = (int32_t)rd_u32(h + OFF_BODY_LEN);
    const unsigned char *body = h + HEADER_SIZE;
    const unsigned char *topic = body + body_len + 1;
    const Py_ssize_t topic_len = body[body_len];
    const unsigned char *raw_props = topic + topic_len + 2;
    const Py_ssize_t props_len = h + total - raw_props;
    if (!utf8_valid(topic, topic_len) || !utf8_valid(raw_props, props_len))
        return 1;   /* the Python rendering raises RecordFormatError */
    Prop props[MAX_RENDERED_PROPS];
    const int count = parse_props(raw_props, props_len, props);
    if (count < 0)
        return 1;
    const Prop *tags = last_prop(props, count, "TAGS"), *keys = last_prop(props, count, "KEYS");
    const Prop *unique = last_prop(props, count, "UNIQ_KEY");
    const Prop *group = last_prop(props, count, "MESSAGE_GROUP");
    const Prop *retry = last_prop(props, count, "RETRY_TOPIC");

    if (OUT_LIT(o, "{\"body\":") < 0)
        return -1;
    if (utf8_valid(body, body_len)) {
        if (out_json_string(o, body, body_len) < 0)
            return -1;
    } else if (out_base64_string(o, body, body_len) < 0
               || OUT_LIT(o, ",\"encoding\":\"base64\"") < 0) {
        return -1;
    }
    if (OUT_LIT(o, ",\"tag\":") < 0 || out_prop_string(o, tags) < 0
        || OUT_LIT(o, ",\"keys\":[") < 0)
        return -1;
    if (keys != NULL && keys->value_len > 0) {   /* str.split(" "): empty pieces kept */
        const unsigned char *k = keys->value, *end = keys->value + keys->value_len;
        for (;;) {
            const unsigned char *space = memchr(k, ' ', (size_t)(end - k));
            const unsigned char *stop = space == NULL ? end : space;
            if (out_json_string(o, k, stop - k) < 0)
                return -1;
            if (space == NULL)
                break;
            if (OUT_LIT(o, ",") < 0)
                return -1;
            k = space + 1;
        }
    }
    if (OUT_LIT(o, "],\"properties\":{") < 0)
        return -1;
    const Py_ssize_t n_system = PyTuple_GET_SIZE(system);
    int shown = 0;
    for (int i = 0; i < count; i++) {
        const Prop *prop = &props[i];
        int skip = 0;
        for (Py_ssize_t s = 0; !skip && s < n_system; s++) {
            PyObject *name = PyTuple_GET_ITEM(system, s);
            skip = same_name(prop, (const unsigned char *)PyBytes_AS_STRING(name),
                             PyBytes_GET_SIZE(name));
        }
        for (int j = 0; !skip && j < i; j++)   /* a dict keeps a name's first place */
            skip = same_name(&props[j], prop->name, prop->name_len);
        if (skip)
            continue;
        const Prop *value = prop;   /* ... and its last value */
        for (int j = count - 1; j > i; j--) {
            if (same_name(&props[j], prop->name, prop->name_len)) {
                value = &props[j];
                break;
            }
        }
        if ((shown++ && OUT_LIT(o, ",") < 0) || out_json_string(o, prop->name, prop->name_len) < 0
            || OUT_LIT(o, ":") < 0 || out_json_string(o, value->value, value->value_len) < 0)
            return -1;
    }
    char msg_id[34];   /* record.offset_msg_id: store host + physical offset, upper hex */
    msg_id[0] = msg_id[33] = '"';
    for (int i = 0; i < 16; i++) {
        const unsigned char b = i < 8 ? h[64 + i] : h[OFF_PHYSICAL_OFFSET + i - 8];
        msg_id[1 + 2 * i] = hex[b >> 4];
        msg_id[2 + 2 * i] = hex[b & 15];
    }
    const int32_t reconsume = (int32_t)rd_u32(h + 72);
    if (OUT_LIT(o, "},\"queue_offset\":") < 0 || out_i64(o, rd_i64(h + OFF_QUEUE_OFFSET)) < 0
        || OUT_LIT(o, ",\"msg_id\":") < 0 || out_put(o, msg_id, 34) < 0
        || OUT_LIT(o, ",\"unique_id\":") < 0 || out_prop_string(o, unique) < 0
        || OUT_LIT(o, ",\"born_timestamp\":") < 0 || out_i64(o, rd_i64(h + 40)) < 0
        || OUT_LIT(o, ",\"store_timestamp\":") < 0
        || out_i64(o, rd_i64(h + OFF_STORE_TIMESTAMP)) < 0
        || OUT_LIT(o, ",\"reconsume_times\":") < 0 || out_i64(o, reconsume) < 0
        || OUT_LIT(o, ",\"message_group\":") < 0 || out_prop_string(o, group) < 0
        || OUT_LIT(o, ",\"topic\":") < 0)
        return -1;
    if (retry != NULL && retry->value_len > 0 ? out_json_string(o, retry->value, retry->value_len)
                                              : out_json_string(o, topic, topic_len))
        return -1;
    if (OUT_LIT(o, ",\"broker_name\":") < 0
        || out_json_string(o, (const unsigned char *)broker, broker_len) < 0
        || OUT_LIT(o, ",\"receipt_handle\":") < 0
        || out_json_string(o, (const unsigned char *)handle, handle_len) < 0
        || OUT_LIT(o, ",\"delivery_count\":") < 0 || out_i64(o, (int64_t)reconsume + 1) < 0
        || OUT_LIT(o, "}") < 0)
        return -1;
    return 0;
}

PyDoc_STRVAR(popped_json_doc,
"popped_json(records, broker_name, receipt_handles, system_names)\n"
"--\n\n"
"The JSON array of a pop's messages, written straight from the Pop reply's records: the\n"
"same bytes as the gateway's messages.popped_json_py (orjson over received_json of each\n"
"message of message.decode_records(records, broker_name) with its handle). records is a\n"
"bytes object, receipt_handles a list of str (one per record), system_names a tuple of the\n"
"bytes names a message's JSON does not show among its properties. None if the records are not\n"
"all whole and valid, one is compressed, its topic or properties are not UTF-8 or number\n"
"more than 64, a string is not UTF-8-encodable, or the handles are not one per record: the\n"
"caller renders in Python, which raises the precise error where there is one.");

static PyObject *popped_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("popped_json", nargs, 4) < 0)
        return NULL;
    PyObject *records = args[0], *broker = args[1], *handles = args[2], *system = args[3];
    if (!PyBytes_Check(records) || !PyUnicode_Check(broker) || !PyList_Check(handles)
        || !PyTuple_Check(system)) {
        PyErr_SetString(PyExc_TypeError, "popped_json: records must be bytes, broker_name a "
                        "str, receipt_handles a list and system_names a tuple");
        return NULL;
    }
    for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(system); s++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(system, s))) {
            PyErr_SetString(PyExc_TypeError, "popped_json: system_names must be bytes");
            return NULL;
        }
    }
    Py_ssize_t broker_len;
    const char *broker_utf8 = PyUnicode_AsUTF8AndSize(broker, &broker_len);
    if (broker_utf8 == NULL) {   /* a lone surrogate: orjson refuses it too */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(records);
    const Py_ssize_t end = PyBytes_GET_SIZE(records);
    const Py_ssize_t n_handles = PyList_GET_SIZE(handles);
    Out out = {NULL, 0, 0};
    PyObject *result = NULL;
    const Py_ssize_t guess = end / 2 + 512 * (n_handles < 1024 ? n_handles : 1024) + 2;
    if (out_reserve(&out, end + guess) < 0 || OUT_LIT(&out, "[") < 0)
        goto done;
    Py_ssize_t index = 0, pos = 0;
    while (pos < end) {
        const Py_ssize_t stop = valid_record_end(p, pos, end);
        if (stop < 0 || index >= n_handles)
            goto decline;
        PyObject *handle = PyList_GET_ITEM(handles, index);
        if (!PyUnicode_Check(handle))
            goto decline;
        Py_ssize_t handle_len;
        const char *handle_utf8 = PyUnicode_AsUTF8AndSize(handle, &handle_len);
        if (handle_utf8 == NULL) {
            PyErr_Clear();
            goto decline;
        }
        if (index > 0 && OUT_LIT(&out, ",") < 0)
            goto done;
        const int rendered = render_popped(&out, p + pos, stop - pos, system, broker_utf8,
                                           broker_len, handle_utf8, handle_len);
        if (rendered < 0)
            goto done;
        if (rendered > 0)
            goto decline;
        index++;
        pos = stop;
    }
    if (index != n_handles)
        goto decline;
    if (OUT_LIT(&out, "]") < 0)
        goto done;
    result = PyBytes_FromStringAndSize(out.p, out.len);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(out.p);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* gateway-kafka's Fetch: TideMQ records as Kafka v2 records (gatewaykafka/records.py). */

static int b64_digit(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Standard padded base64 into `out` (room for n / 4 * 3 bytes; NULL: only checked and
 * measured); its length, or -1 for anything that is not canonical-length padded base64 (the
 * caller declines: Python's lenient base64.b64decode decides those). */
static Py_ssize_t b64_decode(const unsigned char *in, Py_ssize_t n, unsigned char *out)
{
    if (n % 4 != 0)
        return -1;
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i += 4) {
        const int last = i + 4 == n;
        int pad = 0;
        if (last && in[i + 3] == '=')
            pad = in[i + 2] == '=' ? 2 : 1;
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            int d = k >= 4 - pad ? 0 : b64_digit(in[i + k]);
            if (d < 0)
                return -1;
            v = (v << 6) | (uint32_t)d;
        }
        if (out != NULL) {
            out[len] = (unsigned char)(v >> 16);
            if (pad < 2)
                out[len + 1] = (unsigned char)(v >> 8);
            if (pad < 1)
                out[len + 2] = (unsigned char)v;
        }
        len += 3 - pad;
    }
    return len;
}

/* A decimal int64 as Python's int() reads plain digits with an optional '-'; 0 if not. */
static int parse_i64(const unsigned char *s, Py_ssize_t n, int64_t *value)
{
    int negative = n > 0 && s[0] == '-';
    Py_ssize_t i = negative;
    if (i >= n || n - i > 18)     /* |value| < 10^18: deltas stay within int64 */
        return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *value = negative ? -v : v;
    return 1;
}

static Py_ssize_t varint_size(int64_t value)
{
    uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t size = 1;
    while (z >= 0x80) {
        z >>= 7;
        size++;
    }
    return size;
}

static unsigned char *put_varint(unsigned char *o, int64_t value)
{
    uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (z >= 0x80) {
        *o++ = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    *o++ = (unsigned char)z;
    return o;
}

#define KAFKA_BATCH_OVERHEAD 61

/* The Kafka record's headers part (count, then each name and value) of the gateway's
 * KAFKA_HEADERS property, JSON as records.py writes it: [["name","base64" or null],...].
 * With `o` NULL: checked and measured, the count left in *count; else written to `o`, the
 * count first (*count, from the measuring call). Returns the part's size, or -1 for anything
 * else (an escaped or non-ASCII name, other spacing): the Python mapping reads those. */
static Py_ssize_t kafka_headers(const unsigned char *j, Py_ssize_t n, unsigned char *o,
                                Py_ssize_t *count)
{
    if (n < 2 || j[0] != '[' || j[n - 1] != ']')
        return -1;
    const Py_ssize_t last = n - 1;          /* the closing bracket */
    unsigned char *const start = o;
    Py_ssize_t i = 1, seen = 0, size = 0;
    if (o != NULL)
        o = put_varint(o, *count);
    while (i < last) {
        if (seen > 0 && j[i++] != ',')
            return -1;
        if (i + 2 > last || j[i] != '[' || j[i + 1] != '"')
            return -1;
        i += 2;
        const Py_ssize_t name_at = i;
        while (i < last && j[i] != '"') {
            if (j[i] == '\\' || j[i] < 0x20 || j[i] > 0x7e)
                return -1;
            i++;
        }
        const Py_ssize_t name_len = i - name_at;
        if (i + 1 >= last || j[i + 1] != ',')
            return -1;
        i += 2;
        Py_ssize_t value_len = -1, b64_len = 0;     /* -1: a null value */
        const unsigned char *value_at = NULL;
        if (i + 4 <= last && memcmp(j + i, "null", 4) == 0) {
            i += 4;
        } else if (i < last && j[i] == '"') {
            value_at = j + ++i;
            while (i < last && j[i] != '"')
                i++;
            if (i >= last)
                return -1;
            b64_len = j + i - value_at;
            value_len = b64_decode(value_at, b64_len, NULL);
            if (value_len < 0)
                return -1;
            i++;
        } else {
            return -1;
        }
        if (i >= last || j[i] != ']')
            return -1;
        i++;
        seen++;
        size += varint_size(name_len) + name_len + varint_size(value_len)
            + (value_len > 0 ? value_len : 0);
        if (o != NULL) {
            o = put_varint(o, name_len);
            memcpy(o, j + name_at, (size_t)name_len);
            o += name_len;
            o = put_varint(o, value_len);
            if (value_len > 0)
                o += b64_decode(value_at, b64_len, o);
        }
    }
    if (o != NULL)
        return o - start;
    *count = seen;
    return varint_size(seen) + size;
}

static int name_is(const unsigned char *s, Py_ssize_t n, const char *name)
{
    const size_t len = strlen(name);
    return (size_t)n == len && memcmp(s, name, len) == 0;
}

PyDoc_STRVAR(kafka_records_doc,
"kafka_records(buf, pos, max_records, max_bytes, by_store_time, take_one)\n"
"--\n\n"
"The Kafka v2 records (no batch header, uncompressed, offset deltas from 0) of the TideMQ\n"
"records gateway-kafka stored, read from buf at pos: exactly what records.encode_batch\n"
"appends for them with kafka-python's builder. It stops at max_records, before a record\n"
"whose queue offset does not follow (a new batch), with by_store_time before one of another\n"
"store time, and before a record that would make the batch (61 bytes of header and the\n"
"records) exceed max_bytes, unless take_one and it is the first. Returns (records, count,\n"
"base_offset, first_timestamp, max_timestamp, store_timestamp, last_pos, next_pos), or None\n"
"when a record needs the Python mapping (a native producer's message, a long key, a header\n"
"name that is escaped or not ASCII in the headers' JSON, a compressed body, a property that\n"
"is not plain base64 or decimal, text that is not UTF-8)\n"
"or is not a whole record.");

static PyObject *kafka_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_nargs("kafka_records", nargs, 6) < 0)
        return NULL;
    if (!PyBytes_Check(args[0]))
        Py_RETURN_NONE;
    const Py_ssize_t start = PyLong_AsSsize_t(args[1]), max_records = PyLong_AsSsize_t(args[2]);
    const Py_ssize_t max_bytes = PyLong_AsSsize_t(args[3]);
    const int by_store_time = PyObject_IsTrue(args[4]), take_one = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred())
        return NULL;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const Py_ssize_t end = PyBytes_GET_SIZE(args[0]);
    if (start < 0 || start > end)
        Py_RETURN_NONE;
    Out out = {NULL, 0, 0};
    unsigned char *key = NULL;
    Py_ssize_t key_cap = 0, count = 0, pos = start, last_pos = start;
    int64_t base_offset = 0, first_ts = 0, max_ts = 0, store_ts = 0;
    PyObject *result = NULL;
    while (count < max_records && pos < end) {
        const Py_ssize_t stop = framed_record_end(p, pos, end);
        if (stop < 0)
            goto decline;
        const unsigned char *h = p + pos;
        const int64_t queue_offset = rd_i64(h + OFF_QUEUE_OFFSET);
        const int64_t stored = rd_i64(h + OFF_STORE_TIMESTAMP);
        if (count > 0 && (queue_offset != base_offset + count
                          || (by_store_time && stored != store_ts)))
            break;
        if (rd_u32(h + 36) & 0x1)            /* record.SYS_FLAG_COMPRESSED */
            goto decline;
        const Py_ssize_t body_len = (int32_t)rd_u32(h + OFF_BODY_LEN);
        const unsigned char *body = h + HEADER_SIZE;
        const unsigned char *topic = body + body_len + 1;
        const Py_ssize_t topic_len = body[body_len];
        const unsigned char *props = topic + topic_len + 2;
        const Py_ssize_t props_len = (p + stop) - props;
        if (!utf8_valid(topic, topic_len) || !utf8_valid(props, props_len))
            goto decline;
        /* the last value of each name wins, as record.decode_properties has it */
        const unsigned char *ts_at = NULL, *key_at = NULL, *value_at = NULL, *hdr_at = NULL;
        Py_ssize_t ts_len = 0, key_len = 0, value_len = 0, hdr_len = 0;
        int long_key = 0;
        for (Py_ssize_t i = 0; i < props_len;) {
            const unsigned char *item = props + i;
            const unsigned char *sep = memchr(item, 0x02, (size_t)(props_len - i));
            const Py_ssize_t item_len = sep == NULL ? props_len - i : sep - item;
            i += item_len + 1;
            if (item_len == 0)
                continue;
            const unsigned char *nv = memchr(item, 0x01, (size_t)item_len);
            const Py_ssize_t name_len = nv == NULL ? item_len : nv - item;
            const unsigned char *v = nv == NULL ? item + item_len : nv + 1;
            const Py_ssize_t v_len = item + item_len - v;
            if (name_len < 9 || memcmp(item, "KAFKA_", 6) != 0)
                continue;
            if (name_is(item, name_len, "KAFKA_TIMESTAMP")) {
                ts_at = v;
                ts_len = v_len;
            } else if (name_is(item, name_len, "KAFKA_KEY")) {
                key_at = v;
                key_len = v_len;
            } else if (name_is(item, name_len, "KAFKA_VALUE")) {
                value_at = v;
                value_len = v_len;
            } else if (name_is(item, name_len, "KAFKA_HEADERS")) {
                hdr_at = v;
                hdr_len = v_len;
            } else if (name_is(item, name_len, "KAFKA_KEY_SIZE")) {
                long_key = 1;
            }
        }
        int64_t ts;
        Py_ssize_t headers_size = 1, headers_count = 0;   /* none: a zero count */
        if (ts_at == NULL || long_key || !parse_i64(ts_at, ts_len, &ts))
            goto decline;
        if (hdr_at != NULL) {
            headers_size = kafka_headers(hdr_at, hdr_len, NULL, &headers_count);
            if (headers_size < 0)
                goto decline;
        }
        Py_ssize_t decoded_key = -1;        /* -1: a null key */
        if (key_at != NULL) {
            if (key_cap < key_len) {
                PyMem_Free(key);
                key_cap = key_len;
                key = PyMem_Malloc((size_t)(key_cap > 0 ? key_cap : 1));
                if (key == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
            }
            decoded_key = b64_decode(key_at, key_len, key);
            if (decoded_key < 0)
                goto decline;
        }
        Py_ssize_t value = body_len;        /* -1: a null value */
        if (value_at != NULL && name_is(value_at, value_len, "null"))
            value = -1;
        else if (value_at != NULL && name_is(value_at, value_len, "empty"))
            value = 0;
        if (count == 0) {
            base_offset = queue_offset;
            first_ts = max_ts = ts;
            store_ts = stored;
        }
        const int64_t delta = ts - first_ts;
        const Py_ssize_t inner = 1 + varint_size(delta) + varint_size(count)
            + varint_size(decoded_key) + (decoded_key > 0 ? decoded_key : 0)
            + varint_size(value) + (value > 0 ? value : 0) + headers_size;
        const Py_ssize_t size = varint_size(inner) + inner;
        if (KAFKA_BATCH_OVERHEAD + out.len + size > max_bytes && !(take_one && count == 0))
            break;
        if (out_reserve(&out, size) < 0)
            goto done;
        unsigned char *o = (unsigned char *)out.p + out.len;
        o = put_varint(o, inner);
        *o++ = 0;                            /* attributes */
        o = put_varint(o, delta);
        o = put_varint(o, count);
        o = put_varint(o, decoded_key);
        if (decoded_key > 0) {
            memcpy(o, key, (size_t)decoded_key);
            o += decoded_key;
        }
        o = put_varint(o, value);
        if (value > 0) {
            memcpy(o, body, (size_t)value);
            o += value;
        }
        if (hdr_at != NULL)
            o += kafka_headers(hdr_at, hdr_len, o, &headers_count);
        else
            *o++ = 0;                        /* no headers */
        out.len = (char *)o - out.p;
        if (ts > max_ts)
            max_ts = ts;
        last_pos = pos;
        count++;
        pos = stop;
    }
    result = Py_BuildValue("(y#nLLLLnn)", out.p != NULL ? out.p : "", out.len, count,
                           (long long)base_offset, (long long)first_ts, (long long)max_ts,
                           (long long)store_ts, last_pos, pos);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(out.p);
    PyMem_Free(key);
    return result;
}

static PyMethodDef methods[] = {
    {"stamp_batch", (PyCFunction)(void (*)(void))stamp_batch, METH_FASTCALL, stamp_batch_doc},
    {"scan_chunk", (PyCFunction)(void (*)(void))scan_chunk, METH_FASTCALL, scan_chunk_doc},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL, index_put_doc},
    {"unit_runs", (PyCFunction)(void (*)(void))unit_runs, METH_FASTCALL, unit_runs_doc},
    {"scan_records", (PyCFunction)(void (*)(void))scan_records, METH_FASTCALL,
     scan_records_doc},
    {"use_crc32", (PyCFunction)use_crc32, METH_O, use_crc32_doc},
    {"crc32_backend", (PyCFunction)crc32_backend, METH_NOARGS, crc32_backend_doc},
    {"scan_positions", (PyCFunction)(void (*)(void))scan_positions, METH_FASTCALL,
     scan_positions_doc},
    {"decode_messages", (PyCFunction)(void (*)(void))decode_messages, METH_FASTCALL,
     decode_messages_doc},
    {"encode_batch", (PyCFunction)(void (*)(void))encode_batch, METH_FASTCALL,
     encode_batch_doc},
    {"kafka_records", (PyCFunction)(void (*)(void))kafka_records, METH_FASTCALL,
     kafka_records_doc},
    {"popped_json", (PyCFunction)(void (*)(void))popped_json, METH_FASTCALL,
     popped_json_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tidemq_speedups",
    "The per-record loops of the broker store and the producer in C (see tidemq.broker.store.loops, record.encode_batch).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_tidemq_speedups(void)
{
    if (PyType_Ready(&SyncerType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Syncer", (PyObject *)&SyncerType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
