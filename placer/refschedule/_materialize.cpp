// The main loop of placer.refschedule.reference.materialize, compiled. reference.py prepares every constant with numpy
// (the rows' offsets, the hazard keys and the predecessors as CSR arrays); this file is a line-by-line port of
// reference._materialize_python, the test oracle, so both give the same schedule bit for bit.
//
//   materialize(*, order, source, words, dst_ptr, dst_tile, dst_addr, select, pointer, lead, guard,
//               pred_ptr, pred, src_key_ptr, src_key, dst_key_ptr, dst_key_entry, dst_key, keys,
//               tx, rx, cutover, carries, horizon) -> bool
//
// Every argument is a one-dimensional C-contiguous int64 array (placer/native.h; nanobind refuses anything else
// with TypeError) except `keys` (the number of hazard keys) and the outputs cutover/carries (bool); tx, rx,
// cutover, carries and horizon are written in place (the caller zeroes them; the number of tiles is horizon's
// length). Returns False, having decided nothing, where a transfer's checks would reach outside the event rows'
// [0, cap) (the Python loop would raise IndexError or, on a negative index, read a row's end; no bundled
// machine's routes lead there): the caller raises. Everything else the loop indexes through or sums (an order,
// predecessor or tile out of range, a transfer without destinations, negative words, addresses near the int64
// limits) is checked first, raising ValueError, so that no call reads outside a buffer or overflows.
#include "native.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using namespace placer;
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

// Everything the loop indexes through, checked once: a wrong call raises ValueError rather than reading outside
// a buffer.
void check(const Inputs& in) {
  const char* fn = "materialize";
  const i64 n = in.n, entries = in.entries, tiles = in.tiles;
  require(in.dptr[0] == 0 && in.dptr[n] == entries, fn, "dst_ptr does not span the entries");
  for (i64 i = 0; i < n; ++i) {
    require(in.dptr[i + 1] > in.dptr[i], fn, "a transfer without destinations");
    require(in.source[i] >= 0 && in.source[i] < tiles, fn, "source tile out of range");
    require(in.words[i] >= 0 && in.words[i] <= kMaxWords, fn, "words out of range");
  }
  for (i64 e = 0; e < entries; ++e) {
    require(in.dest[e] >= 0 && in.dest[e] < tiles, fn, "destination tile out of range");
    require(in.addr[e] > -kMaxAddress && in.addr[e] < kMaxAddress, fn, "address out of range");
  }
  for (i64 t = 0; t < in.n_order; ++t) require(in.order[t] >= 0 && in.order[t] < n, fn, "order names no transfer");
  auto csr = [n](const i64* ptr, i64 len) {
    if (ptr[0] != 0 || ptr[n] != len) return false;
    for (i64 i = 0; i < n; ++i)
      if (ptr[i + 1] < ptr[i]) return false;
    return true;
  };
  require(csr(in.pred_ptr, in.pred_ptr[n]) && csr(in.skey_ptr, in.skey_ptr[n]) && csr(in.dkey_ptr, in.dkey_ptr[n]),
          fn, "a CSR pointer array is not non-decreasing from 0");
  for (i64 k = 0; k < in.pred_ptr[n]; ++k) require(in.pred[k] >= 0 && in.pred[k] < n, fn, "predecessor out of range");
  for (i64 k = 0; k < in.skey_ptr[n]; ++k)
    require(in.skey[k] >= 0 && in.skey[k] < in.keys, fn, "send key out of range");
  for (i64 k = 0; k < in.dkey_ptr[n]; ++k) {
    require(in.dkey[k] >= 0 && in.dkey[k] < in.keys, fn, "receive key out of range");
    const i64 e = in.dkey_entry[k];
    require(e >= 0 && e < entries, fn, "receive key entry out of range");
  }
}

bool materialize(In64 order, In64 source, In64 words, In64 dst_ptr, In64 dst_tile, In64 dst_addr, In64 select,
                 In64 pointer, In64 lead, In64 guard, In64 pred_ptr, In64 pred, In64 src_key_ptr, In64 src_key,
                 In64 dst_key_ptr, In64 dst_key_entry, In64 dst_key, i64 keys, Out64 tx, Out64 rx, OutBool cutover,
                 OutBool carries, Out64 horizon) {
  const char* fn = "materialize";
  const i64 n = length(source), entries = length(dst_tile);
  require(length(words) == n && length(dst_ptr) == n + 1 && length(dst_addr) == entries &&
              length(select) == entries && length(pointer) == entries && length(lead) == n && length(guard) == n &&
              length(pred_ptr) == n + 1 && length(src_key_ptr) == n + 1 && length(dst_key_ptr) == n + 1 &&
              length(dst_key_entry) == length(dst_key) && length(tx) == n && length(rx) == entries &&
              length(cutover) == entries && length(carries) == entries && keys >= 0,
          fn, "array lengths do not match");
  require(length(pred) == pred_ptr.data()[n] && length(src_key) == src_key_ptr.data()[n] &&
              length(dst_key_entry) == dst_key_ptr.data()[n],
          fn, "a CSR array's length does not match its pointers");
  Inputs in{};
  in.order = order.data(), in.source = source.data(), in.words = words.data(), in.dptr = dst_ptr.data();
  in.dest = dst_tile.data(), in.addr = dst_addr.data(), in.sel = select.data(), in.ptr = pointer.data();
  in.lead = lead.data(), in.guard = guard.data(), in.pred_ptr = pred_ptr.data(), in.pred = pred.data();
  in.skey_ptr = src_key_ptr.data(), in.skey = src_key.data(), in.dkey_ptr = dst_key_ptr.data();
  in.dkey_entry = dst_key_entry.data(), in.dkey = dst_key.data();
  in.n_order = length(order), in.n = n, in.entries = entries, in.tiles = length(horizon), in.keys = keys;
  check(in);
  const Outputs out{tx.data(), rx.data(), horizon.data(), cutover.data(), carries.data()};
  nb::gil_scoped_release release;
  return run(in, out);
}

}  // namespace

NB_MODULE(_materialize, m) {
  m.doc() = "Compiled reference timing (see placer.refschedule.reference.materialize).";
  // the interface version placer/native.py expects (native.MODULES): bump both with any change to the call
  m.attr("VERSION") = 2;
  m.def("materialize", &materialize, nb::kw_only(), array("order"), array("source"), array("words"),
        array("dst_ptr"), array("dst_tile"), array("dst_addr"), array("select"), array("pointer"), array("lead"),
        array("guard"), array("pred_ptr"), array("pred"), array("src_key_ptr"), array("src_key"),
        array("dst_key_ptr"), array("dst_key_entry"), array("dst_key"), nb::arg("keys"), array("tx"), array("rx"),
        array("cutover"), array("carries"), array("horizon"),
        "Time the transfers in `order` by the reference's rules, writing tx, rx, cutover, carries and horizon; "
        "False (nothing decided) where a transfer's checks would reach outside the event rows.");
}
