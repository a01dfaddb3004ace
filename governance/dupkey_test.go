package governance

import (
	"encoding/json"
	"strings"
	"testing"
)

// dupKeySeeds are documents on both sides of every bound of duplicateKeyASCII.
var dupKeySeeds = []string{
	`{}`, `[]`, `{"a":1}`, `{"a":1,"b":2}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"amount":5,"Amount":640}`,
	`{"a":{"b":1,"c":[{"d":1,"d":2}]}}`, `{"a":{"a":1},"b":{"a":2}}`, `[{"a":1},{"a":2}]`, `{"a":[1,{"a":2}],"a":3}`,
	`{"x":"a,\"b\":1","b":2}`, `{"x":"\"a\":1,\"a\":2"}`, `{"\u0061mount":5,"amount":640}`, `{"k":5,"\u212a":640}`,
	`{"é":1,"É":2}`, `{"k":1,"K":2}`, `{"s":1,"ſ":2}`, `{"a":"é","b":"ü","a":0}`, `{"a" : 1 , "b" : { "a" : 2 } , "b" : 3}`,
	`{"a":[],"b":{},"c":null,"d":true,"e":-1.5e3,"a":false}`,
	"{" + strings.Repeat(`"a":{`, 70) + `"x":1,"x":2` + strings.Repeat("}", 70) + "}",
	manyKeys(asciiScanKeys-1, false), manyKeys(asciiScanKeys, false), manyKeys(asciiScanKeys+5, false),
	manyKeys(asciiScanKeys-1, true), manyKeys(asciiScanKeys+5, true),
}

// manyKeys is an object with n distinct keys, and a last one that repeats the first when dup.
func manyKeys(n int, dup bool) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	if dup {
		b.WriteString(`,"K":2`)
	}
	b.WriteString("}")
	return b.String()
}

// TestDuplicateKeyASCIIAgrees checks the allocation-free scan against the decoder it stands in for: wherever it
// decides, it gives the decoder's answer, word for word.
func TestDuplicateKeyASCIIAgrees(t *testing.T) {
	decided := 0
	for _, doc := range dupKeySeeds {
		if !json.Valid([]byte(doc)) {
			t.Fatalf("seed is not valid JSON: %s", doc)
		}
		got, ok := duplicateKeyASCII([]byte(doc))
		if ok {
			decided++
			if want := duplicateKeyDecoded([]byte(doc)); got != want {
				t.Errorf("%.80s: scan says %q, decoder %q", doc, got, want)
			}
		}
		if want, all := duplicateKeyDecoded([]byte(doc)), duplicateKey([]byte(doc)); all != want {
			t.Errorf("%.80s: duplicateKey says %q, decoder %q", doc, all, want)
		}
	}
	if decided < len(dupKeySeeds)/2 {
		t.Errorf("the scan decided only %d of %d seeds", decided, len(dupKeySeeds))
	}
	// The scan must leave what it cannot fold to the decoder.
	for _, doc := range []string{`{"\u0061":1,"a":2}`, `{"k":5,"\u212a":640}`, `{"é":1,"É":2}`, manyKeys(asciiScanKeys+1, true),
		"{" + strings.Repeat(`"a":{`, asciiScanDepth) + `"x":1` + strings.Repeat("}", asciiScanDepth) + "}"} {
		if _, ok := duplicateKeyASCII([]byte(doc)); ok {
			t.Errorf("%.80s: the scan decided a document it should leave to the decoder", doc)
		}
	}
}

// FuzzDuplicateKeyASCII: on every valid document the scan decides, it agrees with the decoder; on any input, it
// never panics.
func FuzzDuplicateKeyASCII(f *testing.F) {
	for _, s := range dupKeySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		got, ok := duplicateKeyASCII([]byte(doc)) // must not panic, valid or not
		if !ok || !json.Valid([]byte(doc)) {
			return
		}
		if want := duplicateKeyDecoded([]byte(doc)); got != want {
			t.Errorf("%q: scan says %q, decoder %q", doc, got, want)
		}
	})
}

func TestDuplicateKeyASCIIAllocatesNothing(t *testing.T) {
	doc := []byte(`{"city":"Oslo","units":"metric","days":[1,2,3],"opts":{"a":true,"b":null}}`)
	if n := testing.AllocsPerRun(100, func() { duplicateKey(doc) }); n != 0 {
		t.Errorf("duplicateKey allocates %.0f times on a plain document", n)
	}
}
