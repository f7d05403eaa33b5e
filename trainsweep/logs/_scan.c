/* The cloud-ML reader's hot loop in C: step lines and wall-clock stamps of one stretch of a log.
 *
 * A stretch is the text between two "rare" lines (epoch headers, validation times, ...). Almost all of
 * a log's bytes are in stretches, and almost all of a stretch is lines like
 *
 *     37 step training time: 0.2518s
 *     Real time: 1592371754.45
 *     38 step training time: 1.5e-02s
 *
 * scan_stretch() reads such a stretch exactly as cloudml.CloudMLReader._bulk's findall path does with its
 * regular expressions (STEP_LINE and REAL, then float() and int()), in one pass over the stretch's
 * colons (both literals end with one), without making a Python object per value. Every step literal must sit in a whole step line (its number after a
 * newline, the literal, an unsigned decimal with an optional exponent, an optional "s" and "\r", the
 * newline) and every stamp literal be followed by such a value and line end. Whenever that is not so (a
 * line without its number or value, a sign, nan or inf, an absurd value, a number too long for 64 bits),
 * it returns None and the caller runs the Python code, which stays the reference and reports the bad
 * lines: the two must agree on every input (tests/unit/test_native_scan.py).
 *
 * rare_lines() finds the lines that may be rare ones (those that begin with one of the literals the rare
 * lines' regular expression begins with), so that the expression is tried on them only.
 *
 * find_all() and contains() look for the literals the readers' regular expressions begin with (sixteen
 * bytes at a time: faster than the regex engine, than bytes' own search and than memmem).
 *
 * count_newlines() counts the lines of every chunk of a log for the parser (as bytes.count, faster).
 *
 * json_layout() is the JSON writer's (trainsweep/jsonstream.py): orjson's compact text of a group of a
 * run record's epochs, laid out with json.dumps's indent (tests/unit/test_jsonstream.py).
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static const char STEP_LIT[] = "step training time: ";
static const char REAL_LIT[] = "Real time: ";
#define STEP_LEN (sizeof(STEP_LIT) - 1)
#define REAL_LEN (sizeof(REAL_LIT) - 1)
#define MAX_VALUE 64   /* longer plain numbers go to the Python path */
#define MAX_DIGITS 18  /* step numbers that surely fit in 64 bits */

/* A growing array of 8-byte values. */
typedef struct {
    char *data;
    Py_ssize_t len, cap; /* in items */
} Buf;

static int buf_push(Buf *b, const void *item) {
    if (b->len == b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 256;
        char *d = PyMem_Realloc(b->data, (size_t)cap * 8);
        if (d == NULL) return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len * 8, item, 8);
    b->len++;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The first occurrence of lit (n > 0 bytes) in [p, end), or NULL. Where SSE2 is there, sixteen candidate
 * positions at a time: those where both the literal's first and its last byte are in place (for the
 * literals looked for, ":::MLLOG", "[MO833]", "val_acc", rarely more than one in a line), each then
 * compared whole; elsewhere memmem. Faster than memmem and than bytes' own search on log text. */
static const char *find_literal(const char *p, const char *end, const char *lit, Py_ssize_t n) {
    if (end - p < n) return NULL;
    if (n == 1) return memchr(p, lit[0], (size_t)(end - p));
#if defined(__SSE2__)
    const __m128i first = _mm_set1_epi8(lit[0]), last = _mm_set1_epi8(lit[n - 1]);
    const char *stop = end - n + 1; /* candidates are the positions before stop */
    for (; stop - p >= 16; p += 16) {
        __m128i a = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), first);
        __m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + n - 1)), last);
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_and_si128(a, b));
        while (mask) {
            int i = __builtin_ctz(mask);
            if (memcmp(p + i + 1, lit + 1, (size_t)(n - 2)) == 0) return p + i;
            mask &= mask - 1;
        }
    }
    for (; p < stop; p++)
        if (*p == lit[0] && memcmp(p + 1, lit + 1, (size_t)(n - 1)) == 0) return p;
    return NULL;
#else
    return memmem(p, (size_t)(end - p), lit, (size_t)n);
#endif
}

#if (defined(__x86_64__) || defined(__i386__)) && LDBL_MANT_DIG == 64
/* m / 10^k (k >= 0) or m * 10^-k (k < 0), for a decimal's significant digits m (at most 19 of them) and
 * a power of ten between 10^-27 and 10^27, as the correctly rounded double that float() gives: m and
 * 10^k are exact in the x87 80-bit format (64-bit mantissa), their quotient or product is rounded once to
 * 64 bits, then to 53. That second rounding can only differ from rounding the exact value when the 64-bit
 * result lies exactly half-way between two doubles: then 0 is returned and the caller uses CPython's own
 * (slower) conversion. */
static int fast_decimal(uint64_t m, long k, double *out) {
    static long double powers_of_ten[28];
    if (powers_of_ten[0] == 0.0L) {
        long double x = 1.0L;
        for (int i = 0; i < 28; i++, x *= 10.0L) powers_of_ten[i] = x;
    }
    if (m == 0) {
        *out = 0.0;
        return 1;
    }
    if (k > 27 || k < -27) return 0;
    long double q = k >= 0 ? (long double)m / powers_of_ten[k] : (long double)m * powers_of_ten[-k];
    union {
        long double ld;
        struct {
            uint64_t mantissa;
            uint16_t sign_exponent;
        } bits;
    } u;
    memset(&u, 0, sizeof u);
    u.ld = q;
    if ((u.bits.mantissa & 0x7FF) == 0x400) return 0; /* exactly half-way: let CPython round it */
    double d = (double)q;
    if (!(d >= DBL_MIN && d <= DBL_MAX)) return 0; /* subnormal doubles have fewer bits: not this path */
    *out = d;
    return 1;
}
#else
static int fast_decimal(uint64_t m, long k, double *out) {
    (void)m, (void)k, (void)out;
    return 0;
}
#endif

/* The value at p (before end): 1 and *out when it is an unsigned decimal (digits with at most one dot,
 * at least one digit) with an optional exponent (e or E, an optional sign, digits), followed by an
 * optional "s", an optional "\r" and the line's newline; *next is then set to that newline. 0 when the
 * Python path must look at it (no such value, or something else before the line end), -1 on a Python
 * error. The digits are read once: their significant ones (from the first that is not 0) make m, for
 * fast_decimal, while there are at most 19 of them. */
static int plain_value(const char *p, const char *end, double *out, const char **next) {
    const char *q = p;
    int digits = 0, significant = 0, after_dot = 0;
    uint64_t m = 0;
#define DIGIT()                                                                  \
    do {                                                                         \
        unsigned d_ = (unsigned)(*q++ - '0');                                    \
        digits++;                                                                \
        if ((m != 0 || d_ != 0) && ++significant <= 19) m = m * 10 + d_;          \
    } while (0)
    while (q < end && is_digit(*q)) DIGIT();
    if (q < end && *q == '.') {
        q++;
        while (q < end && is_digit(*q)) {
            DIGIT();
            after_dot++;
        }
    }
#undef DIGIT
    if (digits == 0) return 0;
    long exponent = 0;
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        int negative = 0, exp_digits = 0;
        if (q < end && (*q == '+' || *q == '-')) negative = *q++ == '-';
        while (q < end && is_digit(*q)) {
            if (++exp_digits > 6) return 0; /* the Python path reads such an exponent (0 or inf) */
            exponent = exponent * 10 + (*q++ - '0');
        }
        if (exp_digits == 0) return 0;
        if (negative) exponent = -exponent;
    }
    const char *value_end = q;
    if (q < end && *q == 's') q++;
    if (q < end && *q == '\r') q++;
    if (q >= end || *q != '\n') return 0;
    *next = q;
    Py_ssize_t n = value_end - p;
    if (n >= MAX_VALUE) return 0;
    if (significant <= 19 && fast_decimal(m, after_dot - exponent, out)) return 1;
    char tmp[MAX_VALUE];
    memcpy(tmp, p, (size_t)n);
    tmp[n] = '\0';
    char *stop = NULL;
    double v = PyOS_string_to_double(tmp, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (stop != tmp + n) return 0;
    *out = v;
    return 1;
}

/* The step number before a "step training time: " at p: r"\n(\d+) " ending at p, starting at or after
 * lo. 1 and *out when present, 0 when absent, 2 when present but too long for the C path. */
static int step_number(const char *lo, const char *p, long long *out) {
    Py_ssize_t i = p - lo;                   /* index of the literal's "s" */
    if (i < 1 || lo[i - 1] != ' ') return 0;
    Py_ssize_t j = i - 1;                    /* index of the space; digits are lo[j - digits .. j - 1] */
    while (j > 0 && lo[j - 1] >= '0' && lo[j - 1] <= '9') j--;
    Py_ssize_t digits = (i - 1) - j;
    if (digits == 0 || j < 1 || lo[j - 1] != '\n') return 0;
    if (digits > MAX_DIGITS) return 2;
    long long v = 0;
    for (Py_ssize_t d = j; d < i - 1; d++) v = v * 10 + (lo[d] - '0');
    *out = v;
    return 1;
}

/* The value after a literal at v: appended to out when plain, at most max and followed by its line end;
 * *p is set to that line end. 1: taken; 0: the Python path must read it; -1: a Python error is set. */
static int take_value(const char *v, const char *hi, double max, Buf *out, const char **p) {
    double t;
    int ok = plain_value(v, hi, &t, p);
    if (ok <= 0) return ok;
    if (!(t <= max)) return 0;
    if (buf_push(out, &t) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 1;
}

/* The first colon at or after p, in (lo, hi - 1), between an "e" and a space: where "step training time: "
 * and "Real time: " end (other colons are skipped). Sixteen positions at a time where SSE2 is there. */
static const char *time_colon(const char *p, const char *lo, const char *hi) {
    if (p <= lo) p = lo + 1;
#if defined(__SSE2__)
    const __m128i e = _mm_set1_epi8('e'), colon = _mm_set1_epi8(':'), space = _mm_set1_epi8(' ');
    for (; hi - p >= 17; p += 16) { /* the loads read p - 1 .. p + 16, all before hi */
        __m128i a = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p - 1)), e);
        __m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), colon);
        __m128i c = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + 1)), space);
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_and_si128(a, b), c));
        if (mask) return p + __builtin_ctz(mask);
    }
#endif
    for (; p + 1 < hi; p++)
        if (*p == ':' && p[-1] == 'e' && p[1] == ' ') return p;
    return NULL;
}

/* The reading of base[start:end]: a new reference to the tuple (step times, step numbers or None when
 * consecutive, first step number, stamps), or to None when the Python path must read the stretch; NULL
 * with a Python error set. *found is set to whether a step or a stamp was read. */
static PyObject *stretch(const char *base, Py_ssize_t start, Py_ssize_t end, double max_duration, int *found) {
    PyObject *result = NULL;
    Buf times = {0}, numbers = {0}, stamps = {0};
    Py_ssize_t n_numbers = 0;
    int consecutive = 1, bail = 0;
    long long first = 0, expect = 0;
    const char *lo = base + start, *hi = base + (end > start ? end : start);

    /* One pass over the colons: both literals end with ": ", so every occurrence of either is found at
     * its colon, in order (at most one of them ends at a given colon). Step times go with the step
     * numbers before them (paired by order); stamps are kept apart. */
    for (const char *p = lo; !bail && p < hi;) {
        const char *colon = time_colon(p, lo, hi); /* both literals end "time: " */
        if (colon == NULL) break;
        p = colon + 1;
        const char *hit = colon - (STEP_LEN - 2);
        if (hit >= lo && memcmp(hit, STEP_LIT, STEP_LEN - 2) == 0) {
            long long number = 0;
            if (step_number(lo, hit, &number) != 1) { /* no number, or one too long for the C path */
                bail = 1;
                break;
            }
            if (buf_push(&numbers, &number) < 0) goto nomem;
            if (n_numbers == 0) first = expect = number;
            if (number != expect) consecutive = 0;
            expect = number + 1;
            n_numbers++;
            int taken = take_value(hit + STEP_LEN, hi, max_duration, &times, &p);
            if (taken < 0) goto done;
            if (taken == 0) bail = 1;
            continue;
        }
        hit = colon - (REAL_LEN - 2);
        if (hit >= lo && memcmp(hit, REAL_LIT, REAL_LEN - 2) == 0) {
            int taken = take_value(hit + REAL_LEN, hi, DBL_MAX, &stamps, &p);
            if (taken < 0) goto done;
            if (taken == 0) bail = 1;
        }
    }

    *found = times.len > 0 || stamps.len > 0;
    if (bail) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *t = PyBytes_FromStringAndSize(times.data, times.len * 8);
    PyObject *nums = (times.len == 0 || consecutive)
                         ? Py_NewRef(Py_None)
                         : PyBytes_FromStringAndSize(numbers.data, numbers.len * 8);
    PyObject *s = PyBytes_FromStringAndSize(stamps.data, stamps.len * 8);
    if (t && nums && s) result = Py_BuildValue("(OOLO)", t, nums, times.len ? first : 0LL, s);
    Py_XDECREF(t);
    Py_XDECREF(nums);
    Py_XDECREF(s);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    PyMem_Free(times.data);
    PyMem_Free(numbers.data);
    PyMem_Free(stamps.data);
    return result;
}

static PyObject *scan_stretch(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t start, end;
    double max_duration;
    if (!PyArg_ParseTuple(args, "y*nnd", &view, &start, &end, &max_duration)) return NULL;
    if (start < 0) start = 0;
    if (end > view.len) end = view.len;
    int found = 0;
    PyObject *result = stretch(view.buf, start, end, max_duration, &found);
    PyBuffer_Release(&view);
    return result;
}

/* scan_stretches(region, cuts, max_duration, avoid): the stretches region[cuts[0]:cuts[1]],
 * region[cuts[2]:cuts[3]], ... read in one call (a region has hundreds, most of them without a step):
 * for each, None when it is shorter than MIN_STRETCH bytes or holds no step and no stamp (the reader has
 * nothing to do), False when the Python path must read it (it is not plain, or it holds the literal
 * avoid, unless that is empty: the oldest logs' last-step form, which only the Python path reads), else
 * scan_stretch's tuple. */
#define MIN_STRETCH 12 /* cloudml.CloudMLReader._bulk skips shorter stretches: too short for a step line */

static PyObject *scan_stretches(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, avoid;
    PyObject *cuts;
    double max_duration;
    if (!PyArg_ParseTuple(args, "y*O!dy*", &view, &PyList_Type, &cuts, &max_duration, &avoid)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(cuts);
    if (n % 2) {
        PyErr_SetString(PyExc_ValueError, "cuts must hold a start and an end for each stretch");
        goto done;
    }
    result = PyList_New(n / 2);
    if (result == NULL) goto done;
    for (Py_ssize_t i = 0; i < n / 2; i++) {
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(cuts, 2 * i));
        Py_ssize_t end = PyLong_AsSsize_t(PyList_GET_ITEM(cuts, 2 * i + 1));
        if ((start == -1 || end == -1) && PyErr_Occurred()) {
            Py_CLEAR(result);
            goto done;
        }
        if (start < 0) start = 0;
        if (end > view.len) end = view.len;
        PyObject *item;
        if (end - start < MIN_STRETCH) {
            item = Py_NewRef(Py_None);
        } else if (avoid.len && find_literal((const char *)view.buf + start, (const char *)view.buf + end,
                                             avoid.buf, avoid.len) != NULL) {
            item = Py_NewRef(Py_False);
        } else {
            int found = 0;
            item = stretch(view.buf, start, end, max_duration, &found);
            if (item == NULL) {
                Py_CLEAR(result);
                goto done;
            }
            if (item == Py_None) {
                Py_SETREF(item, Py_NewRef(Py_False));
            } else if (!found) {
                Py_SETREF(item, Py_NewRef(Py_None));
            }
        }
        PyList_SET_ITEM(result, i, item);
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&avoid);
    return result;
}

/* json_layout(): compact JSON as orjson writes it, laid out as json.dumps(value, indent=N) lays it out,
 * nested at a level (every line after the first indented by level * N more spaces). It returns None for
 * what it cannot promise to be json.dumps's text: a number with an exponent or below 1e-4 (orjson writes
 * 0.00001 where Python writes 1e-05), a string with an escape or a byte beyond ASCII (json.dumps escapes
 * them differently), or anything that is not compact JSON. A null is written as it is: the caller makes
 * sure that it stands for None, not for a NaN or an infinity (orjson writes those as null too). */
#define LAYOUT_MAX_DEPTH 1000

/* The bytes of a number's digits: 0-9 and the dot. */
static const unsigned char NUMBER_BYTE[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['.'] = 1,
};

static PyObject *json_layout(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t indent, level;
    const char *lead = NULL;
    Py_ssize_t lead_len = 0;
    if (!PyArg_ParseTuple(args, "y*nn|y#", &view, &indent, &level, &lead, &lead_len)) return NULL;
    PyObject *result = NULL;
    const unsigned char *p = view.buf, *end = p + view.len;
    if (indent < 0 || level < 0 || indent > 64 || level > LAYOUT_MAX_DEPTH) {
        PyBuffer_Release(&view);
        return Py_NewRef(Py_None);
    }
    /* Before each token: room for a line end and the deepest indent; a token's own bytes are reserved
     * when its length is known. The text grows by half at a time, starting at the input's size. */
    Py_ssize_t deepest = (level + LAYOUT_MAX_DEPTH + 1) * indent;
    Py_ssize_t cap = view.len + 16, grow = 4096;
    char *out = PyMem_Malloc((size_t)cap), *o = out;
    if (out == NULL) goto nomem;
    Py_ssize_t depth = level;
    int ok = 1;
#define RESERVE(n)                                                               \
    do {                                                                         \
        if ((o - out) + (n) > cap) {                                             \
            Py_ssize_t used = o - out;                                           \
            cap = cap + (n) + grow + cap / 2;                                    \
            char *d = PyMem_Realloc(out, (size_t)cap);                           \
            if (d == NULL) goto nomem;                                           \
            out = d;                                                             \
            o = out + used;                                                      \
        }                                                                        \
    } while (0)
#define NEWLINE()                                                                \
    do {                                                                         \
        *o++ = '\n';                                                             \
        for (Py_ssize_t i_ = depth * indent; i_ > 0; i_--) *o++ = ' ';           \
    } while (0)
    while (p < end) {
        unsigned char c = *p;
        RESERVE(deepest + 8);
        if (c == '-' || is_digit((char)c)) {
            const unsigned char *digits = p + (c == '-');
            const unsigned char *q = digits;
            while (q < end && NUMBER_BYTE[*q]) q++;
            if (q == digits || (q < end && (*q == 'e' || *q == 'E'))) {
                ok = 0;
                break;
            }
            if (q - digits >= 6 && memcmp(digits, "0.0000", 6) == 0) { /* below 1e-4: Python writes 1e-05 */
                ok = 0;
                break;
            }
            RESERVE(q - p);
            while (p < q) *o++ = (char)*p++;
        } else if (c == ',') {
            *o++ = ',';
            NEWLINE();
            p++;
        } else if (c == '{' || c == '[') {
            unsigned char close = c == '{' ? '}' : ']';
            *o++ = (char)c;
            p++;
            if (p < end && *p == close) { /* empty: {} or [] */
                *o++ = (char)close;
                p++;
                continue;
            }
            if (++depth > level + LAYOUT_MAX_DEPTH) {
                ok = 0;
                break;
            }
            NEWLINE();
        } else if (c == '}' || c == ']') {
            if (--depth < level) {
                ok = 0;
                break;
            }
            NEWLINE();
            *o++ = (char)c;
            p++;
        } else if (c == ':') {
            *o++ = ':';
            *o++ = ' ';
            p++;
        } else if (c == '"') {
            const unsigned char *q = p + 1;
            /* printable ASCII without escapes; DEL (0x7f), which json.dumps writes as \u007f and orjson
             * as is, goes back to Python as the other characters json.dumps escapes do */
            while (q < end && *q != '"' && *q != '\\' && *q >= 0x20 && *q < 0x7f) q++;
            if (q == end || *q != '"') {
                ok = 0;
                break;
            }
            RESERVE(q + 1 - p);
            memcpy(o, p, (size_t)(q + 1 - p));
            o += q + 1 - p;
            p = q + 1;
        } else if (end - p >= 4 && (memcmp(p, "null", 4) == 0 || memcmp(p, "true", 4) == 0)) {
            memcpy(o, p, 4);
            o += 4;
            p += 4;
        } else if (end - p >= 5 && memcmp(p, "false", 5) == 0) {
            memcpy(o, p, 5);
            o += 5;
            p += 5;
        } else {
            ok = 0;
            break;
        }
    }
#undef RESERVE
#undef NEWLINE
    /* With lead, a list's items only: lead, then the text without the list's "[" and its closing
     * "\n<indent>]" (one copy, where slicing and concatenating in Python would make two more). */
    Py_ssize_t from = 0, tail = level * indent + 2;
    if (ok && lead != NULL) {
        if (o - out <= tail || out[0] != '[' || o[-1] != ']' || o[-tail] != '\n') ok = 0;
        from = 1;
    } else {
        tail = 0;
    }
    if (ok && lead != NULL)
        for (const char *c = lead; c < lead + lead_len; c++)
            if ((unsigned char)*c >= 0x80) ok = 0; /* the text is ASCII */
    if (!ok || depth != level) {
        result = Py_NewRef(Py_None);
    } else {
        Py_ssize_t size = (o - out) - from - tail;
        result = PyUnicode_New(lead_len + size, 127);
        if (result != NULL) {
            if (lead_len) memcpy(PyUnicode_1BYTE_DATA(result), lead, (size_t)lead_len);
            if (size) memcpy(PyUnicode_1BYTE_DATA(result) + lead_len, out + from, (size_t)size);
        }
    }
    PyMem_Free(out);
    PyBuffer_Release(&view);
    return result;
nomem:
    PyMem_Free(out);
    PyBuffer_Release(&view);
    return PyErr_NoMemory();
}

/* plain_mapping(item, limit, array_type, last_range): jsonstream._plain_mapping for the usual epoch entry,
 * in C: (plain, count) where plain is item with its arrays of 8-byte doubles or longs as lists and its
 * ranges as lists (the list of the last range seen, kept in the dict last_range, is shared), when every
 * key is a str and every value None, a bool, an int, a finite float, a str, such an array (its numbers
 * finite, and their sum as Python's sum() adds them) or a range, of at most limit numbers each; count is
 * how many numbers the sequences hold. None for anything else: the Python function then decides. */
static PyObject *plain_mapping(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *item, *array_type, *last_range;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "O!nOO!", &PyDict_Type, &item, &limit, &array_type, &PyDict_Type, &last_range))
        return NULL;
    PyObject *plain = PyDict_New();
    if (plain == NULL) return NULL;
    Py_ssize_t count = 0, pos = 0;
    PyObject *key, *v;
    while (PyDict_Next(item, &pos, &key, &v)) {
        if (!PyUnicode_CheckExact(key)) goto refuse;
        PyTypeObject *t = Py_TYPE(v);
        PyObject *out = NULL;
        if (t == &PyFloat_Type) {
            if (!isfinite(PyFloat_AS_DOUBLE(v))) goto refuse;
            out = Py_NewRef(v);
        } else if (v == Py_None || t == &PyBool_Type || t == &PyLong_Type || t == &PyUnicode_Type) {
            out = Py_NewRef(v);
        } else if ((PyObject *)t == array_type) {
            Py_buffer view;
            if (PyObject_GetBuffer(v, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto error;
            int is_double = view.itemsize == 8 && view.format && strcmp(view.format, "d") == 0;
            int is_long = view.itemsize == 8 && view.format && strcmp(view.format, "l") == 0;
            Py_ssize_t n = view.len / 8;
            if ((!is_double && !is_long) || n > limit) {
                PyBuffer_Release(&view);
                goto refuse;
            }
            out = PyList_New(n);
            double sum = 0.0;
            for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
                PyObject *x;
                if (is_double) {
                    double d;
                    memcpy(&d, (const char *)view.buf + 8 * i, 8);
                    sum += d;
                    x = PyFloat_FromDouble(d);
                } else {
                    long l;
                    memcpy(&l, (const char *)view.buf + 8 * i, 8);
                    x = PyLong_FromLong(l);
                }
                if (x == NULL) Py_CLEAR(out);
                else PyList_SET_ITEM(out, i, x);
            }
            PyBuffer_Release(&view);
            if (out == NULL) goto error;
            if (is_double && !isfinite(sum)) { /* a NaN or an infinity among them, or a sum beyond floats */
                Py_DECREF(out);
                goto refuse;
            }
            count += n;
        } else if (t == &PyRange_Type) {
            Py_ssize_t n = PyObject_Length(v);
            if (n < 0) goto error;
            if (n > limit) goto refuse;
            out = PyDict_GetItemWithError(last_range, v);
            if (out != NULL) {
                Py_INCREF(out);
            } else {
                if (PyErr_Occurred()) goto error;
                PyDict_Clear(last_range);
                out = PySequence_List(v);
                if (out == NULL || PyDict_SetItem(last_range, v, out) < 0) {
                    Py_XDECREF(out);
                    goto error;
                }
            }
            count += n;
        } else {
            goto refuse;
        }
        int failed = PyDict_SetItem(plain, key, out);
        Py_DECREF(out);
        if (failed < 0) goto error;
    }
    return Py_BuildValue("(Nn)", plain, count);
refuse:
    Py_DECREF(plain);
    Py_RETURN_NONE;
error:
    Py_DECREF(plain);
    return NULL;
}

/* rare_lines(region, starts): the offsets of the newlines of region that are followed by one of the byte
 * strings of the tuple starts, in order: where a line that begins with one of them starts. */
#define MAX_STARTS 64

/* Appends the offset of the newline nl to result when the line after it begins with one of the n starts;
 * -1 on a Python error. */
static int rare_line_at(PyObject *result, const char *base, const char *nl, const char *end, Py_ssize_t n,
                        const char *const *start, const Py_ssize_t *length) {
    const char *line = nl + 1;
    uint32_t head = 0; /* the line's first four bytes: most lines that share a start's first byte differ there */
    if (end - line >= 4) memcpy(&head, line, 4);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (start[i][0] != *line || end - line < length[i]) continue;
        if (length[i] >= 4) {
            uint32_t want;
            memcpy(&want, start[i], 4);
            if (want != head) continue;
        }
        if (memcmp(line, start[i], (size_t)length[i])) continue;
        PyObject *at = PyLong_FromSsize_t(nl - base);
        if (at == NULL || PyList_Append(result, at) < 0) {
            Py_XDECREF(at);
            return -1;
        }
        Py_DECREF(at);
        return 0;
    }
    return 0;
}

static PyObject *rare_lines(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *starts;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyTuple_Type, &starts)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(starts);
    const char *start[MAX_STARTS];
    Py_ssize_t length[MAX_STARTS];
    unsigned char first[256] = {0};
    if (n > MAX_STARTS) {
        PyErr_SetString(PyExc_ValueError, "too many starts");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(starts, i);
        if (!PyBytes_Check(s) || PyBytes_GET_SIZE(s) == 0) {
            PyErr_SetString(PyExc_TypeError, "starts must be a tuple of non-empty bytes");
            goto done;
        }
        start[i] = PyBytes_AS_STRING(s);
        length[i] = PyBytes_GET_SIZE(s);
        first[(unsigned char)start[i][0]] = 1;
    }
    result = PyList_New(0);
    if (result == NULL) goto done;
    const char *base = view.buf, *end = base + view.len, *p = base;
#if defined(__SSE2__)
    /* Sixteen bytes at a time: the newlines of a block, each line start then tested by its first byte. */
    const __m128i newline = _mm_set1_epi8('\n');
    for (; end - p >= 16; p += 16) {
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), newline));
        for (; mask; mask &= mask - 1) {
            const char *nl = p + __builtin_ctz(mask);
            if (nl + 1 < end && first[(unsigned char)nl[1]] && rare_line_at(result, base, nl, end, n, start, length) < 0) {
                Py_CLEAR(result);
                goto done;
            }
        }
    }
#endif
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL || nl + 1 >= end) break;
        p = nl + 1;
        if (first[(unsigned char)nl[1]] && rare_line_at(result, base, nl, end, n, start, length) < 0) {
            Py_CLEAR(result);
            goto done;
        }
    }
done:
    PyBuffer_Release(&view);
    return result;
}

/* find_all(data, literal): where literal occurs in data, in order, not overlapping (find_literal). */
static PyObject *find_all(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, lit;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &lit)) return NULL;
    PyObject *result = NULL;
    if (lit.len == 0) {
        PyErr_SetString(PyExc_ValueError, "empty literal");
        goto done;
    }
    result = PyList_New(0);
    if (result == NULL) goto done;
    const char *base = view.buf, *end = base + view.len;
    for (const char *p = base; end - p >= lit.len;) {
        const char *hit = find_literal(p, end, lit.buf, lit.len);
        if (hit == NULL) break;
        PyObject *at = PyLong_FromSsize_t(hit - base);
        if (at == NULL || PyList_Append(result, at) < 0) {
            Py_XDECREF(at);
            Py_CLEAR(result);
            goto done;
        }
        Py_DECREF(at);
        p = hit + lit.len;
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&lit);
    return result;
}

/* contains(data, literal): literal in data, by find_literal (bytes' own search slows down on literals whose
 * bytes are frequent in logs, such as ":::MLLOG"). */
static PyObject *contains(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, lit;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &lit)) return NULL;
    const char *base = view.buf;
    int found = lit.len == 0 || find_literal(base, base + view.len, lit.buf, lit.len) != NULL;
    PyBuffer_Release(&view);
    PyBuffer_Release(&lit);
    return PyBool_FromLong(found);
}

/* count_newlines(data): data.count(b"\n"), sixteen bytes at a time where SSE2 is there (every x86-64):
 * each compare gives -1 in the bytes that hold a newline, subtracted into sixteen byte counters, which are
 * summed (psadbw) before any can pass 255. Elsewhere eight bytes at a time: a byte b of
 * x = word ^ "\n\n\n\n\n\n\n\n" is zero where the word has a newline; ((b & 0x7f) + 0x7f) | b has its high
 * bit set exactly when b is not zero, and no carry crosses into the next byte. */
static Py_ssize_t newlines_in(const unsigned char *p, const unsigned char *end) {
    Py_ssize_t count = 0;
#if defined(__SSE2__)
    const __m128i newline = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
    while (end - p >= 16) {
        __m128i counters = zero;
        Py_ssize_t blocks = (end - p) / 16;
        if (blocks > 255) blocks = 255;
        for (Py_ssize_t i = 0; i < blocks; i++, p += 16) {
            __m128i bytes = _mm_loadu_si128((const __m128i *)p);
            counters = _mm_sub_epi8(counters, _mm_cmpeq_epi8(bytes, newline));
        }
        __m128i sums = _mm_sad_epu8(counters, zero);
        count += _mm_cvtsi128_si32(sums) + _mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
    }
#else
    const uint64_t newlines = 0x0a0a0a0a0a0a0a0aULL, low7 = 0x7f7f7f7f7f7f7f7fULL;
    const uint64_t high = 0x8080808080808080ULL;
    for (; end - p >= 8; p += 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        uint64_t x = word ^ newlines;
        count += __builtin_popcountll(~(((x & low7) + low7) | x) & high);
    }
#endif
    for (; p < end; p++) count += *p == '\n';
    return count;
}

static PyObject *count_newlines(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t count = newlines_in(p, p + view.len);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

static PyMethodDef methods[] = {
    {"scan_stretch", scan_stretch, METH_VARARGS,
     "scan_stretch(region, start, end, max_duration) -> (times, numbers, first, stamps) | None\n\n"
     "Step times, step numbers (None when consecutive from first) and wall-clock stamps of\n"
     "region[start:end] as bytes of native 8-byte values; None when the Python path must read it."},
    {"scan_stretches", scan_stretches, METH_VARARGS,
     "scan_stretches(region, cuts, max_duration, avoid) -> list[tuple | None | False]\n\n"
     "scan_stretch of region[cuts[0]:cuts[1]], region[cuts[2]:cuts[3]], ...: for each, None when it is\n"
     "shorter than 12 bytes or holds nothing to read, False when the Python path must read it (or it\n"
     "holds avoid, when that is not empty)."},
    {"rare_lines", rare_lines, METH_VARARGS,
     "rare_lines(region, starts) -> list[int]\n\n"
     "The offsets of the newlines of region followed by one of the bytes of the tuple starts."},
    {"find_all", find_all, METH_VARARGS,
     "find_all(data, literal) -> list[int]\n\nWhere literal occurs in data, in order, not overlapping."},
    {"contains", contains, METH_VARARGS,
     "contains(data, literal) -> bool\n\nliteral in data, sixteen bytes at a time."},
    {"count_newlines", count_newlines, METH_VARARGS,
     "count_newlines(data) -> int\n\ndata.count(b'\\n'), sixteen bytes at a time."},
    {"plain_mapping", plain_mapping, METH_VARARGS,
     "plain_mapping(item, limit, array_type, last_range) -> tuple[dict, int] | None\n\n"
     "jsonstream._plain_mapping of the usual epoch entry; None where the Python function decides."},
    {"json_layout", json_layout, METH_VARARGS,
     "json_layout(compact, indent, level[, lead]) -> str | None\n\n"
     "orjson's compact text laid out as json.dumps(value, indent=indent) at nesting level `level`;\n"
     "None where that text could differ from json.dumps's (exponents, numbers below 1e-4, escapes).\n"
     "With lead (ASCII bytes), a non-empty list's items only, after lead: the text without the list's\n"
     "'[' and its closing line."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "trainsweep.logs._scan",
    "C hot loops of the cloud-ML log reader (see cloudml.py) and of the JSON writer (see jsonstream.py);\n"
    "optional: the Python paths are the reference.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
