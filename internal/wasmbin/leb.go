package wasmbin

import (
	"fmt"
	"unicode/utf8"
)

// reader decodes a byte slice that starts at file offset base; errors name the file offset.
type reader struct {
	b    []byte
	pos  int
	base int
}

func (r *reader) errf(format string, args ...any) error {
	return fmt.Errorf("wasmbin: offset %#x: %s", r.base+r.pos, fmt.Sprintf(format, args...))
}

func (r *reader) done() bool { return r.pos >= len(r.b) }

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, r.errf("unexpected end")
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return nil, r.errf("length %d exceeds the remaining %d bytes", n, len(r.b)-r.pos)
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

// uleb reads an unsigned LEB128 integer of at most bits bits (padded encodings are accepted).
func (r *reader) uleb(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 > bits && c>>(bits-shift) != 0 {
				return 0, r.errf("integer too large")
			}
			return v, nil
		}
		if shift+7 >= bits {
			return 0, r.errf("integer representation too long")
		}
	}
}

// sleb reads a signed LEB128 integer of at most bits bits.
func (r *reader) sleb(bits uint) (int64, error) {
	var v int64
	for shift := uint(0); ; {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			if shift > bits {
				ok := true
				if bits == 64 {
					ok = c&0x7f == 0 || c&0x7f == 0x7f
				} else {
					ok = v >= -(1<<(bits-1)) && v < 1<<(bits-1)
				}
				if !ok {
					return 0, r.errf("integer too large")
				}
			}
			return v, nil
		}
		if shift >= bits {
			return 0, r.errf("integer representation too long")
		}
	}
}

func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", r.errf("name is not valid UTF-8")
	}
	return string(b), nil
}

func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendULEB(b, uint64(len(s))), s...)
}
