// The canonical search of placer.placement.canonical, compiled (see canonical.py for the algorithm and why each
// pruning rule is sound). The Python module builds the sections; this file only searches.
//
//   search(sizes, slo, shi, aligns, capacity, sections, heuristics, time_limit, progress)
//     -> (status, offsets | None, nodes, heuristic)
//
// status: 0 placed, 1 infeasible (the search was exhausted: a proof), 2 unknown (time limit or progress raised).
// Offsets are relative to the interval's base. Everything is deterministic: same input, same nodes, same answer.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using i64 = int64_t;
constexpr i64 kInf = std::numeric_limits<i64>::max() / 4;
// A failed-state table larger than this is dropped and rebuilt: it only saves work, it never decides an answer.
constexpr size_t kMemoBytes = size_t(384) << 20;

enum Status { FOUND, NOTFOUND, ABORTED, TIMEOUT };

struct Proof {
  i64 min_offset;
  i64 min_pidx;
};

class Search {
 public:
  Search(std::vector<i64> size, std::vector<int> slo, std::vector<int> shi, std::vector<i64> align, i64 capacity,
         int sections)
      : n_(int(size.size())), S_(sections), cap_(capacity), size_(std::move(size)), slo_(std::move(slo)),
        shi_(std::move(shi)), align_(std::move(align)) {
    members_.resize(S_);
    total0_.assign(S_, 0);
    cuts0_.assign(S_ > 0 ? S_ - 1 : 0, 0);
    for (int i = 0; i < n_; ++i) {
      for (int s = slo_[i]; s < shi_[i]; ++s) {
        members_[s].push_back(i);
        total0_[s] += size_[i];
      }
      for (int s = slo_[i]; s + 1 < shi_[i]; ++s) ++cuts0_[s];
    }
    overlaps_.resize(n_);
    for (int i = 0; i < n_; ++i)
      for (int j = 0; j < n_; ++j)
        if (i != j && slo_[i] < shi_[j] && slo_[j] < shi_[i]) overlaps_[i].push_back(j);
    words_ = (n_ + 63) / 64;
    stamp_.assign(S_, 0);
  }

  // Round robin over the preorders with doubling node limits (MiniMalloc's driver); the failed-state table of a
  // preorder survives its restarts, since a proved failure does not depend on the node limit.
  Status solve(const std::vector<std::string>& heuristics, double time_limit, PyObject* progress,
               std::string* answered) {
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(time_limit));
    next_report_ = start_ + std::chrono::milliseconds(500);
    progress_ = progress;
    i64 limit = std::max(n_, 1);
    while (true) {
      limit *= 2;
      for (const std::string& h : heuristics) {
        reset(h);
        budget_ = limit;
        std::vector<int> all(n_);
        for (int i = 0; i < n_; ++i) all[i] = i;
        Status st = solve_partitions(all, 0, S_);
        if (st == ABORTED) continue;
        *answered = h;
        return st;
      }
    }
  }

  std::vector<i64> sol_;
  i64 nodes_ = 0;

 private:
  using Clock = std::chrono::steady_clock;

  void reset(const std::string& h) {
    heuristic_ = h;
    total_ = total0_;
    top_.assign(S_, 0);
    floor_.assign(S_, 0);
    minoff_.assign(n_, 0);
    off_.assign(n_, -1);
    sol_.assign(n_, -1);
    cuts_ = cuts0_;
    memo_ = &memos_[h];
  }

  std::vector<int> preorder(const std::vector<int>& part) const {
    struct Key {
      std::vector<i64> values;
      int index;
    };
    std::vector<Key> keys;
    keys.reserve(part.size());
    for (int i : part) {
      i64 t = 0;
      for (int s = slo_[i]; s < shi_[i]; ++s) t = std::max(t, total_[s]);
      Key k{{}, i};
      for (char c : heuristic_) {
        const i64 width = shi_[i] > slo_[i] ? i64(shi_[i] - slo_[i]) : 0;
        switch (c) {
          case 'T': k.values.push_back(t); break;
          case 'A': k.values.push_back(size_[i] * lifetime(i)); break;
          case 'W': k.values.push_back(lifetime(i)); break;
          case 'Z': k.values.push_back(size_[i]); break;
          case 'C': k.values.push_back(width); break;
          default: break;
        }
      }
      keys.push_back(std::move(k));
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.values != b.values) return a.values > b.values;  // larger first
      return a.index < b.index;
    });
    std::vector<int> out;
    out.reserve(keys.size());
    for (const Key& k : keys) out.push_back(k.index);
    return out;
  }

 public:
  std::vector<i64> lifetimes_;  // in time units, for the A and W preorders (section counts would distort them)

 private:
  i64 lifetime(int i) const { return lifetimes_[i]; }

  // Solve ``part`` over sections [plo, phi), splitting first wherever no unplaced buffer crosses a cut.
  Status solve_partitions(const std::vector<int>& part, int plo, int phi) {
    std::vector<int> cutpoints{plo};
    for (int s = plo; s < phi - 1; ++s)
      if (cuts_[s] == 0) cutpoints.push_back(s + 1);
    cutpoints.push_back(phi);
    for (size_t c = 1; c < cutpoints.size(); ++c) {
      const int lo = cutpoints[c - 1], hi = cutpoints[c];
      std::vector<int> sub;
      for (int i : part)
        if (off_[i] < 0 && slo_[i] < hi && lo < shi_[i]) sub.push_back(i);
      if (sub.empty()) continue;
      Status st = search(sub, lo, hi, preorder(sub), 0, 0);
      if (st != FOUND) return st;
    }
    return FOUND;
  }

  // The subtree below a node depends only on (sections, part, unplaced buffers, their minimum offsets): every
  // rule below reads the placed buffers only through the minimum offsets of the unplaced ones (a section's floor
  // is the lowest minimum offset of its unplaced buffers, each of which is at least the section's highest placed
  // top), and the part fixes the preorder that the canonical constraint refers to. Skylines that differ only
  // where no unplaced buffer lives, or below an unplaced buffer's minimum offset, share one entry.
  void state_key(const std::vector<int>& part, int plo, int phi, std::string* key) {
    key->clear();
    auto put = [key](const void* data, size_t bytes) { key->append(static_cast<const char*>(data), bytes); };
    put(&plo, sizeof(int));
    put(&phi, sizeof(int));
    bits_.assign(2 * words_, 0);
    for (int i : part) {
      bits_[i >> 6] |= uint64_t(1) << (i & 63);
      if (off_[i] < 0) bits_[words_ + (i >> 6)] |= uint64_t(1) << (i & 63);
    }
    put(bits_.data(), sizeof(uint64_t) * bits_.size());
    for (int i : part)
      if (off_[i] < 0) put(&minoff_[i], sizeof(i64));
  }

  bool out_of_time() {
    const auto now = Clock::now();
    if (now > deadline_) return true;
    if (PyErr_CheckSignals() < 0) return true;  // Ctrl-C: the KeyboardInterrupt propagates to the caller
    if (progress_ != nullptr && now >= next_report_) {
      next_report_ = now + std::chrono::milliseconds(500);
      const double elapsed = std::chrono::duration<double>(now - start_).count();
      PyObject* r = PyObject_CallFunction(progress_, "dL", elapsed, (long long)nodes_);
      if (r == nullptr) return true;  // the exception propagates to the caller
      Py_DECREF(r);
    }
    return false;
  }

  // Per-depth scratch space, so that a node allocates nothing once the search has warmed up.
  struct Frame {
    std::vector<std::pair<i64, i64>> order;  // (minimum offset, preorder index) of the unplaced buffers
    std::vector<std::pair<int, i64>> saved_min, saved_floor;
    std::vector<int> affected;
    std::vector<i64> old_top;
    std::string key;
  };

  Status search(const std::vector<int>& part, int plo, int phi, const std::vector<int>& pre, i64 min_offset,
                i64 min_pidx) {
    ++nodes_;
    if (--budget_ < 0) return ABORTED;
    if ((nodes_ & 1023) == 0 && out_of_time()) return TIMEOUT;
    if (depth_ == frames_.size()) frames_.emplace_back();
    ++depth_;
    const Status st = search_node(frames_[depth_ - 1], part, plo, phi, pre, min_offset, min_pidx);
    --depth_;
    return st;
  }

  Status search_node(Frame& f, const std::vector<int>& part, int plo, int phi, const std::vector<int>& pre,
                     i64 min_offset, i64 min_pidx) {
    const i64 N = i64(pre.size());
    auto& order = f.order;
    order.clear();
    for (i64 p = 0; p < N; ++p)
      if (off_[pre[p]] < 0) order.emplace_back(minoff_[pre[p]], p);
    if (order.empty()) {
      for (int i : part) sol_[i] = off_[i];
      return FOUND;
    }
    std::string& key = f.key;
    state_key(part, plo, phi, &key);
    auto hit = memo_->find(key);
    if (hit != memo_->end() && std::make_pair(hit->second.min_offset, hit->second.min_pidx) <=
                                   std::make_pair(min_offset, min_pidx))
      return NOTFOUND;
    std::sort(order.begin(), order.end());
    i64 min_height = kInf;
    for (const auto& [o, p] : order) min_height = std::min(min_height, o + size_[pre[p]]);
    i64 max_total = 0;
    for (int s = plo; s < phi; ++s) max_total = std::max(max_total, total_[s]);
    // every unplaced buffer of a section stacks at or above the next offset, so offsets above this cannot work
    const i64 o_max = cap_ - max_total;
    auto& saved_min = f.saved_min;
    auto& saved_floor = f.saved_floor;
    auto& affected = f.affected;
    for (const auto& [o, p] : order) {
      if (o < min_offset || (o == min_offset && p < min_pidx)) continue;  // canonical order
      if (o >= min_height || o > o_max) break;  // dominance, and the stacking cut-off
      const int b = pre[p];
      const i64 height = o + size_[b];
      off_[b] = o;
      saved_min.clear();
      saved_floor.clear();
      affected.clear();
      ++epoch_;
      bool hatless = true;
      for (int j : overlaps_[b]) {
        if (off_[j] >= 0) continue;
        hatless = false;
        if (minoff_[j] >= height) continue;
        saved_min.emplace_back(j, minoff_[j]);
        const i64 a = align_[j];
        minoff_[j] = (height + a - 1) / a * a;
        for (int s = slo_[j]; s < shi_[j]; ++s)
          if (stamp_[s] != epoch_) {
            stamp_[s] = epoch_;
            affected.push_back(s);
          }
      }
      const int lo = slo_[b], hi = shi_[b];
      for (int s = lo; s < hi; ++s) {
        saved_floor.emplace_back(s, floor_[s]);
        floor_[s] = height;
        total_[s] -= size_[b];
      }
      f.old_top.assign(top_.begin() + lo, top_.begin() + hi);
      for (int s = lo; s < hi; ++s) top_[s] = height;
      // the unplaced buffers of a section cannot start below the lowest of their minimum offsets
      for (int s : affected) {
        i64 m = kInf;
        for (int j : members_[s])
          if (off_[j] < 0) m = std::min(m, minoff_[j]);
        if (m < kInf && floor_[s] < m) {
          saved_floor.emplace_back(s, floor_[s]);
          floor_[s] = m;
        }
      }
      // Section inference: every section's unplaced buffers must stack above max(o, its floor). Offset o is at
      // most o_max, which covers "o + total" everywhere; "floor + total" changed only in b's sections and the
      // affected ones (every other section passed this test at an ancestor and is unchanged since).
      bool ok = true;
      for (int s = lo; s < hi && ok; ++s) ok = floor_[s] + total_[s] <= cap_;
      for (size_t k = 0; k < affected.size() && ok; ++k) ok = floor_[affected[k]] + total_[affected[k]] <= cap_;
      Status st = ok ? place_rest(part, plo, phi, pre, o, p, b) : NOTFOUND;
      for (auto it = saved_floor.rbegin(); it != saved_floor.rend(); ++it) floor_[it->first] = it->second;
      for (int s = lo; s < hi; ++s) total_[s] += size_[b];
      std::copy(f.old_top.begin(), f.old_top.end(), top_.begin() + lo);
      for (auto it = saved_min.rbegin(); it != saved_min.rend(); ++it) minoff_[it->first] = it->second;
      off_[b] = -1;
      if (st != NOTFOUND) return st;
      if (hatless) break;  // nothing overlaps b any more: any other first choice leads to the same subtrees
    }
    remember(key, min_offset, min_pidx);
    return NOTFOUND;
  }

  void remember(const std::string& key, i64 min_offset, i64 min_pidx) {
    auto it = memo_->find(key);
    if (it != memo_->end()) {
      if (std::make_pair(min_offset, min_pidx) < std::make_pair(it->second.min_offset, it->second.min_pidx))
        it->second = {min_offset, min_pidx};
      return;
    }
    memo_bytes_ += key.size() + 64;
    if (memo_bytes_ > kMemoBytes) {
      for (auto& [h, m] : memos_) m.clear();
      memo_bytes_ = key.size() + 64;
    }
    memo_->emplace(key, Proof{min_offset, min_pidx});
  }

  Status place_rest(const std::vector<int>& part, int plo, int phi, const std::vector<int>& pre, i64 o, i64 p,
                    int b) {
    sol_[b] = off_[b];
    bool split = false;
    const int lo = slo_[b], hi = shi_[b];
    for (int s = lo; s < hi - 1; ++s) {
      if (--cuts_[s] == 0 && plo <= s && s < phi - 1) split = true;
    }
    Status st = split ? solve_partitions(part, plo, phi) : search(part, plo, phi, pre, o, p);
    for (int s = lo; s < hi - 1; ++s) ++cuts_[s];
    return st;
  }

  int n_, S_;
  i64 cap_;
  std::vector<i64> size_;
  std::vector<int> slo_, shi_;
  std::vector<i64> align_;
  std::vector<std::vector<int>> members_, overlaps_;
  std::vector<i64> total0_;
  std::vector<int> cuts0_;
  int words_ = 1;
  std::vector<uint64_t> stamp_;
  uint64_t epoch_ = 0;
  std::vector<uint64_t> bits_;
  std::deque<Frame> frames_;  // a deque: growing it keeps references to the shallower frames valid
  size_t depth_ = 0;

  std::string heuristic_;
  std::vector<i64> total_, top_, floor_, minoff_, off_;
  std::vector<int> cuts_;
  i64 budget_ = 0;
  std::map<std::string, std::unordered_map<std::string, Proof>> memos_;
  std::unordered_map<std::string, Proof>* memo_ = nullptr;
  size_t memo_bytes_ = 0;
  Clock::time_point start_, deadline_, next_report_;
  PyObject* progress_ = nullptr;
};

bool read_ints(PyObject* seq, std::vector<i64>* out, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out->resize(n);
  for (Py_ssize_t k = 0; k < n; ++k) {
    (*out)[k] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, k));
    if ((*out)[k] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
  }
  Py_DECREF(fast);
  return true;
}

PyObject* py_search(PyObject*, PyObject* args) {
  PyObject *sizes, *lifetimes, *slo, *shi, *aligns, *heuristics, *progress;
  long long capacity;
  int sections;
  double time_limit;
  if (!PyArg_ParseTuple(args, "OOOOOLiOdO", &sizes, &lifetimes, &slo, &shi, &aligns, &capacity, &sections,
                        &heuristics, &time_limit, &progress))
    return nullptr;
  std::vector<i64> size, life, lo64, hi64, align;
  if (!read_ints(sizes, &size, "sizes") || !read_ints(lifetimes, &life, "lifetimes") ||
      !read_ints(slo, &lo64, "slo") || !read_ints(shi, &hi64, "shi") || !read_ints(aligns, &align, "aligns"))
    return nullptr;
  const size_t n = size.size();
  if (life.size() != n || lo64.size() != n || hi64.size() != n || align.size() != n) {
    PyErr_SetString(PyExc_ValueError, "search: sequences of different lengths");
    return nullptr;
  }
  for (size_t i = 0; i < n; ++i) {
    if (size[i] <= 0 || align[i] <= 0 || lo64[i] < 0 || hi64[i] > sections || lo64[i] > hi64[i]) {
      PyErr_SetString(PyExc_ValueError, "search: bad buffer data");
      return nullptr;
    }
  }
  std::vector<std::string> hs;
  PyObject* fast = PySequence_Fast(heuristics, "heuristics");
  if (fast == nullptr) return nullptr;
  for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(fast); ++k) {
    const char* h = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, k));
    if (h == nullptr) {
      Py_DECREF(fast);
      return nullptr;
    }
    hs.emplace_back(h);
  }
  Py_DECREF(fast);
  if (hs.empty()) {
    PyErr_SetString(PyExc_ValueError, "search: no heuristics");
    return nullptr;
  }
  std::vector<int> lo(lo64.begin(), lo64.end()), hi(hi64.begin(), hi64.end());
  Search search(size, lo, hi, align, capacity, sections);
  search.lifetimes_ = life;
  std::string answered;
  const Status st = search.solve(hs, time_limit, progress == Py_None ? nullptr : progress, &answered);
  if (PyErr_Occurred()) return nullptr;
  if (st == FOUND) {
    PyObject* offsets = PyTuple_New(Py_ssize_t(n));
    for (size_t i = 0; i < n; ++i) PyTuple_SET_ITEM(offsets, i, PyLong_FromLongLong(search.sol_[i]));
    return Py_BuildValue("iNLs", 0, offsets, (long long)search.nodes_, answered.c_str());
  }
  if (st == NOTFOUND) return Py_BuildValue("iOLs", 1, Py_None, (long long)search.nodes_, answered.c_str());
  return Py_BuildValue("iOLO", 2, Py_None, (long long)search.nodes_, Py_None);
}

PyMethodDef kMethods[] = {
    {"search", py_search, METH_VARARGS, "Canonical search (see placer.placement.canonical)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_canonical", "Compiled canonical search.", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__canonical(void) { return PyModule_Create(&kModule); }
