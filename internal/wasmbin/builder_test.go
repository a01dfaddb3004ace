package wasmbin

// A tiny module encoder for the tests: every helper returns encoded bytes.

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u(v uint64) []byte            { return appendULEB(nil, v) }
func str(s string) []byte          { return appendName(nil, s) }
func vecOf(items ...[]byte) []byte { return encodeVec(items) }

// padded is a five-byte (non-canonical) u32 LEB, as linkers write for relocatable fields.
func padded(v uint32) []byte {
	return []byte{byte(v) | 0x80, byte(v>>7) | 0x80, byte(v>>14) | 0x80, byte(v>>21) | 0x80, byte(v >> 28)}
}

func sec(id byte, parts ...[]byte) []byte {
	p := cat(parts...)
	return cat([]byte{id}, u(uint64(len(p))), p)
}

func custom(name string, parts ...[]byte) []byte { return sec(secCustom, str(name), cat(parts...)) }

// subsection is a subsection of the name section.
func subsection(id byte, content []byte) []byte {
	return cat([]byte{id}, u(uint64(len(content))), content)
}

func module(sections ...[]byte) []byte { return cat(header, cat(sections...)) }

func functype(params, results []byte) []byte {
	return cat([]byte{0x60}, u(uint64(len(params))), params, u(uint64(len(results))), results)
}

func importFunc(mod, name string, typeIdx uint32) []byte {
	return cat(str(mod), str(name), []byte{0x00}, u(uint64(typeIdx)))
}

func export(name string, kind ExternKind, idx uint32) []byte {
	return cat(str(name), []byte{byte(kind)}, u(uint64(idx)))
}

// global encodes a global with an i32.const initialiser.
func globalI32(mutable bool, v int32) []byte {
	m := byte(0)
	if mutable {
		m = 1
	}
	return cat([]byte{byte(I32), m, 0x41}, appendSLEB(nil, int64(v)), []byte{0x0b})
}

// body encodes a function body from its local declarations (already a vector) and code.
func body(locals []byte, code ...byte) []byte {
	c := cat(locals, code)
	return cat(u(uint64(len(c))), c)
}

var noLocals = []byte{0x00}

func locals(types ...ValType) []byte {
	b := u(uint64(len(types)))
	for _, t := range types {
		b = append(b, 0x01, byte(t))
	}
	return b
}

var (
	tVoid  = functype(nil, nil)
	tI32   = functype(nil, []byte{byte(I32)})
	i32    = []byte{byte(I32)}
	tI32I2 = functype(i32, []byte{byte(I32), byte(I32)})
	tI32I  = functype(i32, i32)
)
