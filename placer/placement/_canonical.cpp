// The canonical search of placer.placement.canonical, compiled. canonical.py builds the sections (and, for tiles
// with regions, the legal start windows, conflicts and per-section free memory); this file only searches.
// canonical.CanonicalSearch.solve_python is the same search in Python (without the blocked-level rule, the
// forced placements and the fingerprinted failed-state table), the test oracle for flat problems.
//
//   search(*, sizes, lifetimes, slo, shi, aligns, capacity, sections, shares, time_limit, progress=None,
//          general=None, seed=0) -> (status, offsets | None, nodes, heuristic | None)
//
// status: 0 placed, 1 infeasible (the search was exhausted: a proof), 2 unknown (time limit), 3 unknown (the
// path's memory ceiling). Offsets are relative to the interval's base (flat problems) or absolute (``general``).
// Everything is deterministic: same input, same nodes, same answer. An exception of `progress`, or Ctrl-C, stops
// every search and is raised.
//
// The algorithm is MiniMalloc's (Moffitt, ASPLOS 2023): buffers are placed in non-decreasing (offset, preorder
// index) order, each at the lowest legal offset the placed buffers leave it ("minoff"); any placement can be
// compacted into such a canonical one, so exhausting the search proves infeasibility. Pruning rules, all sound:
//
//  * section inference: the unplaced buffers of every section must fit in the section's free memory above the
//    lowest minoff among them ("unallocated floor") and above the current offset ("monotonic floor");
//  * dominance: never place at or above the lowest top an unplaced buffer could reach (it would fit underneath);
//  * hatless pruning: a buffer that shares no section (or conflict) with an unplaced buffer ends the branching;
//  * dynamic decomposition: where no unplaced buffer spans a section boundary, the two sides are independent;
//  * offset cut-off (ours): no offset above the lowest "room" of a section with unplaced buffers;
//  * blocked levels (ours): after a placement at (o, p), a buffer whose (minoff, preorder index) is below (o, p)
//    can never be placed at its minoff: every later placement is at offset >= o and ends above o, so it must wait
//    for one to raise it above o. A section whose low buffers are all blocked therefore has its floor above o;
//    with zero slack that kills the branch at once, where MiniMalloc first enumerates every subset of the other
//    buffers at level o;
//  * a failed-state table (ours): the subtree below a node depends only on (part, unplaced buffers, their
//    minoffs), so a failed state is not searched again under an equal or stricter canonical constraint. States are
//    keyed by two independent 64-bit fingerprints maintained incrementally (a false match needs both to collide:
//    about 2^-100 per lookup at the table's size), so a lookup costs O(1) instead of hashing the whole state.
#include "native.h"

#include <nanobind/stl/array.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <functional>
#include <pthread.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace placer;
using u64 = uint64_t;
constexpr i64 kInf = std::numeric_limits<i64>::max() / 4;
// The failed-state table never grows beyond this many entries (32 bytes each): it only saves work, so once full
// it is emptied and refilled.
constexpr size_t kMemoMaxEntries = size_t(1) << 23;
// The path's state grows with the depth a search reaches (each depth keeps the unplaced buffers' order, about
// n - depth entries, and nested parts keep their buffers), so with tens of thousands of buffers it would grow for
// as long as the search runs: 3.8 GB after 30 s at 20,000. Past this many entries (about 16 bytes each: 1 GiB,
// shared by a portfolio's searches) the search stops and says so, as it does at its time limit.
constexpr size_t kFrameMaxEntries = size_t(1) << 26;
constexpr int kStaggerMs = 5;  // a portfolio's second worker starts after this (see search below)

enum Status { FOUND, NOTFOUND, ABORTED, TIMEOUT, MEMORY };

inline u64 mix64(u64 x) {  // splitmix64's finaliser: a bijection with good avalanche
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline i64 round_up(i64 v, i64 a) { return (v + a - 1) / a * a; }

// Open-addressing table of failed states: key (k1, k2) -> the weakest canonical constraint (offset, preorder
// index) under which the state was proved to fail.
class Memo {
 public:
  struct Entry {
    u64 k1 = 0, k2 = 0;  // k1 == 0 marks an empty slot (keys are forced odd)
    i64 offset = 0, pidx = 0;
  };

  explicit Memo(size_t max_entries) : max_(std::max(max_entries, size_t(1) << 14)) {
    table_.resize(size_t(1) << 14);
  }

  const Entry* find(u64 k1, u64 k2) const {
    const size_t mask = table_.size() - 1;
    for (size_t i = k2 & mask;; i = (i + 1) & mask) {
      const Entry& e = table_[i];
      if (e.k1 == 0) return nullptr;
      if (e.k1 == k1 && e.k2 == k2) return &e;
    }
  }

  void remember(u64 k1, u64 k2, i64 offset, i64 pidx) {
    if ((used_ + 1) * 10 > table_.size() * 7) {
      if (table_.size() * 2 > max_) {
        std::fill(table_.begin(), table_.end(), Entry{});
        used_ = 0;
      } else {
        grow();
      }
    }
    const size_t mask = table_.size() - 1;
    for (size_t i = k2 & mask;; i = (i + 1) & mask) {
      Entry& e = table_[i];
      if (e.k1 == 0) {
        e = Entry{k1, k2, offset, pidx};
        ++used_;
        return;
      }
      if (e.k1 == k1 && e.k2 == k2) {
        if (std::make_pair(offset, pidx) < std::make_pair(e.offset, e.pidx)) {
          e.offset = offset;
          e.pidx = pidx;
        }
        return;
      }
    }
  }

 private:
  void grow() {
    std::vector<Entry> old(table_.size() * 2);
    old.swap(table_);
    used_ = 0;
    const size_t mask = table_.size() - 1;
    for (const Entry& e : old) {
      if (e.k1 == 0) continue;
      size_t i = e.k2 & mask;
      while (table_[i].k1 != 0) i = (i + 1) & mask;
      table_[i] = e;
      ++used_;
    }
  }

  std::vector<Entry> table_;
  size_t used_ = 0;
  size_t max_;
};

// The optional data of tiles with regions, several free ranges or fixed allocations (absolute addresses).
struct General {
  std::vector<std::vector<std::pair<i64, i64>>> windows;  // per buffer: legal start intervals [first, last]
  std::vector<std::vector<int>> conflicts;                // per buffer: buffers that may not share an element
  i64 boundary = kInf, element0 = 1, element1 = 1;        // element geometry for the conflict rule
  std::vector<std::vector<std::pair<i64, i64>>> profiles; // per section: free [start, end) address intervals
  bool enabled = false;
};

class Search {
 public:
  Search(std::vector<i64> size, std::vector<int> slo, std::vector<int> shi, std::vector<i64> align, i64 capacity,
         int sections, std::vector<i64> lifetimes, General general)
      : n_(int(size.size())), S_(sections), cap_(capacity), size_(std::move(size)), slo_(std::move(slo)),
        shi_(std::move(shi)), align_(std::move(align)), lifetimes_(std::move(lifetimes)), g_(std::move(general)) {
    // sections -> members, with one minoff slot per (section, member) so that a section's lowest minoff is a
    // scan over contiguous memory
    std::vector<int> count(S_, 0);
    for (int i = 0; i < n_; ++i)
      for (int s = slo_[i]; s < shi_[i]; ++s) ++count[s];
    sec_off_.assign(S_ + 1, 0);
    for (int s = 0; s < S_; ++s) sec_off_[s + 1] = sec_off_[s] + count[s];
    sec_mem_.assign(sec_off_[S_], 0);
    bslot_off_.assign(n_ + 1, 0);
    for (int i = 0; i < n_; ++i) bslot_off_[i + 1] = bslot_off_[i] + (shi_[i] - slo_[i]);
    bslot_.assign(bslot_off_[n_], 0);
    std::vector<int> fill(sec_off_.begin(), sec_off_.end() - 1);
    for (int i = 0; i < n_; ++i)
      for (int s = slo_[i]; s < shi_[i]; ++s) {
        bslot_[bslot_off_[i] + (s - slo_[i])] = fill[s];
        sec_mem_[fill[s]++] = i;
      }
    sec_amax_.assign(S_, 1);
    for (int s = 0; s < S_; ++s)
      for (int k = sec_off_[s]; k < sec_off_[s + 1]; ++k) sec_amax_[s] = std::max(sec_amax_[s], align_[sec_mem_[k]]);
    total0_.assign(S_, 0);
    cuts0_.assign(S_ > 0 ? S_ - 1 : 0, 0);
    for (int i = 0; i < n_; ++i) {
      for (int s = slo_[i]; s < shi_[i]; ++s) total0_[s] += size_[i];
      for (int s = slo_[i]; s + 1 < shi_[i]; ++s) ++cuts0_[s];
    }
    // time overlaps (sorted by start so that the loop is cache friendly), plus conflict partners flagged
    overlaps_.resize(n_);
    std::vector<int> by_start(n_);
    for (int i = 0; i < n_; ++i) by_start[i] = i;
    std::sort(by_start.begin(), by_start.end(), [&](int a, int b) { return slo_[a] < slo_[b]; });
    for (int i = 0; i < n_; ++i)
      for (int j : by_start)
        if (j != i && slo_[i] < shi_[j] && slo_[j] < shi_[i]) overlaps_[i].push_back({j, false});
    has_conflicts_ = false;
    if (g_.enabled) {
      for (int i = 0; i < n_; ++i)
        for (int j : g_.conflicts[i]) {
          has_conflicts_ = true;
          bool found = false;
          for (auto& e : overlaps_[i])
            if (e.j == j) e.conflict = found = true;
          if (!found) overlaps_[i].push_back({j, true});
        }
    }
    zob1_.resize(n_);
    zob2_.resize(n_);
    for (int i = 0; i < n_; ++i) {
      zob1_[i] = mix64(u64(i) * 2 + 1);
      zob2_[i] = mix64(u64(i) * 2 + 0x5851f42d4c957f2dULL);
    }
  }

  // Round robin over the preorders with doubling node limits (MiniMalloc's driver); the failed-state table of a
  // preorder survives its restarts, since a proved failure does not depend on the node limit.
  Status solve(const std::vector<std::string>& heuristics, double time_limit, std::atomic<bool>* stop,
               std::string* answered) {
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(time_limit));
    stop_ = stop;
    memos_.clear();
    for (size_t h = 0; h < heuristics.size(); ++h) memos_.emplace_back(memo_entries_ / heuristics.size());
    i64 limit = std::max(n_, 1);
    const u64 base_seed = seed_;
    for (u64 round = 0;; ++round) {
      limit *= 2;
      // a random preorder (X) draws new ties every round: restarts then explore different early choices (their
      // failed states are keyed by the seed too, since the canonical constraint refers to the preorder)
      seed_ = base_seed + round * 0x9e3779b9ULL;
      for (size_t h = 0; h < heuristics.size(); ++h) {
        Status st = run(heuristics[h], &memos_[h], limit);
        if (st == ABORTED) continue;
        *answered = heuristics[h];
        return st;
      }
    }
  }

  std::vector<i64> sol_;
  i64 nodes_ = 0;
  std::atomic<i64> published_nodes_{0};  // nodes_, as the calling thread may read it
  std::function<bool()>* tick_ = nullptr;  // set on the search the calling thread runs itself
  size_t memo_entries_ = kMemoMaxEntries;
  size_t entry_ceiling_ = kFrameMaxEntries;  // the path's entries at most (a portfolio shares kFrameMaxEntries)
  u64 seed_ = 0;

 private:
  using Clock = std::chrono::steady_clock;

  struct Edge {
    int j;
    bool conflict;  // j may not share a memory element with this buffer (else: j is live at the same time)
  };

  // The lowest legal start at or above m.
  i64 next_legal(int i, i64 m) const {
    if (!g_.enabled) return round_up(m, align_[i]);
    for (const auto& [first, last] : g_.windows[i]) {
      if (m > last) continue;
      const i64 p = m <= first ? first : round_up(m, align_[i]);
      if (p <= last) return p;
    }
    return kInf;
  }

  // The end of the last memory element [o, top) touches (conflicting buffers must start at or above it).
  i64 element_end(i64 o, i64 top) const {
    const i64 e = o >= g_.boundary ? g_.element1 : g_.element0;
    return round_up(top, e);
  }

  // The highest floor at which a section's unplaced buffers (``total`` bytes) still fit in its free memory.
  i64 room(int s, i64 total) const {
    if (!g_.enabled) return cap_ - total;
    const auto& free = g_.profiles[s];
    if (free.empty()) return total == 0 ? kInf : -kInf;
    if (total == 0) return free.back().second;
    i64 acc = 0;
    for (auto it = free.rbegin(); it != free.rend(); ++it) {
      const i64 len = it->second - it->first;
      if (acc + len >= total) return it->second - (total - acc);
      acc += len;
    }
    return -kInf;
  }

  Status run(const std::string& h, Memo* memo, i64 limit) {
    heuristic_ = h;
    check_mask_ = 1023;
    while (check_mask_ > 0 && (check_mask_ + 1) * i64(n_) > (i64(1) << 14)) check_mask_ >>= 1;
    memo_ = memo;
    budget_ = limit;
    total_ = total0_;
    R_.resize(S_);
    for (int s = 0; s < S_; ++s) R_[s] = room(s, total_[s]);
    minoff_.assign(n_, 0);
    off_.assign(n_, -1);
    sol_.assign(n_, -1);
    cuts_ = cuts0_;
    pidx_.assign(n_, 0);
    trail_.clear();
    slot_.assign(sec_mem_.size(), 0);
    for (int i = 0; i < n_; ++i) {
      minoff_[i] = next_legal(i, 0);
      if (minoff_[i] >= kInf) return NOTFOUND;
      for (int k = bslot_off_[i]; k < bslot_off_[i + 1]; ++k) slot_[bslot_[k]] = minoff_[i];
    }
    L_.assign(S_, kInf);
    for (int s = 0; s < S_; ++s) L_[s] = section_min(s);
    for (int s = 0; s < S_; ++s)
      if (L_[s] < kInf && L_[s] > R_[s]) return NOTFOUND;
    stamp_.assign(S_, 0);
    hidx_ = 0;
    for (char c : h) hidx_ = hidx_ * 131 + u64(c);
    if (h.find('X') != std::string::npos) hidx_ = mix64(hidx_ ^ seed_);
    std::vector<int> all(n_);
    for (int i = 0; i < n_; ++i) all[i] = i;
    return solve_partitions(all, 0, S_);
  }

  i64 section_min(int s) const {
    i64 m = kInf;
    for (int k = sec_off_[s]; k < sec_off_[s + 1]; ++k) m = std::min(m, slot_[k]);
    return m;
  }

  std::vector<int> preorder(const std::vector<int>& part) const {
    struct Key {
      i64 v[4];
      int index;
    };
    std::vector<Key> keys;
    keys.reserve(part.size());
    for (int i : part) {
      i64 t = 0;
      for (int s = slo_[i]; s < shi_[i]; ++s) t = std::max(t, total_[s]);
      Key k{{0, 0, 0, 0}, i};
      int c = 0;
      for (char ch : heuristic_) {
        if (c == 4) break;
        i64 v = 0;
        switch (ch) {
          case 'T': v = t; break;
          case 'A': v = size_[i] * lifetimes_[i]; break;
          case 'W': v = lifetimes_[i]; break;
          case 'Z': v = size_[i]; break;
          case 'C': v = shi_[i] - slo_[i]; break;
          case 'L': v = -slo_[i]; break;  // earliest start first: a left-to-right sweep along each level
          case 'R': v = shi_[i]; break;   // latest end first: right to left
          case 'X': v = i64(mix64(seed_ * 0x2545f4914f6cdd1dULL + u64(i)) >> 2); break;  // seeded random
          default: continue;
        }
        k.v[c++] = v;
      }
      keys.push_back(k);
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      for (int c = 0; c < 4; ++c)
        if (a.v[c] != b.v[c]) return a.v[c] > b.v[c];  // larger first
      return a.index < b.index;
    });
    std::vector<int> out;
    out.reserve(keys.size());
    for (const Key& k : keys) out.push_back(k.index);
    return out;
  }

  // Context of the part being searched (parts nest through dynamic decomposition).
  struct Part {
    const std::vector<int>* buffers;
    const std::vector<int>* pre;
    int plo, phi;
    u64 base1, base2;  // fingerprint of (heuristic, section range, part)
  };

  // Solve ``part`` over sections [plo, phi), splitting first wherever no unplaced buffer crosses a cut.
  Status solve_partitions(const std::vector<int>& part, int plo, int phi) {
    std::vector<int> cutpoints{plo};
    if (!has_conflicts_)  // conflicts couple buffers whatever their lifetimes: no split is independent then
      for (int s = plo; s < phi - 1; ++s)
        if (cuts_[s] == 0) cutpoints.push_back(s + 1);
    cutpoints.push_back(phi);
    const Part saved = part_;
    const u64 sh1 = h1_, sh2 = h2_;
    Status result = FOUND;
    for (size_t c = 1; c < cutpoints.size() && result == FOUND; ++c) {
      const int lo = cutpoints[c - 1], hi = cutpoints[c];
      std::vector<int> sub;
      for (int i : part)
        if (off_[i] < 0 && slo_[i] < hi && lo < shi_[i]) sub.push_back(i);
      if (sub.empty()) continue;
      const std::vector<int> pre = preorder(sub);
      for (size_t k = 0; k < pre.size(); ++k) pidx_[pre[k]] = int(k);
      u64 b1 = mix64(hidx_ ^ (u64(lo) << 32) ^ u64(hi)), b2 = mix64(b1 ^ 0x632be59bd9b4e019ULL);
      h1_ = h2_ = 0;
      for (int i : sub) {
        b1 ^= zob1_[i];
        b2 ^= mix64(zob2_[i]);
        h1_ ^= term1(i, minoff_[i]);
        h2_ ^= term2(i, minoff_[i]);
      }
      part_ = Part{&sub, &pre, lo, hi, b1, b2};
      std::vector<std::pair<i64, int>> order;
      order.reserve(pre.size());
      for (size_t k = 0; k < pre.size(); ++k) order.emplace_back(minoff_[pre[k]], int(k));
      std::sort(order.begin(), order.end());
      // a part's buffers live on the path until it is solved, and parts nest: counted against the ceiling
      const size_t held = sub.capacity() + pre.capacity() + 2 * order.capacity();
      part_entries_ += held;
      result = held_entries() > entry_ceiling_ ? MEMORY : search(order, 0, 0);
      part_entries_ -= held;
    }
    part_ = saved;
    h1_ = sh1;
    h2_ = sh2;
    if (saved.pre != nullptr)
      for (size_t k = 0; k < saved.pre->size(); ++k) pidx_[(*saved.pre)[k]] = int(k);
    return result;
  }

  u64 term1(int i, i64 m) const { return mix64(zob1_[i] ^ u64(m)); }
  u64 term2(int i, i64 m) const { return mix64(zob2_[i] + u64(m) * 0x9e3779b97f4a7c15ULL); }

  // Called every 1024 nodes, from a worker thread: no Python here (the calling thread reports progress and
  // handles Ctrl-C, and raises the stop flag).
  bool out_of_time() {
    published_nodes_.store(nodes_, std::memory_order_relaxed);
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) return true;
    if (tick_ != nullptr && !(*tick_)()) return true;  // the calling thread's chores (see search below)
    return Clock::now() > deadline_;
  }

  // Undo records: what a placement changed, restored in reverse order.
  enum Kind : int { kMinoff, kLow, kRoom, kPlaced, kCut };
  struct Change {
    Kind kind;
    int index;
    i64 old;
  };

  void undo_to(size_t mark) {
    while (trail_.size() > mark) {
      const Change c = trail_.back();
      trail_.pop_back();
      switch (c.kind) {
        case kMinoff:
          h1_ ^= term1(c.index, minoff_[c.index]) ^ term1(c.index, c.old);
          h2_ ^= term2(c.index, minoff_[c.index]) ^ term2(c.index, c.old);
          minoff_[c.index] = c.old;
          for (int k = bslot_off_[c.index]; k < bslot_off_[c.index + 1]; ++k) slot_[bslot_[k]] = c.old;
          break;
        case kLow: L_[c.index] = c.old; break;
        case kRoom: R_[c.index] = c.old; break;
        case kPlaced: {  // c.index was placed: back to unplaced, at its (already restored) minoff
          const int b = c.index;
          for (int t = slo_[b]; t < shi_[b]; ++t) total_[t] += size_[b];
          for (int k = bslot_off_[b]; k < bslot_off_[b + 1]; ++k) slot_[bslot_[k]] = minoff_[b];
          h1_ ^= term1(b, minoff_[b]);
          h2_ ^= term2(b, minoff_[b]);
          off_[b] = -1;
          break;
        }
        case kCut:
          for (int t = slo_[c.index]; t + 1 < shi_[c.index]; ++t) ++cuts_[t];
          break;
      }
    }
  }

  // Place b at o and propagate; false when a section's unplaced buffers no longer fit (the caller undoes either
  // way). *hatless: b shares no section or conflict with an unplaced buffer.
  bool place(int b, i64 o, bool* hatless) {
    const i64 height = o + size_[b];
    trail_.push_back({kPlaced, b, 0});
    off_[b] = o;
    h1_ ^= term1(b, minoff_[b]);
    h2_ ^= term2(b, minoff_[b]);
    for (int k = bslot_off_[b]; k < bslot_off_[b + 1]; ++k) slot_[bslot_[k]] = kInf;
    for (int s = slo_[b]; s < shi_[b]; ++s) {
      total_[s] -= size_[b];
      trail_.push_back({kRoom, s, R_[s]});
      R_[s] = room(s, total_[s]);
    }
    *hatless = true;
    ++epoch_;
    affected_.clear();
    const i64 conflict_floor = has_conflicts_ ? element_end(o, height) : height;
    for (const Edge& e : overlaps_[b]) {
      const int j = e.j;
      if (off_[j] >= 0) continue;
      *hatless = false;
      const i64 raised = e.conflict ? conflict_floor : height;
      if (minoff_[j] >= raised) continue;
      const i64 m = next_legal(j, raised);
      if (m >= kInf) return false;  // j has no legal start left
      trail_.push_back({kMinoff, j, minoff_[j]});
      h1_ ^= term1(j, minoff_[j]) ^ term1(j, m);
      h2_ ^= term2(j, minoff_[j]) ^ term2(j, m);
      minoff_[j] = m;
      for (int k = bslot_off_[j]; k < bslot_off_[j + 1]; ++k) slot_[bslot_[k]] = m;
      for (int s = slo_[j]; s < shi_[j]; ++s)
        if (stamp_[s] != epoch_) {
          stamp_[s] = epoch_;
          affected_.push_back(s);
        }
    }
    // the unplaced buffers of each changed section must still stack in its free memory
    for (int s = slo_[b]; s < shi_[b]; ++s) {
      if (stamp_[s] == epoch_) continue;  // done below
      if (!stacks(s)) return false;
    }
    for (int s : affected_)
      if (!stacks(s)) return false;
    return true;
  }

  // Section inference: the lowest minoff of a section's unplaced buffers must leave room for all of them
  // (MiniMalloc's unallocated floor). Also refreshes the section's lowest minoff. (Checking every threshold -- the
  // buffers whose minoffs are at least h must fit above h -- is sound too, but on the challenge and perfect-packing
  // sets it removed under 1 % of the nodes for three to five times the time per node.)
  bool stacks(int s) {
    const i64 m = section_min(s);
    if (m != L_[s]) {
      trail_.push_back({kLow, s, L_[s]});
      L_[s] = m;
    }
    return m == kInf || m <= R_[s];
  }

  // Blocked levels (see the header): after a placement at (o, p), every section with an unplaced buffer at level
  // <= o needs one that can still start low enough: at o and not earlier in the preorder than p, or above o.
  bool blocked_levels_fit(i64 o, i64 p) const {
    for (int s = part_.plo; s < part_.phi; ++s) {
      if (L_[s] > o) continue;  // every unplaced buffer of s is above o: unaffected
      if (R_[s] >= o + sec_amax_[s]) continue;  // room for any buffer at the next aligned offset above o
      bool fits = false;
      for (int k = sec_off_[s]; k < sec_off_[s + 1] && !fits; ++k) {
        const int j = sec_mem_[k];
        if (off_[j] >= 0) continue;
        const i64 m = minoff_[j];
        if (m > o) fits = m <= R_[s];
        else if (m == o && pidx_[j] >= p) fits = true;
        else fits = next_legal(j, o + 1) <= R_[s];
      }
      if (!fits) return false;
    }
    return true;
  }

  // What the path holds, in 16-byte entries: the frames' orders, the nested parts, the undo trail.
  size_t held_entries() const { return frame_entries_ + part_entries_ + trail_.capacity(); }

  // Per-depth scratch space, so that a node allocates nothing once the search has warmed up.
  struct Frame {
    std::vector<std::pair<i64, int>> order;  // (minoff, preorder index) of the unplaced buffers, sorted
  };

  Status search(const std::vector<std::pair<i64, int>>& parent_order, i64 min_offset, i64 min_pidx) {
    ++nodes_;
    if (--budget_ < 0) return ABORTED;
    if ((nodes_ & check_mask_) == 0 && out_of_time()) return TIMEOUT;
    if (depth_ == frames_.size()) {
      if (held_entries() > entry_ceiling_) return MEMORY;
      frames_.emplace_back();
    }
    Frame& f = frames_[depth_];
    ++depth_;
    const Status st = search_node(f, parent_order, min_offset, min_pidx);
    --depth_;
    return st;
  }

  Status search_node(Frame& f, const std::vector<std::pair<i64, int>>& parent_order, i64 min_offset,
                     i64 min_pidx) {
    const std::vector<int>& pre = *part_.pre;
    // the parent's order minus the placed buffers, re-keyed and re-sorted (nearly sorted: insertion sort)
    auto& order = f.order;
    const size_t capacity = order.capacity();
    order.clear();
    for (const auto& [m, q] : parent_order) {
      const int i = pre[q];
      if (off_[i] >= 0) continue;
      std::pair<i64, int> item{minoff_[i], q};
      size_t k = order.size();
      order.push_back(item);
      while (k > 0 && item < order[k - 1]) {
        order[k] = order[k - 1];
        --k;
      }
      order[k] = item;
    }
    frame_entries_ += order.capacity() - capacity;  // counted before going deeper: a frame's vector only grows
    if (order.empty()) {
      for (int i : *part_.buffers) sol_[i] = off_[i];
      return FOUND;
    }
    const u64 k1 = (part_.base1 ^ h1_) | 1, k2 = part_.base2 ^ h2_;
    const Memo::Entry* hit = memo_->find(k1, k2);
    if (hit != nullptr && std::make_pair(hit->offset, hit->pidx) <= std::make_pair(min_offset, min_pidx))
      return NOTFOUND;
    const size_t node_mark = trail_.size();
    Status st = branch(f, pre, min_offset, min_pidx);
    undo_to(node_mark);
    if (st == NOTFOUND) memo_->remember(k1, k2, min_offset, min_pidx);
    return st;
  }

  // Forced placements: a section whose only possible lowest buffer is one unblocked buffer at the current level
  // (its room leaves no space for anything to start above the level instead) must get that buffer there, in every
  // placement below this node. Placing it now, without advancing the canonical constraint, keeps the search
  // complete and unique (the buffer sits at the same place in every solution of the subtree) and propagates its
  // consequences before any branching: with zero slack such chains of forced placements are long.
  // Returns -1 when a section has no possible lowest buffer, 1 when it placed something, 0 otherwise.
  int force_one(i64 o, i64 p, i64 min_height) {
    for (int s = part_.plo; s < part_.phi; ++s) {
      if (L_[s] > o) continue;  // every unplaced buffer of s is above o (and the lowest fits: checked)
      if (R_[s] >= o + sec_amax_[s]) continue;  // room for something to start above o
      int level = -1, count = 0;
      bool other = false;
      for (int k = sec_off_[s]; k < sec_off_[s + 1] && !other && count < 2; ++k) {
        const int j = sec_mem_[k];
        if (off_[j] >= 0) continue;
        const i64 m = minoff_[j];
        if (m > o) {
          other = m <= R_[s];
        } else if (m == o && pidx_[j] >= p) {
          level = j, ++count;
          // it may also be the section's lowest above the level, raised there by a buffer placed at the level in
          // another section (a placement that must not be cut off: found by brute force on 4 buffers)
          other = next_legal(j, o + 1) <= R_[s];
        } else {
          other = next_legal(j, o + 1) <= R_[s];
        }
      }
      if (other || count >= 2) continue;
      if (count == 0) return -1;
      if (o >= min_height) return -1;  // the forced placement is dominated: no compacted placement has it
      bool hatless;
      if (!place(level, o, &hatless)) return -1;
      trail_.push_back({kCut, level, 0});
      for (int t = slo_[level]; t + 1 < shi_[level]; ++t) --cuts_[t];
      sol_[level] = o;
      return 1;
    }
    return 0;
  }

  Status branch(Frame& f, const std::vector<int>& pre, i64 min_offset, i64 min_pidx) {
    auto& order = f.order;
    auto heights = [&]() {
      i64 min_height = kInf;
      for (const auto& [m, q] : order) {
        const int i = pre[q];
        if (off_[i] >= 0) continue;
        i64 top = minoff_[i] + size_[i];
        if (has_conflicts_ && !g_.conflicts[i].empty()) top = element_end(minoff_[i], top);
        min_height = std::min(min_height, top);
      }
      return min_height;
    };
    i64 min_height = heights();
    if (!order.empty()) {
      bool forced = false;
      while (true) {
        const int r = force_one(min_offset, min_pidx, min_height);
        if (r < 0) return NOTFOUND;
        if (r == 0) break;
        forced = true;
        min_height = heights();
      }
      if (forced) {  // re-key the order: forced buffers are gone, others were raised
        size_t w = 0;
        for (size_t k = 0; k < order.size(); ++k) {
          const int i = pre[order[k].second];
          if (off_[i] < 0) order[w++] = {minoff_[i], order[k].second};
        }
        order.resize(w);
        std::sort(order.begin(), order.end());
        if (order.empty()) {
          for (int i : *part_.buffers) sol_[i] = off_[i];
          return FOUND;
        }
      }
    }
    // every unplaced buffer of a section stacks at or above the next offset, so offsets above this cannot work
    i64 o_max = kInf;
    for (int s = part_.plo; s < part_.phi; ++s)
      if (L_[s] < kInf) o_max = std::min(o_max, R_[s]);
    for (const auto& [o, p] : order) {
      if (o < min_offset || (o == min_offset && p < min_pidx)) continue;  // canonical order
      if (o >= min_height || o > o_max) break;  // dominance, and the stacking cut-off
      const int b = pre[p];
      const size_t mark = trail_.size();
      bool hatless = true;
      Status st = NOTFOUND;
      if (place(b, o, &hatless) && blocked_levels_fit(o, p)) st = place_rest(o, p, b);
      undo_to(mark);
      if (st != NOTFOUND) return st;
      if (hatless) break;  // nothing overlaps b any more: any other first choice leads to the same subtrees
    }
    return NOTFOUND;
  }

  Status place_rest(i64 o, i64 p, int b) {
    sol_[b] = off_[b];
    bool split = false;
    const int lo = slo_[b], hi = shi_[b];
    for (int s = lo; s < hi - 1; ++s)
      if (--cuts_[s] == 0 && part_.plo <= s && s < part_.phi - 1) split = true;
    Status st;
    if (split && !has_conflicts_) {
      st = solve_partitions(*part_.buffers, part_.plo, part_.phi);
    } else {
      st = search(frames_[depth_ - 1].order, o, p);
    }
    for (int s = lo; s < hi - 1; ++s) ++cuts_[s];
    return st;
  }

  int n_, S_;
  i64 cap_;
  std::vector<i64> size_;
  std::vector<int> slo_, shi_;
  std::vector<i64> align_;
  std::vector<i64> lifetimes_;  // in time units, for the A and W preorders (section counts would distort them)
  General g_;
  bool has_conflicts_ = false;
  std::vector<int> sec_off_, sec_mem_, bslot_off_, bslot_;
  std::vector<i64> sec_amax_;
  std::vector<std::vector<Edge>> overlaps_;
  std::vector<i64> total0_;
  std::vector<int> cuts0_;
  std::vector<u64> zob1_, zob2_;

  std::string heuristic_;
  u64 hidx_ = 0;
  std::vector<i64> total_, R_, L_, minoff_, off_, slot_;
  std::vector<int> cuts_, pidx_, affected_;
  std::vector<u64> stamp_;
  u64 epoch_ = 0;
  std::vector<Change> trail_;
  Part part_{nullptr, nullptr, 0, 0, 0, 0};
  u64 h1_ = 0, h2_ = 0;
  std::deque<Frame> frames_;  // a deque: growing it keeps references to the shallower frames valid
  size_t depth_ = 0;
  size_t frame_entries_ = 0;  // entries reserved by every frame's order
  size_t part_entries_ = 0;  // entries held by the parts on the path (solve_partitions)
  // the clock is read every check_mask_ + 1 nodes: 1,024 on up to 16 buffers, about 16,384 / n above (a node
  // walks the unplaced buffers and sections: with 20,000 buffers 1,024 nodes took 2.6 s past a 0.25 s limit)
  i64 check_mask_ = 1023;
  i64 budget_ = 0;
  std::deque<Memo> memos_;
  Memo* memo_ = nullptr;
  Clock::time_point start_, deadline_;
  std::atomic<bool>* stop_ = nullptr;
};

// Per buffer its legal start windows [first0, last0, first1, last1, ...], per buffer its conflict partners,
// (boundary or -1, element0, element1), per section its free memory [start0, end0, start1, end1, ...].
using GeneralInputs = std::tuple<std::vector<std::vector<i64>>, std::vector<std::vector<i64>>, std::array<i64, 3>,
                                 std::vector<std::vector<i64>>>;

General read_general(const GeneralInputs& in, size_t n, int sections) {
  const auto& [w, c, geo, p] = in;
  const char* fn = "search";
  require(w.size() == n, fn, "windows has the wrong length");
  require(c.size() == n, fn, "conflicts has the wrong length");
  require(p.size() == size_t(sections), fn, "profiles has the wrong length");
  require(geo[1] > 0 && geo[2] > 0, fn, "geometry is (boundary, element0, element1)");
  General g;
  g.enabled = true;
  g.boundary = geo[0] < 0 ? kInf : geo[0];
  g.element0 = geo[1];
  g.element1 = geo[2];
  g.windows.resize(n);
  g.conflicts.resize(n);
  for (size_t i = 0; i < n; ++i) {
    require(w[i].size() % 2 == 0, fn, "windows are [first, last] pairs");
    for (size_t k = 0; k < w[i].size(); k += 2) g.windows[i].push_back({w[i][k], w[i][k + 1]});
    for (i64 j : c[i]) {
      require(j >= 0 && size_t(j) < n && size_t(j) != i, fn, "bad conflict index");
      g.conflicts[i].push_back(int(j));
    }
  }
  g.profiles.resize(sections);
  for (int s = 0; s < sections; ++s) {
    require(p[s].size() % 2 == 0, fn, "profiles are [start, end) pairs");
    for (size_t k = 0; k < p[s].size(); k += 2) g.profiles[s].push_back({p[s][k], p[s][k + 1]});
  }
  return g;
}

// A worker thread with a large stack: the search recurses a few frames per placed buffer, and a default 8 MiB
// stack would overflow on tens of thousands of buffers (the memory is only reserved, not committed).
class Worker {
 public:
  explicit Worker(std::function<void()> body) : body_(std::move(body)) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, size_t(512) << 20);
    started_ = pthread_create(&id_, &attr, &Worker::run, this) == 0;
    pthread_attr_destroy(&attr);
    if (!started_) body_();  // no thread to be had: run it here
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  void join() {
    if (started_) pthread_join(id_, nullptr);
    started_ = false;
  }

 private:
  static void* run(void* self) {
    static_cast<Worker*>(self)->body_();
    return nullptr;
  }
  std::function<void()> body_;
  pthread_t id_{};
  bool started_ = false;
};

using Result = std::tuple<int, std::optional<std::vector<i64>>, i64, std::optional<std::string>>;

// ``shares``: lists of preorder names, one thread per list (a portfolio whose first definite answer wins). The
// calling thread runs the first share itself, holding the GIL; it reports progress about twice a second and turns
// Ctrl-C into a KeyboardInterrupt after stopping the workers.
Result search(std::vector<i64> size, std::vector<i64> life, std::vector<i64> lo64, std::vector<i64> hi64,
              std::vector<i64> align, i64 capacity, int sections, std::vector<std::vector<std::string>> shares,
              double time_limit, std::function<void(double, i64)> progress, std::optional<GeneralInputs> general,
              i64 seed) {
  const char* fn = "search";
  const size_t n = size.size();
  require(life.size() == n && lo64.size() == n && hi64.size() == n && align.size() == n, fn,
          "sequences of different lengths");
  for (size_t i = 0; i < n; ++i)
    require(size[i] > 0 && align[i] > 0 && lo64[i] >= 0 && hi64[i] <= sections && lo64[i] < hi64[i], fn,
            "bad buffer data");
  require(!shares.empty() && std::none_of(shares.begin(), shares.end(), [](const auto& h) { return h.empty(); }),
          fn, "no heuristics");
  General g;
  if (general) g = read_general(*general, n, sections);
  std::vector<int> lo(lo64.begin(), lo64.end()), hi(hi64.begin(), hi64.end());
  const size_t K = shares.size();
  std::vector<std::unique_ptr<Search>> searches;
  for (size_t k = 0; k < K; ++k) {
    searches.push_back(std::make_unique<Search>(size, lo, hi, align, capacity, sections, life, g));
    searches.back()->seed_ = u64(seed) + k;
    searches.back()->memo_entries_ = kMemoMaxEntries / K;
    searches.back()->entry_ceiling_ = kFrameMaxEntries / K;
  }
  std::atomic<bool> stop{false};
  std::mutex mu;
  int winner = -1;
  std::vector<Status> results(K, TIMEOUT);
  std::vector<std::string> answered(K);
  const auto start = std::chrono::steady_clock::now();
  auto next_report = start + std::chrono::milliseconds(500);
  std::deque<Worker> threads;  // a deque: a Worker's address is its thread's argument
  std::exception_ptr failure;  // Ctrl-C or an exception of `progress`: raised once every search has stopped
  auto launch = [&](size_t k) {
    const double left =
        time_limit - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    threads.emplace_back([&, k, left]() {
      const Status st = searches[k]->solve(shares[k], std::max(left, 0.0), &stop, &answered[k]);
      std::lock_guard<std::mutex> lock(mu);
      results[k] = st;
      if ((st == FOUND || st == NOTFOUND) && winner < 0) {
        winner = int(k);
        stop = true;
      }
    });
  };
  // The first share runs on this thread, holding the GIL as a single search always did: no thread start-up or
  // wake-up latency on the many instances that end in milliseconds. Every 1024 nodes it checks for Ctrl-C,
  // reports progress about twice a second, and, once it has run kStaggerMs without an answer, starts the other
  // shares' threads (which never touch Python).
  const auto stagger = start + std::chrono::milliseconds(kStaggerMs);
  bool launched = K == 1;  // shares 1.. run on threads; share 0 on this one
  std::function<bool()> tick = [&]() {
    if (PyErr_CheckSignals() < 0) {  // Ctrl-C: KeyboardInterrupt, after stopping all
      failure = std::make_exception_ptr(nb::python_error());
      return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!launched && now >= stagger) {
      launched = true;
      for (size_t k = 1; k < K; ++k) launch(k);
    }
    if (progress && now >= next_report) {
      next_report = now + std::chrono::milliseconds(500);
      i64 nodes = 0;
      for (const auto& sp : searches) nodes += sp->published_nodes_.load(std::memory_order_relaxed);
      try {
        progress(std::chrono::duration<double>(now - start).count(), nodes);
      } catch (...) {  // the exception propagates to the caller
        failure = std::current_exception();
        return false;
      }
    }
    return true;
  };
  searches[0]->tick_ = &tick;
  const Status first = searches[0]->solve(shares[0], time_limit, &stop, &answered[0]);
  {
    std::lock_guard<std::mutex> lock(mu);
    results[0] = first;
    if ((first == FOUND || first == NOTFOUND) && winner < 0) winner = 0;
    stop = true;  // an answer, the time limit, or Ctrl-C: the other shares stop too
  }
  if (!threads.empty()) {
    nb::gil_scoped_release release;
    for (auto& t : threads) t.join();
  }
  if (failure) std::rethrow_exception(failure);
  i64 nodes = 0;
  for (const auto& sp : searches) nodes += sp->nodes_;
  if (winner >= 0 && results[winner] == FOUND) return {0, searches[winner]->sol_, nodes, answered[winner]};
  if (winner >= 0) return {1, std::nullopt, nodes, answered[winner]};
  // no answer: the time limit, or (code 3) a search's path scratch reached its memory ceiling
  const bool memory = std::any_of(results.begin(), results.end(), [](Status r) { return r == MEMORY; });
  return {memory ? 3 : 2, std::nullopt, nodes, std::nullopt};
}

}  // namespace

NB_MODULE(_canonical, m) {
  m.doc() = "Compiled canonical search (see placer.placement.canonical).";
  // the interface version placer/native.py expects (native.MODULES): bump both with any change to the call
  m.attr("VERSION") = 1;
  m.def("search", &search, nb::kw_only(), nb::arg("sizes"), nb::arg("lifetimes"), nb::arg("slo"), nb::arg("shi"),
        nb::arg("aligns"), nb::arg("capacity"), nb::arg("sections"), nb::arg("shares"), nb::arg("time_limit"),
        nb::arg("progress").none() = nb::none(), nb::arg("general").none() = nb::none(), nb::arg("seed") = 0,
        "Canonical search: (status, offsets, nodes, heuristic); status 0 placed, 1 infeasible (a proof), "
        "2 unknown (time limit), 3 unknown (memory ceiling). See placer.placement.canonical.");
}
