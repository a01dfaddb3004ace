// Package execreq encodes the run request the host hands the interpreter's run driver (its export
// wasmbox_exec; docs/ABI.md): the one encoder of it, used by the sandbox and by the engines' own tests.
package execreq

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"unicode/utf8"
)

// The exec request reaches the run driver in CPython's marshal format, which the driver reads with
// marshal.loads: a C function that builds the dict directly. json.loads of the same few dozen bytes went through
// Python frames, a regular expression and the scanner, about 100,000 of a fresh print(1) run's 720,000
// instructions. Only the host writes a request, and only this subset of the format: a dict of str keys whose
// values are str, a list of str, a dict of str to str, True, False or None.
const (
	marshalNull  = '0' // ends a dict
	marshalNone  = 'N'
	marshalTrue  = 'T'
	marshalFalse = 'F'
	marshalStr   = 'u' // int32 length, then UTF-8
	marshalList  = '['
	marshalDict  = '{'
)

// Request is what the run driver (_wasmbox_boot.run) reads.
type Request struct {
	Code     string
	Filename string
	Argv     []string // nil or empty: sys.argv is [""]
	Env      map[string]string
	Session  bool // the program is one step of a Session: its globals persist
	// Invalidate asks the driver to clear the import system's caches (packages were installed since).
	Invalidate bool
	Modules    map[string]string
	// Shutdown asks the driver to end a Session's program as CPython ends one (atexit, files closed, the
	// __main__ globals released); Code is not run.
	Shutdown bool
}

// Marshal encodes r for the driver. Text that is not valid UTF-8 has each invalid byte replaced by U+FFFD, as
// encoding/json does (the driver's earlier format).
func (r *Request) Marshal() ([]byte, error) {
	n := 64 + len(r.Code) + len(r.Filename)
	for _, a := range r.Argv {
		n += 8 + len(a)
	}
	for k, v := range r.Env {
		n += 16 + len(k) + len(v)
	}
	e := marshalEncoder{b: make([]byte, 0, n)}
	e.b = append(e.b, marshalDict)
	e.key("code").str(r.Code)
	e.key("filename").str(r.Filename)
	e.key("argv").strList(r.Argv)
	e.key("env").strDict(r.Env)
	if r.Session {
		e.key("session").boolean(true)
	}
	if r.Invalidate {
		e.key("invalidate_caches").boolean(true)
	}
	if len(r.Modules) > 0 {
		e.key("modules").strDict(r.Modules)
	}
	if r.Shutdown {
		e.key("shutdown").boolean(true)
	}
	e.b = append(e.b, marshalNull)
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

type marshalEncoder struct {
	b   []byte
	err error
}

func (e *marshalEncoder) key(k string) *marshalEncoder { return e.str(k) }

func (e *marshalEncoder) str(s string) *marshalEncoder {
	if !utf8.ValidString(s) {
		s = replaceInvalidUTF8(s)
	}
	if len(s) > math.MaxInt32 {
		e.err = fmt.Errorf("execreq: a request string of %d bytes", len(s))
		return e
	}
	e.b = append(e.b, marshalStr)
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(s)))
	e.b = append(e.b, s...)
	return e
}

func (e *marshalEncoder) boolean(v bool) {
	if v {
		e.b = append(e.b, marshalTrue)
	} else {
		e.b = append(e.b, marshalFalse)
	}
}

func (e *marshalEncoder) strList(l []string) {
	if l == nil {
		e.b = append(e.b, marshalNone)
		return
	}
	e.b = append(e.b, marshalList)
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(l)))
	for _, s := range l {
		e.str(s)
	}
}

// strDict writes m with its keys in order, so that equal maps make equal requests.
func (e *marshalEncoder) strDict(m map[string]string) {
	if m == nil {
		e.b = append(e.b, marshalNone)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.b = append(e.b, marshalDict)
	for _, k := range keys {
		e.str(k).str(m[k])
	}
	e.b = append(e.b, marshalNull)
}

// replaceInvalidUTF8 replaces every byte of s that is not part of a valid UTF-8 sequence with U+FFFD.
func replaceInvalidUTF8(s string) string {
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(out)
}
