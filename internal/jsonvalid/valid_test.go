package jsonvalid

import (
	"encoding/json"
	"strings"
	"testing"
)

var cases = []string{
	``, ` `, `{}`, `[]`, `{"x":1}`, ` {"x" : 1 } `, `{"x":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{"a" 1}`,
	`{1:2}`, `{"a":1 "b":2}`, `{"a":1,"b":[true,false,null,{"c":"d"}]}`, `[[[[]]]]`, `[[[[]]]`, `]`, `}`, `{]`, `[}`,
	`"x"`, `"`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00"`, `"\x"`, "\"\x01\"",
	"\"\x7f\"", "\"\xff\xfe\"", "\"é\"", `0`, `-0`, `01`, `-01`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`,
	`-`, `--1`, `+1`, `1.5e3`, `0.0e0`, `123456789012345678901234567890`, `true`, `false`, `null`, `tru`, `nul`,
	`truex`, `nullnull`, `1 2`, `[1 2]`, `"a""b"`, "\t\n\r 1 \t\n\r", "\v1", "1\x00", `{"a":1}}`, `[1]]`,
	`{"":""}`, `[-]`, `[-1.e5]`, `{"a":[1,{"b":{}}],"c":"\ud83d\ude00"}`, "\ufeff1",
}

func TestValidAgrees(t *testing.T) {
	all := append([]string(nil), cases...)
	for _, d := range []int{maxDepth - 1, maxDepth, maxDepth + 1, 10000, 10001} {
		all = append(all, strings.Repeat("[", d)+strings.Repeat("]", d), strings.Repeat(`{"a":`, d)+"1"+strings.Repeat("}", d),
			strings.Repeat("[", d)+strings.Repeat("]", d-1))
	}
	for _, c := range all {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.80q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

func TestValidAllocatesNothing(t *testing.T) {
	doc := []byte(`{"city":"Oslo","units":"metric","days":[1,2,3],"opts":{"a":true,"b":null,"c":-1.5e3}}`)
	if n := testing.AllocsPerRun(100, func() { Valid(doc) }); n != 0 {
		t.Fatalf("Valid allocates %v times", n)
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	for _, doc := range []string{`{"x":42}`, `{"city":"Oslo 12","units":"metric"}`} {
		b.Run("jsonvalid/"+doc, func(b *testing.B) {
			for b.Loop() {
				Valid([]byte(doc))
			}
		})
		b.Run("encoding-json/"+doc, func(b *testing.B) {
			for b.Loop() {
				json.Valid([]byte(doc))
			}
		})
	}
}
