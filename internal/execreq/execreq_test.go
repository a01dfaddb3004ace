package execreq

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// u is marshal's str: 'u', a little-endian int32 length, the UTF-8 bytes.
func u(s string) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{'u'}, uint32(len(s))), s...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestMarshalBytes pins the encoding byte for byte against marshal's format (Python/marshal.c: TYPE_DICT '{'
// ended by TYPE_NULL '0', TYPE_LIST '[' with an int32 count, TYPE_UNICODE 'u', TYPE_NONE 'N', TYPE_TRUE 'T'),
// the only part of the format the driver's marshal.loads is given.
func TestMarshalBytes(t *testing.T) {
	got, err := (&Request{Code: "print(1)", Filename: "<string>", Argv: []string{"a", "é"}, Env: map[string]string{"B": "2", "A": "1"},
		Session: true, Modules: map[string]string{"m": "x = 1"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := cat([]byte{'{'},
		u("code"), u("print(1)"),
		u("filename"), u("<string>"),
		u("argv"), []byte{'[', 2, 0, 0, 0}, u("a"), u("é"),
		u("env"), []byte{'{'}, u("A"), u("1"), u("B"), u("2"), []byte{'0'}, // keys sorted
		u("session"), []byte{'T'},
		u("modules"), []byte{'{'}, u("m"), u("x = 1"), []byte{'0'},
		[]byte{'0'})
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal:\n got %q\nwant %q", got, want)
	}

	// nil lists and maps are None; false flags are left out.
	got, err = (&Request{Code: "", Filename: "f"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want = cat([]byte{'{'}, u("code"), u(""), u("filename"), u("f"), u("argv"), []byte{'N'}, u("env"), []byte{'N'}, []byte{'0'})
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal of an empty request:\n got %q\nwant %q", got, want)
	}
}

// TestMarshalReplacesInvalidUTF8 checks that each byte outside a valid UTF-8 sequence becomes U+FFFD (marshal's
// 'u' must be valid UTF-8: the driver's marshal.loads would refuse the whole request otherwise).
func TestMarshalReplacesInvalidUTF8(t *testing.T) {
	got, err := (&Request{Code: "a\xff\xfeb\xe2\x82", Filename: "\x80"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := cat([]byte{'{'}, u("code"), u("a\uFFFD\uFFFDb\uFFFD\uFFFD"), u("filename"), u("\uFFFD"),
		u("argv"), []byte{'N'}, u("env"), []byte{'N'}, []byte{'0'})
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal:\n got %q\nwant %q", got, want)
	}
}
