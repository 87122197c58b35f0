// The balancing heap of placer.streams.balance.balanced_picks, compiled. balance.py prepares the order-free inputs
// with numpy (the items' rank, every endpoint's total work, the destination sets as CSR); this file is a
// line-by-line port of balance._balanced_picks_python, the test oracle, so both give the same picks, except for
// how an endpoint's parked items are ordered when `tiered` (best_of_tiered: two heaps instead of one, the same
// choice without re-keying the items that tie on the endpoint's own work). The non-delay list of
// placer.refschedule.nondelay is the second heap here (see nondelay_run below).
//
//   picks(*, rank, wave, words, stream, source, dset, set_ptr, set_res, work, picked, tiered) -> int
//
// Every argument is a one-dimensional C-contiguous int64 array (placer/native.h; nanobind refuses anything else
// with TypeError). rank, wave, words, stream, source, dset and picked have one entry per item; set_res holds each
// destination set's endpoints (tiles + tile, so a port) as CSR over set_ptr; work holds every endpoint's remaining
// work (its length is the number of endpoints) and is updated in place, as picked (each item's pick number) is
// written. Returns how many items were picked (the caller raises if not all). Everything the loop indexes through
// and the bounds that keep its sums inside int64 are checked first, raising ValueError, so that no call reads
// outside a buffer, overflows or does not end (negative words would make times go back).
//
// Every heap holds distinct keys (an item is in one heap at a time and its id is in its key; an endpoint has at
// most one event, guarded by `queued`), so any binary heap pops in the same order as Python's heapq. The tiered
// queues may also hold entries of items that left (dropped when met) and an item parked again on the same endpoint
// twice: the older entry overstates its key, as any entry not re-keyed does, and is re-keyed when met, and equal
// entries of one item are interchangeable.
#include "native.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

namespace {

using namespace placer;

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

struct Ranked {  // (stream, item): the order of the items that tie on work
  i64 stream, item;
  bool operator>(const Ranked& o) const { return std::tie(stream, item) > std::tie(o.stream, o.item); }
};

class Balance {
 public:
  // tiered: the two heaps per endpoint (see best_of_tiered), for items whose words are all positive
  Balance(const Inputs& in, i64* work, i64* picked, bool tiered)
      : in_(in), work_(work), picked_(picked), tiered_(tiered), ready_(size_t(in.endpoints), 0),
        parked_(size_t(tiered ? 0 : in.endpoints)), by_other_(size_t(tiered ? in.endpoints : 0)),
        by_stream_(size_t(tiered ? in.endpoints : 0)), where_(size_t(tiered ? in.count : 0), -1),
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
            if (has_parked(e)) {
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
            repark(c, bl);
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

  void park(i64 c) { repark(c, blocker(c)); }

  // item c parks on its blocker bl.b (bl: its blocker now), which then has an event
  void repark(i64 c, const Blocker& bl) {
    if (tiered_) {
      where_[size_t(c)] = bl.b;
      push(by_other_[size_t(bl.b)], Parked{-other(c, bl.b), in_.stream[c], c});
      push(by_stream_[size_t(bl.b)], Ranked{in_.stream[c], c});
    } else {
      push(parked_[size_t(bl.b)], Parked{-bl.w, in_.stream[c], c});
    }
    wake(bl.b);
  }

  // the largest remaining work of c's endpoints other than e (0 if none is larger)
  i64 other(i64 c, i64 e) const {
    i64 o = 0;
    auto visit = [&](i64 r) {
      if (r != e && work_[r] > o) o = work_[r];
    };
    visit(in_.source[c]);
    const i64 d = in_.dset[c];
    for (i64 k = in_.set_ptr[d]; k < in_.set_ptr[d + 1]; ++k) visit(in_.set_res[k]);
    return o;
  }

  bool has_parked(i64 e) {
    if (!tiered_) return !parked_[size_t(e)].empty();
    std::vector<Ranked>& h = by_stream_[size_t(e)];
    while (!h.empty() && where_[size_t(h.front().item)] != e) pop(h);  // entries of items that left
    return !h.empty();
  }

  void best_of(i64 e, i64 now, std::vector<Compete>& compete) {
    if (tiered_) {
      best_of_tiered(e, now, compete);
    } else {
      best_of_line(e, now, compete);
    }
  }

  // best_of_line's choice without re-keying the items whose key is e's own work. Every item parked on e uses e,
  // so its key is max(e's work, the largest work of its other endpoints): one heap orders the items by the
  // latter (re-keyed lazily, as best_of_line does: it only goes down), and when its best is not above e's work,
  // every item ties on e's work and the second heap, by (stream, item), orders them. An item is parked on one
  // endpoint at a time (where_); entries of items that left are dropped when met. The same picks as
  // best_of_line when every item's words are positive (a pick then makes its endpoints ready strictly later, so
  // which blocked items a search re-parks on the way does not change what competes at any time): checked
  // against the Python heap on random items and real phases (tests/ordering/test_balance_compiled.py).
  void best_of_tiered(i64 e, i64 now, std::vector<Compete>& compete) {
    std::vector<Parked>& by_other = by_other_[size_t(e)];
    std::vector<Ranked>& by_stream = by_stream_[size_t(e)];
    for (;;) {
      const i64 own = std::max<i64>(0, work_[e]);
      i64 c = -1;
      while (!by_other.empty()) {
        const Parked top = by_other.front();
        if (where_[size_t(top.item)] != e) {
          pop(by_other);
        } else if (-top.neg_w <= own) {  // no item's other work is above e's (the keys only overstate it)
          break;
        } else if (const i64 o = other(top.item, e); -o != top.neg_w) {
          pop(by_other);
          push(by_other, Parked{-o, top.stream, top.item});
        } else {
          c = top.item;
          break;
        }
      }
      if (c < 0) {
        if (!has_parked(e)) return;
        c = by_stream.front().item;
      }
      where_[size_t(c)] = -1;
      const Blocker bl = blocker(c);
      if (bl.t > now) {  // blocked elsewhere (or here, later)
        repark(c, bl);
        continue;
      }
      push(compete, Compete{-bl.w, in_.stream[c], c, e});
      return;
    }
  }

  // move endpoint e's best item that can start at `now` into `compete`; re-park the others met
  void best_of_line(i64 e, i64 now, std::vector<Compete>& compete) {
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
    if (!queued_[size_t(r)] && has_parked(r)) {
      queued_[size_t(r)] = 1;
      push(events_, Event{end, r});
    }
  }

  const Inputs& in_;
  i64* work_;
  i64* picked_;
  const bool tiered_;
  std::vector<i64> ready_;
  std::vector<std::vector<Parked>> parked_;    // best_of_line's heap per endpoint: (-work, stream, item)
  std::vector<std::vector<Parked>> by_other_;  // best_of_tiered's: (-work of the other endpoints, stream, item)
  std::vector<std::vector<Ranked>> by_stream_;  // and (stream, item)
  std::vector<i64> where_;                      // per item: the endpoint it is parked on (-1: none)
  std::vector<char> queued_;
  std::vector<Event> events_;
};

// Everything the loop indexes through, and the bounds that keep its sums inside int64, checked once.
void check(const Inputs& in, const i64* work) {
  const char* fn = "picks";
  const i64 count = in.count, endpoints = in.endpoints;
  std::vector<char> seen(size_t(count), 0);
  i64 total = 0;
  for (i64 i = 0; i < count; ++i) {
    const i64 c = in.rank[i];
    require(c >= 0 && c < count && !seen[size_t(c)], fn, "rank is not a permutation of the items");
    seen[size_t(c)] = 1;
    require(in.source[i] >= 0 && in.source[i] < endpoints, fn, "source endpoint out of range");
    require(in.dset[i] >= 0 && in.dset[i] < in.sets, fn, "destination set out of range");
    const i64 w = in.words[i];
    require(w >= 0 && w < kMaxTotal, fn, "words out of range");
    total += w;
    require(total < kMaxTotal, fn, "words out of range");
  }
  for (i64 i = 0; i + 1 < count; ++i)
    require(in.wave[in.rank[i]] <= in.wave[in.rank[i + 1]], fn, "rank is not sorted by wave");
  require(in.set_ptr[0] == 0 && in.set_ptr[in.sets] == in.set_entries, fn, "set_ptr does not span set_res");
  for (i64 d = 0; d < in.sets; ++d) require(in.set_ptr[d + 1] >= in.set_ptr[d], fn, "set_ptr is not non-decreasing");
  for (i64 k = 0; k < in.set_entries; ++k)
    require(in.set_res[k] >= 0 && in.set_res[k] < endpoints, fn, "set endpoint out of range");
  for (i64 r = 0; r < endpoints; ++r) require(work[r] > -kMaxTotal && work[r] < kMaxTotal, fn, "work out of range");
}

i64 picks(In64 rank, In64 wave, In64 words, In64 stream, In64 source, In64 dset, In64 set_ptr, In64 set_res,
          Out64 work, Out64 picked, bool tiered) {
  const i64 count = length(rank);
  require(length(wave) == count && length(words) == count && length(stream) == count && length(source) == count &&
              length(dset) == count && length(picked) == count && length(set_ptr) >= 1,
          "picks", "array lengths do not match");
  const Inputs in{rank.data(),    wave.data(), words.data(), stream.data(), source.data(),  dset.data(),
                  set_ptr.data(), set_res.data(), count,     length(set_ptr) - 1, length(set_res), length(work)};
  check(in, work.data());
  require(!tiered || std::all_of(in.words, in.words + count, [](i64 w) { return w > 0; }), "picks",
          "the tiered queues take positive words only");
  nb::gil_scoped_release release;
  return Balance(in, work.data(), picked.data(), tiered).run();
}

// The loop of placer.refschedule.nondelay._nondelay_python, line by line: each step lists the transfer of least
// (earliest start, rank) among the eligible ones; a transfer that cannot start when it becomes eligible parks on
// its blocker (the resource free last, the first on ties: lanes 0..tiles-1, ports tiles..2·tiles-1) and each
// resource with parked transfers has one live wake in the heap, keyed (its free time, its best parked rank).
// Heap entries are (time, rank, transfer) or (time, rank, -1 - resource); a transfer's rank is in its key and a
// live wake carries the rank of a parked transfer, so every live key is distinct and this heap pops in heapq's
// order.
//
//   nondelay(*, source, words, dst_ptr, dst_tile, rank, succ_ptr, succ, lag, tiles, order) -> int
//
// Returns how many transfers were listed (fewer than all on a dependency cycle; the caller raises).
struct Entry {
  i64 time, rank, id;
  bool operator>(const Entry& o) const { return std::tie(time, rank, id) > std::tie(o.time, o.rank, o.id); }
};

struct Waiting {  // (rank, transfer) of a parked transfer
  i64 rank, item;
  bool operator>(const Waiting& o) const { return std::tie(rank, item) > std::tie(o.rank, o.item); }
};

class NonDelay {
 public:
  NonDelay(i64 n, const i64* source, const i64* words, const i64* dst_ptr, const i64* dst_tile, const i64* rank,
           const i64* succ_ptr, const i64* succ, i64 lag, i64 tiles)
      : n_(n), source_(source), words_(words), dst_ptr_(dst_ptr), dst_tile_(dst_tile), rank_(rank),
        succ_ptr_(succ_ptr), succ_(succ), lag_(lag), tiles_(tiles), waiting_(size_t(n), 0), free_(size_t(2 * tiles), 0),
        ready_(size_t(n), 0), parked_(size_t(2 * tiles)), wake_(size_t(2 * tiles), Key{0, 0, false}) {}

  i64 run(i64* order) {
    for (i64 k = 0; k < succ_ptr_[n_]; ++k) ++waiting_[size_t(succ_[k])];
    for (i64 x = 0; x < n_; ++x)
      if (waiting_[size_t(x)] == 0) enter(x, 0);
    i64 placed = 0;
    while (!heap_.empty()) {
      const Entry e = pop(heap_);
      const i64 t = e.time, r = e.rank, x = e.id;
      if (x < 0) {  // a wake of resource b
        const i64 b = -1 - x;
        Key& w = wake_[size_t(b)];
        if (!(w.live && w.time == t && w.rank == r)) continue;  // superseded
        if (free_[size_t(b)] > t) {  // the resource got busier since: wake later
          w.time = free_[size_t(b)];
          push(heap_, Entry{w.time, r, x});
          continue;
        }
        w.live = false;
        std::vector<Waiting>& queue = parked_[size_t(b)];
        enter(pop(queue).item, t);
        if (!queue.empty() && !w.live) {
          w = Key{free_[size_t(b)], queue.front().rank, true};
          push(heap_, Entry{w.time, w.rank, x});
        }
        continue;
      }
      i64 s = std::max(ready_[size_t(x)], free_[size_t(source_[x])]);
      for (i64 k = dst_ptr_[x]; k < dst_ptr_[x + 1]; ++k) s = std::max(s, free_[size_t(tiles_ + dst_tile_[k])]);
      if (s > t) {
        enter(x, t);
        continue;
      }
      order[placed++] = x;
      const i64 end = s + words_[x];
      free_[size_t(source_[x])] = end;
      for (i64 k = dst_ptr_[x]; k < dst_ptr_[x + 1]; ++k) free_[size_t(tiles_ + dst_tile_[k])] = end;
      for (i64 k = succ_ptr_[x]; k < succ_ptr_[x + 1]; ++k) {
        const i64 y = succ_[k];
        ready_[size_t(y)] = std::max(ready_[size_t(y)], end + lag_);
        if (--waiting_[size_t(y)] == 0) enter(y, s);
      }
    }
    return placed;
  }

 private:
  struct Key {
    i64 time, rank;
    bool live;
  };

  // x is eligible: into the heap at its start, or parked on its blocker if that is a resource busy after now
  void enter(i64 x, i64 now) {
    i64 t = ready_[size_t(x)], b = -1;
    if (free_[size_t(source_[x])] > t) {
      t = free_[size_t(source_[x])];
      b = source_[x];
    }
    for (i64 k = dst_ptr_[x]; k < dst_ptr_[x + 1]; ++k) {
      const i64 d = tiles_ + dst_tile_[k];
      if (free_[size_t(d)] > t) {
        t = free_[size_t(d)];
        b = d;
      }
    }
    if (b < 0 || t <= now) {
      push(heap_, Entry{t, rank_[x], x});
      return;
    }
    std::vector<Waiting>& queue = parked_[size_t(b)];
    push(queue, Waiting{rank_[x], x});
    if (queue.front().item == x) {  // the best parked here now: a wake at its key
      wake_[size_t(b)] = Key{t, rank_[x], true};
      push(heap_, Entry{t, rank_[x], -1 - b});
    }
  }

  const i64 n_;
  const i64 *source_, *words_, *dst_ptr_, *dst_tile_, *rank_, *succ_ptr_, *succ_;
  const i64 lag_, tiles_;
  std::vector<i64> waiting_, free_, ready_;
  std::vector<std::vector<Waiting>> parked_;
  std::vector<Key> wake_;
  std::vector<Entry> heap_;
};

i64 nondelay_run(i64 n, const i64* source, const i64* words, const i64* dst_ptr, const i64* dst_tile,
                 const i64* rank, const i64* succ_ptr, const i64* succ, i64 lag, i64 tiles, i64* order) {
  return NonDelay(n, source, words, dst_ptr, dst_tile, rank, succ_ptr, succ, lag, tiles).run(order);
}

bool csr_ok(const i64* ptr, i64 rows, i64 entries, const i64* col, i64 top) {
  if (ptr[0] != 0 || ptr[rows] != entries) return false;
  for (i64 r = 0; r < rows; ++r)
    if (ptr[r + 1] < ptr[r]) return false;
  for (i64 k = 0; k < entries; ++k)
    if (col[k] < 0 || col[k] >= top) return false;
  return true;
}

i64 nondelay(In64 source, In64 words, In64 dst_ptr, In64 dst_tile, In64 rank, In64 succ_ptr, In64 succ, i64 lag,
             i64 tiles, Out64 order) {
  const char* fn = "nondelay";
  const i64 n = length(source);
  require(length(words) == n && length(dst_ptr) == n + 1 && length(rank) == n && length(succ_ptr) == n + 1 &&
              length(order) == n,
          fn, "array lengths do not match");
  // a start is at most the words summed plus a lag per transfer: below 2^62 + 2^31 · 2^30, inside int64
  require(tiles >= 0 && tiles < (i64(1) << 40) && lag >= 0 && lag < (i64(1) << 30) && n < (i64(1) << 31), fn,
          "tiles, lag or the transfer count out of range");
  i64 total = 0;
  for (i64 x = 0; x < n; ++x) {
    require(source.data()[x] >= 0 && source.data()[x] < tiles, fn, "source out of range");
    const i64 w = words.data()[x];
    require(w >= 0 && w < kMaxTotal && (total += w) < kMaxTotal, fn, "words out of range");
  }
  require(csr_ok(dst_ptr.data(), n, length(dst_tile), dst_tile.data(), tiles), fn,
          "dst_ptr/dst_tile are not destinations in range");
  require(csr_ok(succ_ptr.data(), n, length(succ), succ.data(), n), fn, "succ_ptr/succ are not dependents in range");
  nb::gil_scoped_release release;
  return nondelay_run(n, source.data(), words.data(), dst_ptr.data(), dst_tile.data(), rank.data(), succ_ptr.data(),
                      succ.data(), lag, tiles, order.data());
}

}  // namespace

NB_MODULE(_balance, m) {
  m.doc() = "Compiled list-building heaps (placer.streams.balance.balanced_picks, placer.refschedule.nondelay).";
  // the interface version placer/native.py expects (native.MODULES): bump both with any change to the calls
  m.attr("VERSION") = 4;
  m.def("picks", &picks, nb::kw_only(), array("rank"), array("wave"), array("words"), array("stream"),
        array("source"), array("dset"), array("set_ptr"), array("set_res"), array("work"), array("picked"),
        nb::arg("tiered"),
        "The pick number of every item, written into `picked` (`work`: each endpoint's remaining work, updated); "
        "returns how many items were picked. `tiered`: each endpoint's items in two heaps (positive words only) "
        "instead of one. See placer.streams.balance.balanced_picks.");
  m.def("nondelay", &nondelay, nb::kw_only(), array("source"), array("words"), array("dst_ptr"), array("dst_tile"),
        array("rank"), array("succ_ptr"), array("succ"), nb::arg("lag"), nb::arg("tiles"), array("order"),
        "The non-delay list order, written into `order`; returns how many transfers were listed (fewer than all "
        "on a dependency cycle). See placer.refschedule.nondelay.nondelay_order.");
}
