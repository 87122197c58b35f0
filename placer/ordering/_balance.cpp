// The balancing heap of placer.ordering.greedy.balanced_picks, compiled. greedy.py prepares the order-free inputs
// with numpy (the items' rank, every endpoint's total work, the destination sets as CSR) and keeps the Python
// simulation as the reference; this file is a line-by-line port of it, so both give the same picks.
//
//   picks(rank, wave, words, stream, source, dset, set_ptr, set_res, work, picked) -> int
//
// Every argument is a C-contiguous buffer of int64. rank, wave, words, stream, source, dset and picked have one
// entry per item; set_res holds each destination set's endpoints (tiles + tile, so a port) as CSR over set_ptr;
// work holds every endpoint's remaining work (its length is the number of endpoints) and is updated in place, as
// picked (each item's pick number) is written. Returns how many items were picked (the caller raises if not all,
// as the Python loop does). The caller declines the inputs the loops would not treat alike (an endpoint or a set
// out of range, words whose sums could leave int64) and negative words (times would go back: the Python loop can
// then run forever) before calling; they are checked again here, raising ValueError, so that no call reads
// outside a buffer, overflows or does not end.
//
// Every heap holds distinct keys (an item is in one heap at a time and its id is in its key; an endpoint has at
// most one event, guarded by `queued`), so any binary heap pops in the same order as Python's heapq.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <tuple>
#include <vector>

namespace {

using i64 = int64_t;

// the words summed over all items, and |work|, stay below this: every ready time and remaining work then fits int64
constexpr i64 kMaxTotal = i64(1) << 62;

struct Parked {  // Python's (-work, stream, item)
  i64 neg_w, stream, item;
  bool operator>(const Parked& o) const {
    return std::tie(neg_w, stream, item) > std::tie(o.neg_w, o.stream, o.item);
  }
};

struct Compete {  // Python's (-work, stream, item, endpoint)
  i64 neg_w, stream, item, endpoint;
  bool operator>(const Compete& o) const {
    return std::tie(neg_w, stream, item, endpoint) > std::tie(o.neg_w, o.stream, o.item, o.endpoint);
  }
};

struct Event {  // Python's (time, endpoint)
  i64 time, endpoint;
  bool operator>(const Event& o) const { return std::tie(time, endpoint) > std::tie(o.time, o.endpoint); }
};

// heapq's heappush and heappop: a min-heap over a vector
template <typename T>
void push(std::vector<T>& heap, const T& x) {
  heap.push_back(x);
  std::push_heap(heap.begin(), heap.end(), std::greater<T>());
}

template <typename T>
T pop(std::vector<T>& heap) {
  std::pop_heap(heap.begin(), heap.end(), std::greater<T>());
  T x = heap.back();
  heap.pop_back();
  return x;
}

struct Inputs {
  const i64 *rank, *wave, *words, *stream, *source, *dset, *set_ptr, *set_res;
  i64 count, sets, set_entries, endpoints;
};

struct Blocker {
  i64 t, b, w;
};

class Balance {
 public:
  Balance(const Inputs& in, i64* work, i64* picked)
      : in_(in), work_(work), picked_(picked), ready_(size_t(in.endpoints), 0), parked_(size_t(in.endpoints)),
        queued_(size_t(in.endpoints), 0) {}

  i64 run() {
    i64 n_picked = 0;
    std::vector<Compete> compete;
    for (i64 lo = 0; lo < in_.count;) {  // wave by wave: rank is sorted by wave first
      const i64 k = in_.wave[in_.rank[lo]];
      i64 hi = lo;
      while (hi < in_.count && in_.wave[in_.rank[hi]] == k) park(in_.rank[hi++]);
      lo = hi;
      while (!events_.empty()) {
        const i64 now = events_.front().time;
        compete.clear();
        while (!events_.empty() && events_.front().time == now) {
          const i64 e = pop(events_).endpoint;
          queued_[size_t(e)] = 0;
          if (ready_[size_t(e)] > now) {  // used meanwhile: wait for its new time
            if (!parked_[size_t(e)].empty()) {
              queued_[size_t(e)] = 1;
              push(events_, Event{ready_[size_t(e)], e});
            }
            continue;
          }
          best_of(e, now, compete);
        }
        while (!compete.empty()) {
          const Compete top = pop(compete);
          const i64 c = top.item, e = top.endpoint;
          const Blocker bl = blocker(c);
          if (bl.t > now) {  // lost an endpoint to a better item at this time
            push(parked_[size_t(bl.b)], Parked{-bl.w, top.stream, c});
            wake(bl.b);
            if (ready_[size_t(e)] <= now) best_of(e, now, compete);
            continue;
          }
          if (-bl.w != top.neg_w) {
            push(compete, Compete{-bl.w, top.stream, c, e});
            continue;
          }
          const i64 w = in_.words[c];
          const i64 end = now + w;
          take(in_.source[c], end, w);
          const i64 d = in_.dset[c];
          for (i64 k2 = in_.set_ptr[d]; k2 < in_.set_ptr[d + 1]; ++k2) take(in_.set_res[k2], end, w);
          picked_[c] = n_picked++;
        }
      }
    }
    return n_picked;
  }

 private:
  // (latest ready, its endpoint (the first one on ties: the source's lane, then the set's ports in set order),
  // largest remaining work) of item c; (-1, 0, 0) when no endpoint is ready at 0 or later, as in Python
  Blocker blocker(i64 c) const {
    Blocker bl{-1, 0, 0};
    auto visit = [&](i64 r) {
      if (ready_[size_t(r)] > bl.t) {
        bl.t = ready_[size_t(r)];
        bl.b = r;
      }
      if (work_[r] > bl.w) bl.w = work_[r];
    };
    visit(in_.source[c]);
    const i64 d = in_.dset[c];
    for (i64 k = in_.set_ptr[d]; k < in_.set_ptr[d + 1]; ++k) visit(in_.set_res[k]);
    return bl;
  }

  // an event for endpoint b at its ready time, unless it has one
  void wake(i64 b) {
    if (!queued_[size_t(b)]) {
      queued_[size_t(b)] = 1;
      push(events_, Event{ready_[size_t(b)], b});
    }
  }

  void park(i64 c) {
    const Blocker bl = blocker(c);
    push(parked_[size_t(bl.b)], Parked{-bl.w, in_.stream[c], c});
    wake(bl.b);
  }

  // move endpoint e's best item that can start at `now` into `compete`; re-park the others met
  void best_of(i64 e, i64 now, std::vector<Compete>& compete) {
    std::vector<Parked>& queue = parked_[size_t(e)];
    while (!queue.empty()) {
      const Parked top = pop(queue);
      const i64 c = top.item;
      const Blocker bl = blocker(c);
      if (bl.t > now) {  // blocked elsewhere (or here, later)
        push(parked_[size_t(bl.b)], Parked{-bl.w, top.stream, c});
        wake(bl.b);
        continue;
      }
      if (-bl.w != top.neg_w) {  // its work went down: back in line with the current value
        push(queue, Parked{-bl.w, top.stream, c});
        continue;
      }
      push(compete, Compete{-bl.w, top.stream, c, e});
      return;
    }
  }

  // a picked item's endpoint r: busy until `end`, `w` less work; its parked items compete then
  void take(i64 r, i64 end, i64 w) {
    ready_[size_t(r)] = end;
    work_[r] -= w;
    if (!parked_[size_t(r)].empty() && !queued_[size_t(r)]) {
      queued_[size_t(r)] = 1;
      push(events_, Event{end, r});
    }
  }

  const Inputs& in_;
  i64* work_;
  i64* picked_;
  std::vector<i64> ready_;
  std::vector<std::vector<Parked>> parked_;
  std::vector<char> queued_;
  std::vector<Event> events_;
};

// A Py_buffer released with its owner, so that every early return frees what was acquired.
class View {
 public:
  View() { std::memset(&view_, 0, sizeof(view_)); }
  ~View() {
    if (held_) PyBuffer_Release(&view_);
  }
  View(const View&) = delete;
  View& operator=(const View&) = delete;

  // a C-contiguous one-dimensional buffer of int64
  bool acquire(PyObject* obj, bool writable, const char* name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &view_, flags) < 0) return false;
    held_ = true;
    const char* fmt = view_.format ? view_.format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') ++fmt;
    const bool typed = std::strcmp(fmt, "q") == 0 || (std::strcmp(fmt, "l") == 0 && sizeof(long) == 8);
    if (view_.itemsize != 8 || view_.ndim > 1 || !typed) {
      PyErr_Format(PyExc_TypeError, "picks: %s must be a contiguous int64 array", name);
      return false;
    }
    return true;
  }

  i64 size() const { return i64(view_.len / view_.itemsize); }
  i64* data() const { return static_cast<i64*>(view_.buf); }

 private:
  Py_buffer view_;
  bool held_ = false;
};

bool bad(const char* what) {
  PyErr_Format(PyExc_ValueError, "picks: %s", what);
  return false;
}

// Everything the loop indexes through, and the bounds that keep its sums inside int64, checked once.
bool check(const Inputs& in, const i64* work) {
  const i64 count = in.count, endpoints = in.endpoints;
  std::vector<char> seen(size_t(count), 0);
  i64 total = 0;
  for (i64 i = 0; i < count; ++i) {
    const i64 c = in.rank[i];
    if (c < 0 || c >= count || seen[size_t(c)]) return bad("rank is not a permutation of the items");
    seen[size_t(c)] = 1;
    if (in.source[i] < 0 || in.source[i] >= endpoints) return bad("source endpoint out of range");
    if (in.dset[i] < 0 || in.dset[i] >= in.sets) return bad("destination set out of range");
    const i64 w = in.words[i];
    if (w < 0 || w >= kMaxTotal) return bad("words out of range");
    total += w;
    if (total >= kMaxTotal) return bad("words out of range");
  }
  for (i64 i = 0; i + 1 < count; ++i)
    if (in.wave[in.rank[i]] > in.wave[in.rank[i + 1]]) return bad("rank is not sorted by wave");
  if (in.set_ptr[0] != 0 || in.set_ptr[in.sets] != in.set_entries) return bad("set_ptr does not span set_res");
  for (i64 d = 0; d < in.sets; ++d)
    if (in.set_ptr[d + 1] < in.set_ptr[d]) return bad("set_ptr is not non-decreasing");
  for (i64 k = 0; k < in.set_entries; ++k)
    if (in.set_res[k] < 0 || in.set_res[k] >= endpoints) return bad("set endpoint out of range");
  for (i64 r = 0; r < endpoints; ++r)
    if (work[r] <= -kMaxTotal || work[r] >= kMaxTotal) return bad("work out of range");
  return true;
}

PyObject* py_picks(PyObject*, PyObject* args) {
  constexpr int kArgs = 10;
  PyObject* obj[kArgs];
  if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &obj[5], &obj[6], &obj[7],
                        &obj[8], &obj[9]))
    return nullptr;
  static const char* names[kArgs] = {"rank",    "wave",    "words",   "stream", "source",
                                     "dset",    "set_ptr", "set_res", "work",   "picked"};
  View v[kArgs];
  for (int k = 0; k < kArgs; ++k)
    if (!v[k].acquire(obj[k], k >= 8, names[k])) return nullptr;
  Inputs in{v[0].data(), v[1].data(), v[2].data(), v[3].data(), v[4].data(), v[5].data(), v[6].data(), v[7].data(),
            v[0].size(), v[6].size() - 1, v[7].size(), v[8].size()};
  const i64 count = in.count;
  if (v[1].size() != count || v[2].size() != count || v[3].size() != count || v[4].size() != count ||
      v[5].size() != count || v[9].size() != count || v[6].size() < 1) {
    PyErr_SetString(PyExc_ValueError, "picks: array lengths do not match");
    return nullptr;
  }
  i64* work = v[8].data();
  if (!check(in, work)) return nullptr;
  i64 n_picked = 0;
  bool oom = false;
  Py_BEGIN_ALLOW_THREADS
  try {
    n_picked = Balance(in, work, v[9].data()).run();
  } catch (const std::bad_alloc&) {
    oom = true;
  }
  Py_END_ALLOW_THREADS
  if (oom) return PyErr_NoMemory();
  return PyLong_FromLongLong(n_picked);
}

PyMethodDef kMethods[] = {
    {"picks", py_picks, METH_VARARGS,
     "picks(rank, wave, words, stream, source, dset, set_ptr, set_res, work, picked) -> int"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_balance",
                       "Compiled balancing heap (see placer.ordering.greedy.balanced_picks).", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__balance(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  // the interface version greedy.py expects (greedy._VERSION): bump it with any change to the call
  if (PyModule_AddIntConstant(m, "VERSION", 1) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
