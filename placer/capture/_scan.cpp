// The compiled capture scanner: placer.capture.scan drives it (see that module for the whole read and why the
// result is exactly the orjson path's). It reads the text of a capture in chunks, in one pass, and
//
//   * copies everything outside the "transfers": [...] arrays into `rest`, each array replaced by the marker
//     ["<nonce>",k], so that orjson parses the small remainder and confirms every cut was phases[k].transfers;
//   * parses each array into the final numpy columns of a Phase (int32 source/words/dst_tile, uint8 width, int64
//     CSR pointers and addresses), in owned memory handed to NumPy without a copy (placer::owned_array);
//   * checks on the way every per-transfer range of placer.capture.io._check_ranges except the one that needs the
//     tile count (which may come after the phases): it keeps the largest tile seen instead.
//
// Safety rule: accept only a strict subset of JSON -- non-negative integers of at most 18 digits without sign,
// fraction, exponent or leading zero; the seven known keys, each exactly once per object; widths
// "Word32"/"Paired64"; no escapes; non-empty lists; whitespace only between tokens -- and reject anything else. A rejection, a range that fails or a tile not below the tile count make Python take the orjson
// path, which then names the error; so this file never has to produce a message.
//
//   Scanner(*, nonce: bytes, max_tiles, max_words, address_limit, align, word_bytes)
//   .feed(chunk: bytes, final: bool = False) -> bool  # False once rejected; the GIL is released while it parses
//   .finish() -> (rest: bytes, [(source, words, width, src_ptr, src_addr, dst_ptr, dst_tile, dst_addr)], max_tile,
//                 bad: bool)                          # the columns are NumPy arrays with a Phase's dtypes
#include "native.h"

#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the key comparison reads little-endian words"
#endif

namespace {

using namespace placer;
using u8 = unsigned char;

// A growable column in realloc'd memory: large blocks grow by mremap, without copying, and are shrunk to fit at
// the end of the array so the NumPy array holds exactly the column.
template <class T>
struct Col {
  T* p = nullptr;
  size_t n = 0, cap = 0;
  Col() = default;
  Col(const Col&) = delete;
  Col& operator=(const Col&) = delete;
  Col(Col&& o) noexcept : p(o.p), n(o.n), cap(o.cap) { o.p = nullptr, o.n = o.cap = 0; }
  Col& operator=(Col&& o) noexcept {
    if (this != &o) {
      free(p);
      p = o.p, n = o.n, cap = o.cap;
      o.p = nullptr, o.n = o.cap = 0;
    }
    return *this;
  }
  ~Col() { free(p); }
  inline void push(T v) {
    if (n == cap) grow();
    p[n++] = v;
  }
  void grow() {
    const size_t c = cap < 1024 ? 1024 : cap * 2;
    T* q = static_cast<T*>(realloc(p, c * sizeof(T)));
    if (q == nullptr) throw std::bad_alloc();
    p = q, cap = c;
  }
  // ownership to a NumPy array (never a null pointer: an empty column is one spare byte)
  nb::ndarray<nb::numpy, T, nb::ndim<1>> to_array() {
    T* q = static_cast<T*>(realloc(p, n ? n * sizeof(T) : 1));
    if (q == nullptr) throw std::bad_alloc();
    p = nullptr;
    const size_t size = n;
    n = cap = 0;
    return owned_array(q, size);
  }
};

struct Region {
  Col<int32_t> source, words;
  Col<u8> width;
  Col<i64> src_ptr, src_addr, dst_ptr;
  Col<int32_t> dst_tile;
  Col<i64> dst_addr;
  Region() {
    src_ptr.push(0);
    dst_ptr.push(0);
  }
};

// parse results below zero: the text ran out before the step could be decided (retry with more text), or it is
// outside the accepted subset
constexpr i64 NEED = -1;
constexpr i64 REJ = -2;

inline bool is_ws(u8 c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

struct Key {
  const char* s;  // the key's text with its closing quote (the opening one is already consumed)
  i64 len;
};
const Key kTransferKeys[] = {{"source\"", 7}, {"source_addresses\"", 17}, {"destinations\"", 13},
                             {"words\"", 6}, {"width\"", 6}};
enum { K_SOURCE, K_SRCADDR, K_DESTS, K_WORDS, K_WIDTH, K_ALL = 31 };
const Key kDestKeys[] = {{"tile\"", 5}, {"address\"", 8}};
const Key kWidths[] = {{"Word32\"", 7}, {"Paired64\"", 9}};  // WORD32 = 0, PAIRED64 = 1 (model.WIDTH_NAMES)

// Which of `keys` starts at q (position after it in *end), REJ if none can, NEED if one might but the text ends.
template <size_t N>
inline int match(const u8* d, i64 q, i64 n, const Key (&keys)[N], i64* end) {
  bool partial = false;
  for (size_t k = 0; k < N; ++k) {
    const i64 len = keys[k].len, avail = n - q;
    if (avail >= len) {
      if (std::memcmp(d + q, keys[k].s, size_t(len)) == 0) {
        *end = q + len;
        return int(k);
      }
    } else if (std::memcmp(d + q, keys[k].s, size_t(avail)) == 0) {
      partial = true;
    }
  }
  return partial ? int(NEED) : int(REJ);
}

// The same with the text long enough for every candidate (the common case): a key is compared as one to three
// unaligned 8-byte words (overlapping for lengths that are not a multiple of 8), the literal folded by the compiler.
inline uint64_t load8(const u8* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint64_t lit8(const char* s, size_t off, size_t len) {  // s[off, off + len) as load8 reads it (len <= 8)
  uint64_t v = 0;
  for (size_t i = 0; i < len; ++i) v |= uint64_t(u8(s[off + i])) << (8 * i);
  return v;
}

template <size_t L>
inline bool eq(const u8* p, const char (&s)[L]) {  // p must have max(8, L - 1) readable bytes
  constexpr size_t n = L - 1;
  if constexpr (n < 8) {
    constexpr uint64_t mask = (uint64_t(1) << (8 * n)) - 1;
    return (load8(p) & mask) == lit8(s, 0, n);
  } else if constexpr (n <= 16) {
    return load8(p) == lit8(s, 0, 8) && load8(p + n - 8) == lit8(s, n - 8, 8);
  } else {
    static_assert(n <= 24, "longer keys need another word");
    return load8(p) == lit8(s, 0, 8) && load8(p + 8) == lit8(s, 8, 8) && load8(p + n - 8) == lit8(s, n - 8, 8);
  }
}

inline int transfer_key(const u8* d, i64 q, i64 n, i64* end) {
  if (n - q < 17) return match(d, q, n, kTransferKeys, end);
  const u8* p = d + q;
  int k = REJ;
  switch (p[0]) {
    case 's':
      k = eq(p, "source\"") ? K_SOURCE : eq(p, "source_addresses\"") ? K_SRCADDR : int(REJ);
      break;
    case 'd':
      k = eq(p, "destinations\"") ? K_DESTS : int(REJ);
      break;
    case 'w':
      k = eq(p, "words\"") ? K_WORDS : eq(p, "width\"") ? K_WIDTH : int(REJ);
      break;
  }
  if (k >= 0) *end = q + kTransferKeys[k].len;
  return k;
}

inline int dest_key(const u8* d, i64 q, i64 n, i64* end) {
  if (n - q < 8) return match(d, q, n, kDestKeys, end);
  const u8* p = d + q;
  if (p[0] == 't' && eq(p, "tile\"")) {
    *end = q + 5;
    return 0;
  }
  if (p[0] == 'a' && eq(p, "address\"")) {
    *end = q + 8;
    return 1;
  }
  return int(REJ);
}

inline int width_value(const u8* d, i64 q, i64 n, i64* end) {
  if (n - q < 9) return match(d, q, n, kWidths, end);
  const u8* p = d + q;
  if (p[0] == 'W' && eq(p, "Word32\"")) {
    *end = q + 7;
    return 0;
  }
  if (p[0] == 'P' && eq(p, "Paired64\"")) {
    *end = q + 9;
    return 1;
  }
  return int(REJ);
}

// A non-negative integer at q: its value in *out and the position after it (the caller's next whitespace skip
// asks for more text if the digits reach the end, since they may go on in the next chunk).
inline i64 uint_at(const u8* d, i64 q, i64 n, i64* out) {
  if (q >= n) return NEED;
  unsigned c = unsigned(d[q]) - '0';
  if (c > 9) return REJ;
  i64 v = c;
  const i64 start = q++;
  if (c == 0) {  // "0" alone: a leading zero is not JSON
    if (q < n && unsigned(d[q]) - '0' <= 9) return REJ;
    *out = 0;
    return q;
  }
  while (q < n) {
    c = unsigned(d[q]) - '0';
    if (c > 9) break;
    if (q - start >= 18) return REJ;  // 19 digits could overflow int64; no valid field needs more than 10
    v = v * 10 + c;
    ++q;
  }
  *out = v;
  return q;
}

class Scanner {
 public:
  Scanner(std::string nonce, i64 max_tiles, i64 max_words, i64 address_limit, i64 align, i64 word_bytes)
      : nonce_(std::move(nonce)), max_tiles_(max_tiles), max_words_(max_words), limit_(address_limit),
        align_mask_(align - 1), word_bytes_(word_bytes) {}

  // Parse `buf` after the carried-over text; false if the text is rejected.
  bool feed(const u8* buf, i64 n, bool final) {
    if (rejected_ || finished_) return false;
    i64 off = 0;
    // Stitch the carry (an incomplete step, usually one transfer) to the start of the chunk in a small buffer
    // until the parser has moved into the chunk; from there it reads the chunk in place (no copy of the bulk).
    i64 take = 4096;
    while (!carry_.empty()) {
      const i64 old = i64(carry_.size());
      const i64 k = std::min(n - off, std::max(take, old));
      carry_.append(reinterpret_cast<const char*>(buf + off), size_t(k));
      off += k;
      const bool last = final && off == n;
      const i64 pos = run(reinterpret_cast<const u8*>(carry_.data()), i64(carry_.size()), last);
      if (pos < 0) return reject();
      if (last) {
        carry_.erase(0, size_t(pos));
        return finish_feed(final);
      }
      if (pos >= old) {
        // everything carried over is consumed: continue in the chunk itself at the same text position
        off -= i64(carry_.size()) - pos;
        carry_.clear();
        break;
      }
      carry_.erase(0, size_t(pos));
      if (off == n) return true;  // the chunk is all carried; wait for the next one
      take *= 4;
    }
    const i64 pos = run(buf + off, n - off, final);
    if (pos < 0) return reject();
    carry_.assign(reinterpret_cast<const char*>(buf + off + pos), size_t(n - off - pos));
    return finish_feed(final);
  }

  bool rejected() const { return rejected_; }
  bool finished() const { return finished_; }
  std::string rest_;
  std::vector<Region> done_;
  i64 max_tile_ = -1;
  bool bad_ = false;

 private:
  bool finish_feed(bool final) {
    if (!final) return true;
    if (state_ != OUTSIDE || !carry_.empty()) return reject();  // the text ended inside a transfers array
    finished_ = true;
    return true;
  }

  bool reject() {
    rejected_ = true;
    done_.clear();
    done_.shrink_to_fit();
    cur_ = Region();
    std::string().swap(rest_);
    std::string().swap(carry_);
    return false;
  }

  // Consume d[0:n] as far as whole steps go; the position of the first unconsumed byte, or REJ. A step is the
  // search for the next "transfers" key (outside the arrays), an array's opening, or one transfer.
  i64 run(const u8* d, i64 n, bool final) {
    i64 p = 0;
    for (;;) {
      if (state_ == OUTSIDE) {
        const i64 found = find_array(d, p, n, final);
        if (found < 0) return -found - 1;  // all consumed up to there
        p = found;
        continue;
      }
      // in an array: at its '[' (OPEN) or just after a transfer's '}' (AFTER)
      i64 q = p + (state_ == OPEN ? 1 : 0);
      while (q < n && is_ws(d[q])) ++q;
      if (q >= n) return p;
      if (d[q] == ']') {
        done_.push_back(std::move(cur_));
        cur_ = Region();
        state_ = OUTSIDE;
        p = q + 1;
        continue;
      }
      if (state_ == AFTER) {
        if (d[q] != ',') return REJ;
        ++q;
        while (q < n && is_ws(d[q])) ++q;
        if (q >= n) return p;
      }
      const i64 e = transfer(d, q, n);
      if (e == REJ) return REJ;
      if (e == NEED) return p;
      state_ = AFTER;
      p = e;
    }
  }

  // Outside the arrays: copy text to rest_ up to the next `"transfers" ws : ws [` and return the position of its
  // '['; or return -(k + 1) where k is how far the text was consumed.
  i64 find_array(const u8* d, i64 p, i64 n, bool final) {
    static const char kKey[] = "\"transfers\"";
    const i64 klen = 11;
    for (;;) {
      const void* hit = n - p >= klen ? memmem(d + p, size_t(n - p), kKey, size_t(klen)) : nullptr;
      if (hit == nullptr) {
        // keep a tail that could be the start of a key cut by the chunk's end
        const i64 keep = final ? n : std::max(p, n - (klen - 1));
        rest_.append(reinterpret_cast<const char*>(d + p), size_t(keep - p));
        return -(keep + 1);
      }
      const i64 h = static_cast<const u8*>(hit) - d;
      i64 j = h + klen;
      while (j < n && is_ws(d[j])) ++j;
      const bool colon = j < n && d[j] == ':';
      if (colon) {
        for (++j; j < n && is_ws(d[j]);) ++j;
      }
      if (j >= n && !final) {  // undecided until the next chunk: carry the text from the key on
        rest_.append(reinterpret_cast<const char*>(d + p), size_t(h - p));
        return -(h + 1);
      }
      if (colon && j < n && d[j] == '[') {
        rest_.append(reinterpret_cast<const char*>(d + p), size_t(j - p));
        rest_ += "[\"";
        rest_ += nonce_;
        rest_ += "\",";
        rest_ += std::to_string(done_.size());
        rest_ += "]";
        state_ = OPEN;
        return j;
      }
      // not a key with a list value: orjson's check of the markers decides whether that matters
      rest_.append(reinterpret_cast<const char*>(d + p), size_t(h + klen - p));
      p = h + klen;
    }
  }

  // One transfer object starting at d[p] (== '{' if valid): the position after its '}', NEED or REJ. Its
  // variable-length lists are appended to the current region's columns and taken back unless it completes.
  i64 transfer(const u8* d, i64 p, i64 n) {
    Region& r = cur_;
    const size_t sa0 = r.src_addr.n, dt0 = r.dst_tile.n;
    const i64 e = transfer_body(d, p, n, sa0, dt0);
    if (e < 0) {
      r.src_addr.n = sa0;
      r.dst_tile.n = dt0;
      r.dst_addr.n = dt0;
    }
    return e;
  }

#define NEED_AT(q) \
  if ((q) >= n) return NEED
#define SKIP_WS(q)                     \
  for (;;) {                           \
    NEED_AT(q);                        \
    if (!is_ws(d[q])) break;           \
    ++(q);                             \
  }
#define TRY(expr)         \
  {                       \
    const i64 t_ = (expr); \
    if (t_ < 0) return t_; \
    q = t_;               \
  }

  i64 transfer_body(const u8* d, i64 p, i64 n, size_t sa0, size_t dt0) {
    Region& r = cur_;
    if (d[p] != '{') return REJ;
    i64 q = p + 1;
    unsigned seen = 0;
    i64 source = 0, words = 0;
    int width = 0;
    bool bad = false;  // a range that fails: the orjson path names it
    SKIP_WS(q);
    for (;;) {
      if (d[q] != '"') return REJ;
      i64 end;
      const int key = transfer_key(d, q + 1, n, &end);
      if (key < 0) return key;
      if (seen & (1u << key)) return REJ;
      seen |= 1u << key;
      q = end;
      SKIP_WS(q);
      if (d[q] != ':') return REJ;
      ++q;
      SKIP_WS(q);
      switch (key) {
        case K_SOURCE:
          TRY(uint_at(d, q, n, &source));
          break;
        case K_WORDS:
          TRY(uint_at(d, q, n, &words));
          break;
        case K_WIDTH: {
          if (d[q] != '"') return REJ;
          const int w = width_value(d, q + 1, n, &end);
          if (w < 0) return w;
          width = w;
          q = end;
          break;
        }
        case K_SRCADDR:
          TRY(source_addresses(d, q, n));
          break;
        default:
          TRY(destinations(d, q, n, &bad));
          break;
      }
      SKIP_WS(q);
      if (d[q] == ',') {
        ++q;
        SKIP_WS(q);
        continue;
      }
      if (d[q] != '}') return REJ;
      ++q;
      break;
    }
    if (seen != K_ALL) return REJ;
    // complete: check its ranges (as io._check_ranges does, against the fixed limits) and commit it
    if (words < 1 || words > max_words_ || source >= max_tiles_) bad = true;
    const i64 nbytes = words * word_bytes_;  // words < 10^18: no overflow
    for (size_t k = sa0; k < r.src_addr.n; ++k) {
      const i64 a = r.src_addr.p[k];
      if (a >= limit_ || (a & align_mask_) || a + nbytes > limit_) bad = true;
    }
    const size_t dn = r.dst_tile.n;
    for (size_t k = dt0; k < dn; ++k) {
      const i64 a = r.dst_addr.p[k];
      if (a >= limit_ || (a & align_mask_) || a + nbytes > limit_ || r.dst_tile.p[k] == source) bad = true;
    }
    if (!bad && dn - dt0 > 1) bad = duplicate_tile(r.dst_tile.p + dt0, dn - dt0);
    if (source > max_tile_) max_tile_ = source;
    bad_ = bad_ || bad;
    r.source.push(int32_t(source));  // narrowing only matters for a value the range checks refused
    r.words.push(int32_t(words));
    r.width.push(u8(width));
    r.src_ptr.push(i64(r.src_addr.n));
    r.dst_ptr.push(i64(dn));
    return q;
  }

  i64 source_addresses(const u8* d, i64 q, i64 n) {
    if (d[q] != '[') return REJ;
    ++q;
    SKIP_WS(q);
    for (;;) {  // non-empty: the first element must be an integer
      i64 v;
      TRY(uint_at(d, q, n, &v));
      cur_.src_addr.push(v);
      SKIP_WS(q);
      if (d[q] == ',') {
        ++q;
        SKIP_WS(q);
        continue;
      }
      if (d[q] != ']') return REJ;
      return q + 1;
    }
  }

  i64 destinations(const u8* d, i64 q, i64 n, bool* bad) {
    if (d[q] != '[') return REJ;
    ++q;
    SKIP_WS(q);
    for (;;) {  // non-empty: the first element must be an object
      if (d[q] != '{') return REJ;
      ++q;
      SKIP_WS(q);
      unsigned seen = 0;
      i64 v[2] = {0, 0};  // tile, address
      for (;;) {
        if (d[q] != '"') return REJ;
        i64 end;
        const int key = dest_key(d, q + 1, n, &end);
        if (key < 0) return key;
        if (seen & (1u << key)) return REJ;
        seen |= 1u << key;
        q = end;
        SKIP_WS(q);
        if (d[q] != ':') return REJ;
        ++q;
        SKIP_WS(q);
        TRY(uint_at(d, q, n, &v[key]));
        SKIP_WS(q);
        if (d[q] == ',') {
          ++q;
          SKIP_WS(q);
          continue;
        }
        if (d[q] != '}') return REJ;
        ++q;
        break;
      }
      if (seen != 3) return REJ;
      if (v[0] >= max_tiles_) *bad = true;  // also keeps the int32 column and the duplicate check exact
      if (v[0] > max_tile_) max_tile_ = v[0];  // a transfer re-parsed after NEED sees the same values again
      cur_.dst_tile.push(int32_t(v[0]));
      cur_.dst_addr.push(v[1]);
      SKIP_WS(q);
      if (d[q] == ',') {
        ++q;
        SKIP_WS(q);
        continue;
      }
      if (d[q] != ']') return REJ;
      return q + 1;
    }
  }

#undef NEED_AT
#undef SKIP_WS
#undef TRY

  // Does a destination tile occur twice in one transfer? (tiles are < max_tiles here) A stamp per tile, so any
  // fan-out costs O(fan-out).
  bool duplicate_tile(const int32_t* t, size_t k) {
    if (stamp_.empty()) stamp_.assign(size_t(max_tiles_), 0);
    if (++epoch_ == 0) {  // wrapped: forget every stamp
      std::fill(stamp_.begin(), stamp_.end(), 0);
      epoch_ = 1;
    }
    for (size_t i = 0; i < k; ++i) {
      uint32_t& s = stamp_[size_t(t[i])];
      if (s == epoch_) return true;
      s = epoch_;
    }
    return false;
  }

  enum State { OUTSIDE, OPEN, AFTER };
  State state_ = OUTSIDE;
  std::string nonce_;
  std::string carry_;
  Region cur_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  const i64 max_tiles_, max_words_, limit_, align_mask_, word_bytes_;
  bool rejected_ = false, finished_ = false;
};

// ---------------------------------------------------------------------------------------------------------------
// Python type

template <typename T>
using Column = nb::ndarray<nb::numpy, T, nb::ndim<1>>;
// a phase's columns: source, words, width, src_ptr, src_addr, dst_ptr, dst_tile, dst_addr
using Columns = std::tuple<Column<int32_t>, Column<int32_t>, Column<u8>, Column<i64>, Column<i64>, Column<i64>,
                           Column<int32_t>, Column<i64>>;

class PyScanner {
 public:
  PyScanner(nb::bytes nonce, i64 max_tiles, i64 max_words, i64 address_limit, i64 align, i64 word_bytes) {
    require(max_tiles >= 1 && max_tiles <= (i64(1) << 30) && max_words >= 1 && address_limit >= 1 &&
                address_limit <= (i64(1) << 60) && align >= 1 && (align & (align - 1)) == 0 && word_bytes >= 1 &&
                word_bytes <= 8 && max_words <= (i64(1) << 40),  // keeps sums in int64
            "Scanner", "bad limits");
    const std::string text(nonce.c_str(), nonce.size());
    for (const char c : text) require(isalnum(u8(c)), "Scanner", "the nonce must be alphanumeric");  // in a string
    s_ = std::make_unique<Scanner>(text, max_tiles, max_words, address_limit, align, word_bytes);
  }

  bool feed(nb::bytes chunk, bool final) {
    if (busy_) throw std::runtime_error("Scanner.feed: already running in another thread");
    busy_ = true;  // feed releases the GIL: a second thread must not enter the same scanner meanwhile
    struct Idle {
      bool& busy;
      ~Idle() { busy = false; }
    } idle{busy_};
    const u8* data = reinterpret_cast<const u8*>(chunk.c_str());
    const i64 size = i64(chunk.size());
    nb::gil_scoped_release release;
    return s_->feed(data, size, final);
  }

  std::tuple<nb::bytes, std::vector<Columns>, i64, bool> finish() {
    Scanner& s = *s_;
    if (busy_ || !s.finished())
      throw std::runtime_error("Scanner.finish: the text was rejected or not fed to its end");
    std::vector<Columns> regions;
    regions.reserve(s.done_.size());
    for (Region& r : s.done_)
      regions.emplace_back(r.source.to_array(), r.words.to_array(), r.width.to_array(), r.src_ptr.to_array(),
                           r.src_addr.to_array(), r.dst_ptr.to_array(), r.dst_tile.to_array(), r.dst_addr.to_array());
    s.done_.clear();
    nb::bytes rest(s.rest_.data(), s.rest_.size());
    std::string().swap(s.rest_);
    return {std::move(rest), std::move(regions), s.max_tile_, s.bad_};
  }

 private:
  std::unique_ptr<Scanner> s_;
  bool busy_ = false;
};

}  // namespace

NB_MODULE(_scan, m) {
  m.doc() = "Compiled capture scanner (see placer.capture.scan).";
  // the interface version placer/native.py expects (native.MODULES): bump both with any change to the calls or
  // the results
  m.attr("VERSION") = 2;
  nb::class_<PyScanner>(m, "Scanner", "Streaming scanner of a capture's transfers arrays.")
      .def(nb::init<nb::bytes, i64, i64, i64, i64, i64>(), nb::kw_only(), nb::arg("nonce"), nb::arg("max_tiles"),
           nb::arg("max_words"), nb::arg("address_limit"), nb::arg("align"), nb::arg("word_bytes"))
      .def("feed", &PyScanner::feed, nb::arg("chunk"), nb::arg("final") = false,
           "Parse the next piece of the text (`final`: the last one); False once the text is rejected.")
      .def("finish", &PyScanner::finish,
           "(rest, regions, max_tile, bad): the text outside the transfers arrays, each array's columns, the "
           "largest tile seen (-1: none) and whether a range check failed.");
}
