// The main loop of placer.ordering.reference.materialize, compiled. reference.py prepares every constant with numpy
// (the rows' offsets, the hazard keys and the predecessors as CSR arrays) and keeps the Python loop as the
// reference; this file is a line-by-line port of that loop, so both give the same schedule bit for bit.
//
//   materialize(order, source, words, dst_ptr, dst_tile, dst_addr, select, pointer, lead, guard,
//               pred_ptr, pred, src_key_ptr, src_key, dst_key_ptr, dst_key_entry, dst_key, keys,
//               tx, rx, cutover, carries, horizon) -> bool
//
// Every argument is a C-contiguous buffer of int64 except `keys` (the number of hazard keys) and the outputs
// cutover/carries (bool, one byte each); tx, rx, cutover, carries and horizon are written in place (the caller
// zeroes them; the number of tiles is horizon's length). Returns False, having decided nothing, where the Python
// loop would index its event rows outside [0, cap): it would raise IndexError or, on a negative index, read the
// row's end, and the caller runs the Python loop instead so that whatever happens there happens. The caller
// declines the other inputs the loops would not treat alike (an order, predecessor or tile out of range, a
// transfer without destinations, negative words, addresses near the int64 limits) before calling; they are
// checked again here, raising ValueError, so that no call reads outside a buffer or overflows.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace {

using i64 = int64_t;
using u8 = uint8_t;

constexpr u8 kXpic = 1, kPic = 2, kSend = 4;  // reference.py's _XPIC, _PIC, _SEND
constexpr i64 kFirstCap = i64(1) << 12;       // reference.py's first `cap`
// bounds that keep every sum of the loop inside int64 (a phase's words are int32; reference.py declines larger
// addresses, where Python's integers would not overflow)
constexpr i64 kMaxWords = (i64(1) << 32) - 1, kMaxAddress = i64(1) << 60;

// Intervals on one (tile, memory element), sorted by start with a running largest end: reference.py's _History.
struct History {
  std::vector<i64> starts, ends, peak;

  void record(i64 start, i64 end) {
    if (starts.empty() || start >= starts.back()) {
      peak.push_back(peak.empty() ? end : std::max(end, peak.back()));
      starts.push_back(start);
      ends.push_back(end);
      return;
    }
    const size_t k = size_t(std::upper_bound(starts.begin(), starts.end(), start) - starts.begin());
    starts.insert(starts.begin() + k, start);
    ends.insert(ends.begin() + k, end);
    peak.insert(peak.begin() + k, 0);
    i64 top = k ? peak[k - 1] : 0;
    for (size_t j = k; j < starts.size(); ++j) {
      top = std::max(top, ends[j]);
      peak[j] = top;
    }
  }

  // latest end of an interval overlapping [start, end), or -1
  i64 conflict_end(i64 start, i64 end) const {
    const size_t c = size_t(std::lower_bound(starts.begin(), starts.end(), end) - starts.begin());
    if (c == 0) return -1;
    const i64 latest = peak[c - 1];
    return latest > start ? latest : -1;
  }
};

// One tile's event flags per cycle. Python grows every tile's row to `cap` at once; here a row is only as long as
// the cycles it has been asked about (a cycle never written reads zero either way), which saves the memory of
// every idle tile's row.
struct Row {
  std::vector<u8> flags;

  void reach(i64 index) {  // index < cap, checked by the caller
    if (i64(flags.size()) <= index) flags.resize(size_t(std::max(index + 1, i64(flags.size()) * 2)), 0);
  }
};

struct Inputs {
  const i64 *order, *source, *words, *dptr, *dest, *addr, *sel, *ptr, *lead, *guard;
  const i64 *pred_ptr, *pred, *skey_ptr, *skey, *dkey_ptr, *dkey_entry, *dkey;
  i64 n_order, n, entries, tiles, keys;
};

struct Outputs {
  i64 *tx, *rx, *horizon;
  bool *cutover, *carries;
};

bool run(const Inputs& in, const Outputs& out) {
  const size_t n = static_cast<size_t>(in.n), tiles = static_cast<size_t>(in.tiles);
  const size_t keys = static_cast<size_t>(in.keys);
  std::vector<History> sends_on(keys), receives_on(keys);
  std::vector<i64> completion(n, 0);
  std::vector<std::vector<i64>> lane_starts(tiles), lane_ends(tiles);
  std::vector<i64> select_end(tiles, -1), payload_end(tiles, 0), next_address(tiles, -1);
  std::vector<Row> events(tiles);
  i64 cap = kFirstCap;
  const i64* sel_of = in.sel;
  const i64* ptr_of = in.ptr;
  i64* horizon = out.horizon;
  bool* carries = out.carries;
  for (i64 t = 0; t < in.n_order; ++t) {
    const i64 i = in.order[t];
    const i64 s = in.source[i], w = in.words[i], lead = in.lead[i], guard = in.guard[i];
    const i64 a = in.dptr[i], b = in.dptr[i + 1];
    i64 o = 0;
    for (i64 k = in.pred_ptr[i]; k < in.pred_ptr[i + 1]; ++k) o = std::max(o, completion[size_t(in.pred[k])]);
    for (i64 e = a; e < b; ++e) {  // the receive streams' own bounds (fixed while this transfer is placed)
      const i64 d = in.dest[e];
      if (select_end[size_t(d)] >= 0) {
        carries[e] = in.addr[e] == next_address[size_t(d)];
        o = std::max(o, select_end[size_t(d)] - sel_of[e]);
        if (!carries[e]) o = std::max(o, payload_end[size_t(d)] - ptr_of[e]);
      }
    }
    // the cycles this transfer's checks touch, relative to o: Python's rows must hold them at every step
    i64 top = ptr_of[a], lo = lead, hi = lead + 1;
    for (i64 e = a; e < b; ++e) {
      top = std::max(top, ptr_of[e]);
      lo = std::min({lo, sel_of[e] - 1, sel_of[e] + w - 1, ptr_of[e] - 1});
      hi = std::max({hi, sel_of[e], sel_of[e] + w, ptr_of[e]});
    }
    top += w + 2;
    const i64 s_lo = in.skey_ptr[i], s_hi = in.skey_ptr[i + 1];
    const i64 d_lo = in.dkey_ptr[i], d_hi = in.dkey_ptr[i + 1];
    std::vector<i64>& starts = lane_starts[size_t(s)];
    std::vector<i64>& ends = lane_ends[size_t(s)];
    Row& lane_ev = events[size_t(s)];
    i64 start = 0;
    for (;;) {
      if (o + top >= cap) cap += std::max(cap, o + top - cap + 1);
      if (o + lo < 0 || o + hi >= cap) return false;
      start = o + lead;
      const i64 k = i64(std::upper_bound(starts.begin(), starts.end(), start) - starts.begin()) - 1;
      if (k >= 0 && ends[size_t(k)] > start) {
        o = ends[size_t(k)] - lead;
        continue;
      }
      if (k + 1 < i64(starts.size()) && starts[size_t(k + 1)] < start + w) {
        o = ends[size_t(k + 1)] - lead;
        continue;
      }
      lane_ev.reach(o + hi);
      if ((lane_ev.flags[size_t(start)] | lane_ev.flags[size_t(start + 1)]) & (kXpic | kPic)) {
        o += 1;
        continue;
      }
      bool clash = false;
      for (i64 e = a; e < b; ++e) {
        const i64 d = in.dest[e];
        Row& row = events[size_t(d)];
        const i64 x = o + sel_of[e];
        row.reach(o + hi);
        const u8* ev = row.flags.data();
        const u8 f = ev[x];
        if ((f & kXpic) && x != select_end[size_t(d)]) {  // except a cutover onto the teardown
          clash = true;
          break;
        }
        const u8 g = ev[x + w];
        if ((g & kXpic) || ((f | ev[x - 1] | g | ev[x + w - 1]) & kSend)) {
          clash = true;
          break;
        }
        if (!carries[e]) {
          const i64 pe = o + ptr_of[e];
          const u8 h = ev[pe];
          if ((h & kPic) || ((h | ev[pe - 1]) & kSend)) {
            clash = true;
            break;
          }
        }
      }
      if (clash) {
        o += 1;
        continue;
      }
      i64 delay = 0;
      if (s_lo < s_hi) {
        const i64 lane_end = std::max(start + w, o + 6);
        for (i64 k2 = s_lo; k2 < s_hi; ++k2) {
          const History& hist = receives_on[size_t(in.skey[k2])];
          if (!hist.starts.empty()) delay = std::max(delay, hist.conflict_end(start, lane_end) - start);
        }
      }
      for (i64 k2 = d_lo; k2 < d_hi; ++k2) {
        const History& hist = sends_on[size_t(in.dkey[k2])];
        if (!hist.starts.empty()) {
          const i64 pk = o + ptr_of[in.dkey_entry[k2]];
          delay = std::max(delay, hist.conflict_end(pk, pk + w + guard) - pk);
        }
      }
      if (delay > 0) {
        o += delay;
        continue;
      }
      break;
    }
    start = o + lead;
    const size_t k = size_t(std::upper_bound(starts.begin(), starts.end(), start) - starts.begin());
    starts.insert(starts.begin() + k, start);
    ends.insert(ends.begin() + k, start + w);
    lane_ev.flags[size_t(start)] |= kSend;
    const i64 lane_end = std::max(start + w, o + 6);
    if (lane_end > horizon[s]) horizon[s] = lane_end;
    out.tx[i] = start;
    i64 done = start + w;
    for (i64 e = a; e < b; ++e) {
      const i64 d = in.dest[e];
      u8* ev = events[size_t(d)].flags.data();
      const i64 x = o + sel_of[e];
      const i64 pe = o + ptr_of[e];
      out.cutover[e] = x == select_end[size_t(d)];
      ev[x] |= kXpic;
      ev[x + w] |= kXpic;
      if (!carries[e]) ev[pe] |= kPic;
      select_end[size_t(d)] = x + w;
      payload_end[size_t(d)] = pe + w;
      next_address[size_t(d)] = in.addr[e] + 4 * w;
      if (pe + w + guard > horizon[d]) horizon[d] = pe + w + guard;
      out.rx[e] = pe;
      if (pe + w > done) done = pe + w;
    }
    completion[size_t(i)] = done;
    for (i64 k2 = s_lo; k2 < s_hi; ++k2) sends_on[size_t(in.skey[k2])].record(start, lane_end);
    for (i64 k2 = d_lo; k2 < d_hi; ++k2) {
      const i64 pk = o + ptr_of[in.dkey_entry[k2]];
      receives_on[size_t(in.dkey[k2])].record(pk, pk + w + guard);
    }
  }
  return true;
}

// A Py_buffer released with its owner, so that every early return frees what was acquired.
class View {
 public:
  View() { std::memset(&view_, 0, sizeof(view_)); }
  ~View() {
    if (held_) PyBuffer_Release(&view_);
  }
  View(const View&) = delete;
  View& operator=(const View&) = delete;

  // a C-contiguous buffer of one-dimensional items of `itemsize` bytes, typed int64 or bool by its format
  bool acquire(PyObject* obj, bool writable, Py_ssize_t itemsize, const char* name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &view_, flags) < 0) return false;
    held_ = true;
    const char* fmt = view_.format ? view_.format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') ++fmt;
    bool typed = itemsize == 8 ? (std::strcmp(fmt, "q") == 0 || (std::strcmp(fmt, "l") == 0 && sizeof(long) == 8))
                               : std::strcmp(fmt, "?") == 0;
    if (view_.itemsize != itemsize || view_.ndim > 1 || !typed) {
      PyErr_Format(PyExc_TypeError, "materialize: %s must be a contiguous %s array", name,
                   itemsize == 8 ? "int64" : "bool");
      return false;
    }
    return true;
  }

  i64 size() const { return i64(view_.len / view_.itemsize); }
  template <typename T>
  T* data() const {
    return static_cast<T*>(view_.buf);
  }

 private:
  Py_buffer view_;
  bool held_ = false;
};

bool bad(const char* what) {
  PyErr_Format(PyExc_ValueError, "materialize: %s", what);
  return false;
}

// Everything the loop indexes through, checked once: a wrong call raises ValueError rather than reading outside
// a buffer.
bool check(const Inputs& in) {
  const i64 n = in.n, entries = in.entries, tiles = in.tiles;
  if (in.dptr[0] != 0 || in.dptr[n] != entries) return bad("dst_ptr does not span the entries");
  for (i64 i = 0; i < n; ++i) {
    if (in.dptr[i + 1] <= in.dptr[i]) return bad("a transfer without destinations");
    if (in.source[i] < 0 || in.source[i] >= tiles) return bad("source tile out of range");
    if (in.words[i] < 0 || in.words[i] > kMaxWords) return bad("words out of range");
  }
  for (i64 e = 0; e < entries; ++e) {
    if (in.dest[e] < 0 || in.dest[e] >= tiles) return bad("destination tile out of range");
    if (in.addr[e] <= -kMaxAddress || in.addr[e] >= kMaxAddress) return bad("address out of range");
  }
  for (i64 t = 0; t < in.n_order; ++t)
    if (in.order[t] < 0 || in.order[t] >= n) return bad("order names no transfer");
  auto csr = [n](const i64* ptr, i64 len) {
    if (ptr[0] != 0 || ptr[n] != len) return false;
    for (i64 i = 0; i < n; ++i)
      if (ptr[i + 1] < ptr[i]) return false;
    return true;
  };
  if (!csr(in.pred_ptr, in.pred_ptr[n]) || !csr(in.skey_ptr, in.skey_ptr[n]) || !csr(in.dkey_ptr, in.dkey_ptr[n]))
    return bad("a CSR pointer array is not non-decreasing from 0");
  for (i64 k = 0; k < in.pred_ptr[n]; ++k)
    if (in.pred[k] < 0 || in.pred[k] >= n) return bad("predecessor out of range");
  for (i64 k = 0; k < in.skey_ptr[n]; ++k)
    if (in.skey[k] < 0 || in.skey[k] >= in.keys) return bad("send key out of range");
  for (i64 k = 0; k < in.dkey_ptr[n]; ++k) {
    if (in.dkey[k] < 0 || in.dkey[k] >= in.keys) return bad("receive key out of range");
    const i64 e = in.dkey_entry[k];
    if (e < 0 || e >= entries) return bad("receive key entry out of range");
  }
  return true;
}

PyObject* py_materialize(PyObject*, PyObject* args) {
  constexpr int kIn = 17, kOut = 5;
  PyObject* obj[kIn + kOut];
  long long keys = 0;
  if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOLOOOOO", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &obj[5],
                        &obj[6], &obj[7], &obj[8], &obj[9], &obj[10], &obj[11], &obj[12], &obj[13], &obj[14],
                        &obj[15], &obj[16], &keys, &obj[17], &obj[18], &obj[19], &obj[20], &obj[21]))
    return nullptr;
  static const char* names[kIn + kOut] = {
      "order",       "source",   "words",       "dst_ptr",       "dst_tile", "dst_addr", "select", "pointer",
      "lead",        "guard",    "pred_ptr",    "pred",          "src_key_ptr", "src_key", "dst_key_ptr",
      "dst_key_entry", "dst_key", "tx",         "rx",            "cutover",  "carries",  "horizon"};
  View v[kIn + kOut];
  for (int k = 0; k < kIn + kOut; ++k) {
    const bool boolean = k == kIn + 2 || k == kIn + 3;
    if (!v[k].acquire(obj[k], k >= kIn, boolean ? 1 : 8, names[k])) return nullptr;
  }
  Inputs in{};
  const i64* p[kIn];
  for (int k = 0; k < kIn; ++k) p[k] = v[k].data<const i64>();
  in.order = p[0], in.source = p[1], in.words = p[2], in.dptr = p[3], in.dest = p[4], in.addr = p[5];
  in.sel = p[6], in.ptr = p[7], in.lead = p[8], in.guard = p[9], in.pred_ptr = p[10], in.pred = p[11];
  in.skey_ptr = p[12], in.skey = p[13], in.dkey_ptr = p[14], in.dkey_entry = p[15], in.dkey = p[16];
  in.n_order = v[0].size(), in.n = v[1].size(), in.entries = v[4].size(), in.tiles = v[kIn + 4].size();
  in.keys = keys;
  const i64 n = in.n, entries = in.entries;
  if (v[2].size() != n || v[3].size() != n + 1 || v[5].size() != entries || v[6].size() != entries ||
      v[7].size() != entries || v[8].size() != n || v[9].size() != n || v[10].size() != n + 1 ||
      v[12].size() != n + 1 || v[14].size() != n + 1 || v[15].size() != v[16].size() ||
      v[kIn].size() != n || v[kIn + 1].size() != entries || v[kIn + 2].size() != entries ||
      v[kIn + 3].size() != entries || keys < 0) {
    PyErr_SetString(PyExc_ValueError, "materialize: array lengths do not match");
    return nullptr;
  }
  if (v[11].size() != in.pred_ptr[n] || v[13].size() != in.skey_ptr[n] || v[15].size() != in.dkey_ptr[n]) {
    PyErr_SetString(PyExc_ValueError, "materialize: a CSR array's length does not match its pointers");
    return nullptr;
  }
  if (!check(in)) return nullptr;
  Outputs out{v[kIn].data<i64>(), v[kIn + 1].data<i64>(), v[kIn + 4].data<i64>(), v[kIn + 2].data<bool>(),
              v[kIn + 3].data<bool>()};
  bool ok = false, oom = false;
  Py_BEGIN_ALLOW_THREADS
  try {
    ok = run(in, out);
  } catch (const std::bad_alloc&) {
    oom = true;
  }
  Py_END_ALLOW_THREADS
  if (oom) return PyErr_NoMemory();
  return PyBool_FromLong(ok);
}

PyMethodDef kMethods[] = {
    {"materialize", py_materialize, METH_VARARGS,
     "materialize(order, source, words, dst_ptr, dst_tile, dst_addr, select, pointer, lead, guard, pred_ptr, pred, "
     "src_key_ptr, src_key, dst_key_ptr, dst_key_entry, dst_key, keys, tx, rx, cutover, carries, horizon) -> bool"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_materialize",
                       "Compiled reference timing (see placer.ordering.reference.materialize).", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__materialize(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  // the interface version reference.py expects (reference._VERSION): bump it with any change to the call
  if (PyModule_AddIntConstant(m, "VERSION", 1) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
