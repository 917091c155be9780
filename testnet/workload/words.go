package workload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/skiprange/skiprange/overlay"
)

// Words is SPEC §12's words workload: the keys are words, and a query is the range of keys that
// share a prefix of a word drawn by frequency. Prefixes are byte prefixes (keys are byte strings),
// not rune prefixes. Build it with LoadWords; it is read-only afterwards.
type Words struct {
	keys   []overlay.Key // sorted, unique
	counts []uint64      // counts[i] is the frequency of keys[i]
	cum    []uint64      // cum[i] = counts[0] + … + counts[i]; cum[n-1] = total
	total  uint64
}

// LoadWords reads lines "word count" (separated by spaces or tabs; count a decimal integer ≥ 0).
// Empty lines are skipped; a word listed twice has its counts added. limit > 0 stops after that
// many non-empty lines (the file is usually sorted most frequent first, so this keeps the most
// frequent words); limit ≤ 0 reads everything. A malformed line is an error naming its line
// number. At least one word must have a positive count, or nothing could be drawn.
func LoadWords(r io.Reader, limit int) (*Words, error) {
	if r == nil {
		return nil, errors.New("workload: LoadWords: nil reader")
	}
	counts := make(map[string]uint64)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	// Split only on ASCII blanks: a key is an arbitrary byte string, so a byte such as 0x85 or
	// 0xa0 must stay part of the word rather than be taken for Unicode white space.
	blank := func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f' }
	line, read := 0, 0
	for sc.Scan() {
		line++
		fields := strings.FieldsFunc(sc.Text(), blank)
		if len(fields) == 0 {
			continue
		}
		if limit > 0 && read >= limit {
			break
		}
		read++
		if len(fields) != 2 {
			return nil, fmt.Errorf("workload: words line %d: want \"word count\", got %d fields", line, len(fields))
		}
		c, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("workload: words line %d: count %q is not an integer ≥ 0", line, fields[1])
		}
		sum, carry := bits.Add64(counts[fields[0]], c, 0)
		if carry != 0 {
			return nil, fmt.Errorf("workload: words line %d: count of %q overflows", line, fields[0])
		}
		counts[fields[0]] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("workload: words line %d: %w", line+1, err)
	}
	if len(counts) == 0 {
		return nil, errors.New("workload: words: no words")
	}
	w := &Words{keys: make([]overlay.Key, 0, len(counts))}
	for word := range counts {
		w.keys = append(w.keys, overlay.Key(word))
	}
	sort.Slice(w.keys, func(i, j int) bool { return w.keys[i] < w.keys[j] })
	w.counts = make([]uint64, len(w.keys))
	w.cum = make([]uint64, len(w.keys))
	for i, k := range w.keys {
		c := counts[string(k)]
		sum, carry := bits.Add64(w.total, c, 0)
		if carry != 0 {
			return nil, errors.New("workload: words: total count overflows uint64")
		}
		w.counts[i], w.total, w.cum[i] = c, sum, sum
	}
	if w.total == 0 {
		return nil, errors.New("workload: words: every count is 0, nothing can be drawn")
	}
	return w, nil
}

// Len returns the number of distinct words.
func (w *Words) Len() int {
	if w == nil {
		return 0
	}
	return len(w.keys)
}

// Keys returns the distinct words in key order: the items to load. The slice is a copy.
func (w *Words) Keys() []overlay.Key {
	if w == nil {
		return nil
	}
	return append([]overlay.Key(nil), w.keys...)
}

// Count returns the frequency of word (0 when absent).
func (w *Words) Count(word overlay.Key) uint64 {
	if w == nil {
		return 0
	}
	i := sort.Search(len(w.keys), func(i int) bool { return w.keys[i] >= word })
	if i < len(w.keys) && w.keys[i] == word {
		return w.counts[i]
	}
	return 0
}

// prefix returns the first n bytes of k, or k itself when it is shorter. n < 0 counts as 0.
func prefix(k overlay.Key, n int) overlay.Key {
	n = max(n, 0)
	if len(k) <= n {
		return k
	}
	return k[:n]
}

// PrefixEnd returns the smallest key greater than every key with prefix p, so that the keys with
// prefix p are exactly [p, PrefixEnd(p)): trailing 0xff bytes are dropped and the last remaining
// byte is incremented ("ab" → "ac", "a\xff" → "b"). When p is empty or all 0xff no such key
// exists and the result is the empty key, meaning "up to the end of the key space" — which is also
// what [p, MinKey) means on the key circle.
func PrefixEnd(p overlay.Key) overlay.Key {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0xff {
			b[i]++
			return overlay.Key(b[:i+1])
		}
	}
	return overlay.MinKey
}

// span returns the index interval [lo, hi) of the words with prefix p.
func (w *Words) span(p overlay.Key) (lo, hi int) {
	lo = sort.Search(len(w.keys), func(i int) bool { return w.keys[i] >= p })
	end := PrefixEnd(p)
	if end == overlay.MinKey {
		return lo, len(w.keys)
	}
	hi = sort.Search(len(w.keys), func(i int) bool { return w.keys[i] >= end })
	return lo, hi
}

// PrefixQuery returns the range query for the keys with prefix p: Start = p, End = PrefixEnd(p),
// Keys = the number of words with that prefix.
func (w *Words) PrefixQuery(p overlay.Key) Query {
	if w == nil {
		return Query{}
	}
	lo, hi := w.span(p)
	return Query{Start: p, End: PrefixEnd(p), Keys: hi - lo}
}

// Query draws a word with probability proportional to its count (binary search on cumulative
// counts, O(log n)), takes its first prefixLen bytes (the whole word when shorter; prefixLen ≤ 0
// gives the empty prefix, i.e. every key) and returns the range of keys with that prefix.
func (w *Words) Query(r *rand.Rand, prefixLen int) Query {
	if w == nil || w.total == 0 || r == nil {
		return Query{}
	}
	x := r.Uint64N(w.total)
	i := sort.Search(len(w.cum), func(i int) bool { return w.cum[i] > x })
	return w.PrefixQuery(prefix(w.keys[i], prefixLen))
}

// KeyLoads returns the expected load (requests/s) of every word, aligned with Keys(), when queries
// of the given prefix length arrive at rate per second. A query for prefix p adds 1 to every word
// with prefix p, so word v's load is rate · Σ P(drawn prefix = p) over the drawn prefixes p that
// are prefixes of v. Usually that is the single prefix of v of length prefixLen, but a word shorter
// than prefixLen is its own drawn prefix, and its queries also cover the longer words it begins
// ("the" covers "then" and "there"); both are counted. Cost O(n log n).
func (w *Words) KeyLoads(rate float64, prefixLen int) []float64 {
	if w == nil || w.total == 0 {
		return nil
	}
	n := len(w.keys)
	// Exact integer arithmetic: diff accumulates count masses; the running sum at word v is the
	// total count of the words whose drawn prefix covers v, at most w.total, so the wrap-around
	// uint64 arithmetic of the difference array is exact.
	diff := make([]uint64, n+1)
	// prefix(·, prefixLen) is monotone in key order, so the words drawing the same prefix are
	// contiguous: one pass groups them.
	for i := 0; i < n; {
		p := prefix(w.keys[i], prefixLen)
		var mass uint64
		j := i
		for ; j < n && prefix(w.keys[j], prefixLen) == p; j++ {
			mass += w.counts[j]
		}
		if mass > 0 {
			lo, hi := w.span(p)
			diff[lo] += mass
			diff[hi] -= mass
		}
		i = j
	}
	out := make([]float64, n)
	var run uint64
	for i := range out {
		run += diff[i]
		out[i] = rate * float64(run) / float64(w.total)
	}
	return out
}
