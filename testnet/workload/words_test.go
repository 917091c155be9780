package workload

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/skiprange/skiprange/overlay"
)

// wordList is a small list of our own, with words shorter than the prefix length, a duplicate,
// a zero count, and 0xff bytes that exercise PrefixEnd's carry.
const wordList = "the 50\n" +
	"then 10\n" +
	"there\t20\n" +
	"\n" +
	"a 30\n" +
	"ab 5\n" +
	"a\xff 4\n" +
	"a\xff\xff 3\n" +
	"   \n" +
	"b 2\n" +
	"\xff 1\n" +
	"\xff\xffz 6\n" +
	"zero 0\n" +
	"the 7\r\n"

func loadList(t *testing.T) *Words {
	t.Helper()
	w, err := LoadWords(strings.NewReader(wordList), 0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestLoadWords(t *testing.T) {
	w := loadList(t)
	want := []overlay.Key{"a", "ab", "a\xff", "a\xff\xff", "b", "the", "then", "there", "zero", "\xff", "\xff\xffz"}
	got := w.Keys()
	if len(got) != len(want) || w.Len() != len(want) {
		t.Fatalf("Keys = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Keys = %q, want %q", got, want)
		}
	}
	if c := w.Count("the"); c != 57 {
		t.Fatalf("count(the) = %d, want 57 (duplicates merged)", c)
	}
	if c := w.Count("missing"); c != 0 {
		t.Fatalf("count(missing) = %d", c)
	}
	got[0] = "mutated"
	if w.Keys()[0] != "a" {
		t.Fatal("Keys exposes the internal slice")
	}

	lim, err := LoadWords(strings.NewReader("c 1\n\nb 2\na 3\n"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if k := lim.Keys(); len(k) != 2 || k[0] != "b" || k[1] != "c" {
		t.Fatalf("limit 2: keys %q, want [b c]", k)
	}
}

func TestLoadWordsErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"the 5\nfoo\n", "line 2: want \"word count\", got 1 fields"},
		{"a 1\n\nb x\n", "line 3: count \"x\""},
		{"a -1\n", "line 1: count \"-1\""},
		{"a 1 2\n", "line 1: want \"word count\", got 3 fields"},
		{"a 18446744073709551615\na 1\n", "line 2: count of \"a\" overflows"},
		{"a 18446744073709551615\nb 1\n", "total count overflows"},
		{"", "no words"},
		{"\n\n", "no words"},
		{"a 0\nb 0\n", "every count is 0"},
		{"a " + strings.Repeat("1", 2<<20) + "\n", "line 1:"},
	} {
		_, err := LoadWords(strings.NewReader(tc.in), 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadWords(%.20q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
	if _, err := LoadWords(nil, 0); err == nil {
		t.Error("LoadWords(nil) accepted")
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want overlay.Key }{
		{"ab", "ac"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"a\xfe", "a\xff"},
		{"\x00", "\x01"},
		{"\xff", ""},
		{"\xff\xff", ""},
		{"", ""},
	} {
		if got := PrefixEnd(tc.in); got != tc.want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPrefixQuery(t *testing.T) {
	w := loadList(t)
	for _, tc := range []struct {
		p, end overlay.Key
		keys   int
	}{
		{"a", "b", 4},
		{"a\xff", "b", 2},
		{"a\xff\xff", "b", 1},
		{"ab", "ac", 1},
		{"th", "ti", 3},
		{"the", "thf", 3},
		{"then", "theo", 1},
		{"\xff", "", 2},
		{"\xff\xff", "", 1},
		{"x", "y", 0},
		{"", "", 11},
	} {
		q := w.PrefixQuery(tc.p)
		if q.Start != tc.p || q.End != tc.end || q.Keys != tc.keys {
			t.Errorf("PrefixQuery(%q) = %+v, want {%q %q %d}", tc.p, q, tc.p, tc.end, tc.keys)
		}
	}
	if q := w.Query(rand.New(rand.NewPCG(1, 1)), 0); q.Start != "" || q.End != "" || q.Keys != 11 {
		t.Errorf("prefix length 0: %+v, want every key", q)
	}
}

func TestWordsKeyLoads(t *testing.T) {
	w := loadList(t)
	const total = 138.0
	// Prefix length 3; by hand. Short words are their own prefixes and cover longer words:
	// "a"(30) covers a, ab, a\xff, a\xff\xff; "a\xff"(4) covers a\xff, a\xff\xff; "\xff"(1) covers
	// \xff and \xff\xffz; "the" is drawn by the, then, there (57+10+20).
	want := map[overlay.Key]float64{
		"a": 30, "ab": 35, "a\xff": 34, "a\xff\xff": 37, "b": 2,
		"the": 87, "then": 87, "there": 87, "zero": 0, "\xff": 1, "\xff\xffz": 7,
	}
	keys := w.Keys()
	loads := w.KeyLoads(total, 3) // rate = total makes the loads the counts above
	if len(loads) != len(keys) {
		t.Fatalf("%d loads for %d keys", len(loads), len(keys))
	}
	for i, k := range keys {
		if math.Abs(loads[i]-want[k]) > 1e-9 {
			t.Errorf("load(%q) = %g, want %g", k, loads[i], want[k])
		}
	}

	// Empirically: draw queries, add 1 to every word in the range, compare with KeyLoads.
	for _, plen := range []int{0, 1, 2, 3, 4, 10} {
		r := rand.New(rand.NewPCG(11, uint64(plen)))
		const draws = 100_000
		hits := make([]float64, len(keys))
		for range draws {
			q := w.Query(r, plen)
			n := 0
			for i, k := range keys {
				if k >= q.Start && (q.End == "" || k < q.End) {
					if !strings.HasPrefix(string(k), string(q.Start)) {
						t.Fatalf("%q in range %+v lacks the prefix", k, q)
					}
					hits[i]++
					n++
				}
			}
			if n != q.Keys || n == 0 {
				t.Fatalf("query %+v covers %d words", q, n)
			}
		}
		exp := w.KeyLoads(draws, plen)
		for i := range keys {
			if math.Abs(hits[i]-exp[i]) > 5*math.Sqrt(exp[i])+1e-9 {
				t.Errorf("prefix %d, %q: %g hits, want %.1f", plen, keys[i], hits[i], exp[i])
			}
		}
	}
}

// TestWordsFile loads the real word list when it is present; it never lives in the repository.
func TestWordsFile(t *testing.T) {
	path := os.Getenv("SKIPRANGE_WORDS")
	if path == "" {
		path = "../../../shared/data/en_50k.txt"
	}
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("word list not available (set SKIPRANGE_WORDS to a \"word count\" file): %v", err)
	}
	defer f.Close()
	w, err := LoadWords(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.Len() < 1000 {
		t.Fatalf("only %d words", w.Len())
	}
	r := rand.New(rand.NewPCG(2, 2))
	const rate = 250
	loads := w.KeyLoads(rate, 3)
	sumKeys := 0
	for range 10_000 {
		sumKeys += w.Query(r, 3).Keys
	}
	sum := 0.0
	for _, l := range loads {
		sum += l
	}
	// Σ loads = rate · E[keys per query]; the sample mean must agree within a few percent.
	if mean := float64(sumKeys) / 10_000; math.Abs(sum/rate-mean) > 0.05*mean {
		t.Fatalf("Σ loads / rate = %.1f, sampled mean keys per query %.1f", sum/rate, mean)
	}
	t.Logf("%d words; prefix 3: %.1f keys per query; %v", w.Len(), sum/rate, CheckFeasibility(loads, uniformThres(60, 500)))
}
