// Package wasmbin is a minimal WebAssembly binary decoder and encoder and the two build-time rewrites that
// wasmbox applies to the CPython interpreter module:
//
//   - [Instrument] inserts a fuel counter check after every loop header that calls the host import
//     wasmbox_v1.tick when the counter runs out (the hard deadline, see hostfuncs/abi.go).
//   - [RewriteForSnapshot] turns a module into one that starts from a captured memory image: no data
//     section, a larger initial memory, constant global initialisers and some exports dropped.
//
// [Decode] keeps the raw bytes of every section, vector entry and function body, so encoding a module that
// was not changed reproduces the input byte for byte, and a rewrite leaves every part it does not change
// byte-identical. Function bodies are only decoded on demand by an instruction scanner that knows the
// MVP plus sign extension, multi-value, reference types, non-trapping float-to-int and bulk memory; SIMD and
// every other proposal are rejected.
package wasmbin

import (
	"bytes"
	"fmt"
)

// ValType is a value type byte.
type ValType byte

// Value types.
const (
	I32       ValType = 0x7f
	I64       ValType = 0x7e
	F32       ValType = 0x7d
	F64       ValType = 0x7c
	V128      ValType = 0x7b
	FuncRef   ValType = 0x70
	ExternRef ValType = 0x6f
)

func (t ValType) String() string {
	switch t {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	case V128:
		return "v128"
	case FuncRef:
		return "funcref"
	case ExternRef:
		return "externref"
	}
	return fmt.Sprintf("valtype(%#x)", byte(t))
}

func validValType(b byte) bool {
	switch ValType(b) {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return true
	}
	return false
}

// FuncType is a function signature.
type FuncType struct{ Params, Results []ValType }

func (f FuncType) equal(g FuncType) bool {
	return bytes.Equal(vt(f.Params), vt(g.Params)) && bytes.Equal(vt(f.Results), vt(g.Results))
}

func vt(v []ValType) []byte {
	b := make([]byte, len(v))
	for i, t := range v {
		b[i] = byte(t)
	}
	return b
}

func (f FuncType) encode() []byte {
	b := appendULEB([]byte{0x60}, uint64(len(f.Params)))
	b = append(b, vt(f.Params)...)
	b = appendULEB(b, uint64(len(f.Results)))
	return append(b, vt(f.Results)...)
}

// ExternKind is the kind of an import or export.
type ExternKind byte

// Extern kinds.
const (
	KindFunc   ExternKind = 0
	KindTable  ExternKind = 1
	KindMemory ExternKind = 2
	KindGlobal ExternKind = 3
)

// Limits are the size limits of a memory (in 64 KiB pages) or a table.
type Limits struct {
	Min, Max uint32
	HasMax   bool
	Shared   bool
}

func (l Limits) encode(b []byte) []byte {
	flags := byte(0)
	if l.HasMax {
		flags |= 1
	}
	if l.Shared {
		flags |= 2
	}
	b = appendULEB(append(b, flags), uint64(l.Min))
	if l.HasMax {
		b = appendULEB(b, uint64(l.Max))
	}
	return b
}

// GlobalType is the type of a global.
type GlobalType struct {
	Type    ValType
	Mutable bool
}

// Import is one entry of the import section.
type Import struct {
	Module, Name string
	Kind         ExternKind
	TypeIndex    uint32     // KindFunc
	ElemType     ValType    // KindTable
	Limits       Limits     // KindTable, KindMemory
	Global       GlobalType // KindGlobal
	raw          []byte
	descAt       int // offset of the kind byte in raw
}

// Export is one entry of the export section.
type Export struct {
	Name  string
	Kind  ExternKind
	Index uint32
	raw   []byte
}

// Global is a global defined by the module (imported globals have no initialiser and are not listed).
type Global struct {
	Index uint32 // in the global index space, which starts with the imported globals
	GlobalType
	Init []byte // constant expression including its final end (0x0b)
	raw  []byte
}

// Body is the body of a defined function.
type Body struct {
	Func   uint32 // function index, counting imported functions
	Code   []byte // local declarations followed by the expression
	Offset int    // file offset of Code
	Expr   int    // offset of the expression within Code
	raw    []byte // size prefix and Code
}

// Section is one section of a module. Payload is everything after the section size; for a custom section
// it starts with the name. Changing Payload is allowed: Encode writes the size the payload has.
type Section struct {
	ID      byte
	Name    string // custom sections only
	Payload []byte
	Offset  int    // file offset of Payload in the decoded input
	header  []byte // the original id and size bytes
}

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

// sectionOrder lists the non-custom sections in the order the binary format requires.
var sectionOrder = []byte{secType, secImport, secFunction, secTable, secMemory, secGlobal, secExport, secStart,
	secElement, secDataCount, secCode, secData}

func sectionRank(id byte) int { return bytes.IndexByte(sectionOrder, id) }

// Module is a decoded module. Its Sections are what Encode writes; the other fields are a read-only view of
// what Decode found and are not updated when Sections change.
type Module struct {
	Sections []*Section

	types      []FuncType
	imports    []Import
	funcs      []uint32 // type index of each defined function
	funcRaw    [][]byte
	memories   []Limits
	globals    []Global
	exports    []Export
	dataCount  int // from the data count section
	hasDataCnt bool
	numData    int // segments in the data section
	bodies     []Body

	numImportedFuncs, numImportedGlobals uint32
}

var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// Decode parses a binary module. It checks the structure of every known section but not the function
// bodies: use ScanCode for those.
func Decode(wasm []byte) (*Module, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:8], header) {
		return nil, fmt.Errorf("wasmbin: not a WebAssembly version 1 binary module")
	}
	m := &Module{}
	r := &reader{b: wasm, pos: 8}
	last := -1
	for !r.done() {
		start := r.pos
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		hdr := wasm[start:r.pos]
		off := r.pos
		payload, err := r.bytes(size)
		if err != nil {
			return nil, err
		}
		s := &Section{ID: id, Payload: payload, Offset: off, header: hdr}
		sr := &reader{b: payload, base: off}
		if id == secCustom {
			if s.Name, err = sr.name(); err != nil {
				return nil, err
			}
		} else {
			rank := sectionRank(id)
			if rank < 0 {
				return nil, fmt.Errorf("wasmbin: offset %#x: unknown or unsupported section id %d", start, id)
			}
			if rank <= last {
				return nil, fmt.Errorf("wasmbin: offset %#x: section id %d out of order or duplicated", start, id)
			}
			last = rank
			if err := m.decodeSection(id, sr); err != nil {
				return nil, err
			}
			if !sr.done() {
				return nil, sr.errf("%d unexpected bytes at the end of section %d", len(payload)-sr.pos, id)
			}
		}
		m.Sections = append(m.Sections, s)
	}
	if len(m.funcs) != len(m.bodies) {
		return nil, fmt.Errorf("wasmbin: %d functions declared but %d bodies", len(m.funcs), len(m.bodies))
	}
	if m.hasDataCnt && m.dataCount != m.numData {
		return nil, fmt.Errorf("wasmbin: data count section says %d segments, data section has %d",
			m.dataCount, m.numData)
	}
	return m, nil
}

// vec calls item for each entry of a vector and returns the raw bytes of each entry.
func vec(r *reader, item func(i int) error) ([][]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(r.b)-r.pos) { // every entry takes at least one byte
		return nil, r.errf("vector length %d exceeds the section", n)
	}
	raws := make([][]byte, 0, n)
	for i := 0; i < int(n); i++ {
		start := r.pos
		if err := item(i); err != nil {
			return nil, err
		}
		raws = append(raws, r.b[start:r.pos])
	}
	return raws, nil
}

func (m *Module) decodeSection(id byte, r *reader) error {
	var err error
	switch id {
	case secType:
		_, err = vec(r, func(int) error {
			if c, err := r.byte(); err != nil || c != 0x60 {
				return r.errf("expected a function type (0x60)")
			}
			var ft FuncType
			for _, dst := range []*[]ValType{&ft.Params, &ft.Results} {
				n, err := r.u32()
				if err != nil {
					return err
				}
				b, err := r.bytes(n)
				if err != nil {
					return err
				}
				for _, c := range b {
					if !validValType(c) {
						return r.errf("bad value type %#x", c)
					}
					*dst = append(*dst, ValType(c))
				}
			}
			m.types = append(m.types, ft)
			return nil
		})
	case secImport:
		_, err = vec(r, func(int) error {
			start := r.pos
			var im Import
			var err error
			if im.Module, err = r.name(); err != nil {
				return err
			}
			if im.Name, err = r.name(); err != nil {
				return err
			}
			im.descAt = r.pos - start
			kind, err := r.byte()
			if err != nil {
				return err
			}
			im.Kind = ExternKind(kind)
			switch im.Kind {
			case KindFunc:
				im.TypeIndex, err = m.typeIndex(r)
				m.numImportedFuncs++
			case KindTable:
				im.ElemType, im.Limits, err = readTableType(r)
			case KindMemory:
				im.Limits, err = readLimits(r)
			case KindGlobal:
				im.Global, err = readGlobalType(r)
				m.numImportedGlobals++
			default:
				err = r.errf("unsupported import kind %d", kind)
			}
			im.raw = r.b[start:r.pos]
			m.imports = append(m.imports, im)
			return err
		})
	case secFunction:
		m.funcRaw, err = vec(r, func(int) error {
			ti, err := m.typeIndex(r)
			m.funcs = append(m.funcs, ti)
			return err
		})
	case secTable:
		_, err = vec(r, func(int) error {
			_, _, err := readTableType(r)
			return err
		})
	case secMemory:
		_, err = vec(r, func(int) error {
			l, err := readLimits(r)
			m.memories = append(m.memories, l)
			return err
		})
	case secGlobal:
		_, err = vec(r, func(i int) error {
			start := r.pos
			gt, err := readGlobalType(r)
			if err != nil {
				return err
			}
			init, err := readConstExpr(r)
			m.globals = append(m.globals, Global{Index: m.numImportedGlobals + uint32(i), GlobalType: gt,
				Init: init, raw: r.b[start:r.pos]})
			return err
		})
	case secExport:
		seen := map[string]bool{}
		_, err = vec(r, func(int) error {
			start := r.pos
			name, err := r.name()
			if err != nil {
				return err
			}
			if seen[name] {
				return r.errf("duplicate export %q", name)
			}
			seen[name] = true
			kind, err := r.byte()
			if err != nil {
				return err
			}
			if kind > byte(KindGlobal) {
				return r.errf("unsupported export kind %d", kind)
			}
			idx, err := r.u32()
			m.exports = append(m.exports, Export{name, ExternKind(kind), idx, r.b[start:r.pos]})
			return err
		})
	case secStart:
		_, err = r.u32()
	case secElement:
		_, err = vec(r, func(int) error { return readElem(r) })
	case secDataCount:
		var n uint32
		n, err = r.u32()
		m.dataCount, m.hasDataCnt = int(n), true
	case secCode:
		_, err = vec(r, func(i int) error {
			start := r.pos
			size, err := r.u32()
			if err != nil {
				return err
			}
			off := r.base + r.pos
			code, err := r.bytes(size)
			if err != nil {
				return err
			}
			br := &reader{b: code, base: off}
			if _, err := vec(br, func(int) error {
				if _, err := br.u32(); err != nil {
					return err
				}
				if c, err := br.byte(); err != nil || !validValType(c) {
					return br.errf("bad local type")
				}
				return nil
			}); err != nil {
				return err
			}
			m.bodies = append(m.bodies, Body{Func: m.numImportedFuncs + uint32(i), Code: code, Offset: off,
				Expr: br.pos, raw: r.b[start:r.pos]})
			return nil
		})
	case secData:
		_, err = vec(r, func(int) error {
			m.numData++
			flags, err := r.u32()
			if err != nil {
				return err
			}
			switch flags {
			case 0, 2:
				if flags == 2 {
					if _, err := r.u32(); err != nil {
						return err
					}
				}
				if _, err := readConstExpr(r); err != nil {
					return err
				}
			case 1:
			default:
				return r.errf("bad data segment flags %d", flags)
			}
			n, err := r.u32()
			if err != nil {
				return err
			}
			_, err = r.bytes(n)
			return err
		})
	}
	return err
}

func (m *Module) typeIndex(r *reader) (uint32, error) {
	ti, err := r.u32()
	if err == nil && int(ti) >= len(m.types) {
		err = r.errf("type index %d out of range", ti)
	}
	return ti, err
}

func readLimits(r *reader) (Limits, error) {
	flags, err := r.byte()
	if err != nil {
		return Limits{}, err
	}
	if flags > 3 {
		return Limits{}, r.errf("unsupported limits flags %#x", flags)
	}
	l := Limits{HasMax: flags&1 != 0, Shared: flags&2 != 0}
	if l.Min, err = r.u32(); err != nil || !l.HasMax {
		return l, err
	}
	l.Max, err = r.u32()
	return l, err
}

func readRefType(r *reader) (ValType, error) {
	c, err := r.byte()
	if err == nil && ValType(c) != FuncRef && ValType(c) != ExternRef {
		err = r.errf("bad reference type %#x", c)
	}
	return ValType(c), err
}

func readTableType(r *reader) (ValType, Limits, error) {
	t, err := readRefType(r)
	if err != nil {
		return 0, Limits{}, err
	}
	l, err := readLimits(r)
	return t, l, err
}

func readGlobalType(r *reader) (GlobalType, error) {
	c, err := r.byte()
	if err != nil {
		return GlobalType{}, err
	}
	if !validValType(c) {
		return GlobalType{}, r.errf("bad global type %#x", c)
	}
	mut, err := r.byte()
	if err == nil && mut > 1 {
		err = r.errf("bad global mutability %d", mut)
	}
	return GlobalType{ValType(c), mut == 1}, err
}

// readConstExpr reads an expression up to and including its final end and returns its bytes.
func readConstExpr(r *reader) ([]byte, error) {
	start := r.pos
	err := scanExpr(r, nil)
	return r.b[start:r.pos], err
}

func readElem(r *reader) error {
	flags, err := r.u32()
	if err != nil {
		return err
	}
	if flags > 7 {
		return r.errf("bad element segment flags %d", flags)
	}
	if flags&3 == 2 { // explicit table index
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	if flags&1 == 0 { // active: offset expression
		if _, err := readConstExpr(r); err != nil {
			return err
		}
	}
	if flags&3 != 0 { // elemkind (0x00) or reftype follows
		if flags&4 == 0 {
			if c, err := r.byte(); err != nil || c != 0 {
				return r.errf("bad element kind")
			}
		} else if _, err := readRefType(r); err != nil {
			return err
		}
	}
	_, err = vec(r, func(int) error {
		if flags&4 == 0 {
			_, err := r.u32()
			return err
		}
		_, err := readConstExpr(r)
		return err
	})
	return err
}

// Encode writes the module's sections. A module that was decoded and not changed encodes to its input.
func (m *Module) Encode() []byte {
	n := len(header)
	for _, s := range m.Sections {
		n += 6 + len(s.Payload)
	}
	out := append(make([]byte, 0, n), header...)
	for _, s := range m.Sections {
		if s.header != nil {
			if size, err := (&reader{b: s.header, pos: 1}).u32(); err == nil && int(size) == len(s.Payload) {
				out = append(append(out, s.header...), s.Payload...)
				continue
			}
		}
		out = appendULEB(append(out, s.ID), uint64(len(s.Payload)))
		out = append(out, s.Payload...)
	}
	return out
}

// section returns the first section with the id (not meant for custom sections).
func (m *Module) section(id byte) *Section {
	for _, s := range m.Sections {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// setSection replaces the payload of the section with the id, or inserts a new section where the binary
// format requires it.
func (m *Module) setSection(id byte, payload []byte) {
	if s := m.section(id); s != nil {
		s.Payload = payload
		return
	}
	at := 0
	for i, s := range m.Sections {
		if s.ID != secCustom && sectionRank(s.ID) < sectionRank(id) {
			at = i + 1
		}
	}
	s := &Section{ID: id, Payload: payload}
	m.Sections = append(m.Sections[:at], append([]*Section{s}, m.Sections[at:]...)...)
}

func (m *Module) removeSection(id byte) {
	out := m.Sections[:0]
	for _, s := range m.Sections {
		if s.ID != id {
			out = append(out, s)
		}
	}
	m.Sections = out
}

// encodeVec encodes a vector from the raw bytes of its entries.
func encodeVec(items [][]byte) []byte {
	n := 5
	for _, it := range items {
		n += len(it)
	}
	b := appendULEB(make([]byte, 0, n), uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

// Types returns the function types of the type section.
func (m *Module) Types() []FuncType { return m.types }

// Imports returns the import section's entries.
func (m *Module) Imports() []Import { return m.imports }

// Exports returns the export section's entries.
func (m *Module) Exports() []Export { return m.exports }

// Globals returns the globals the module defines (not the imported ones), with their index.
func (m *Module) Globals() []Global { return m.globals }

// Bodies returns the bodies of the defined functions.
func (m *Module) Bodies() []Body { return m.bodies }

// NumImportedFuncs returns the number of imported functions, which come first in the function index space.
func (m *Module) NumImportedFuncs() uint32 { return m.numImportedFuncs }

// FuncType returns the type of the function with the index (imported or defined).
func (m *Module) FuncType(fn uint32) (FuncType, bool) {
	ti, ok := m.funcTypeIndex(fn)
	if !ok {
		return FuncType{}, false
	}
	return m.types[ti], true
}

func (m *Module) funcTypeIndex(fn uint32) (uint32, bool) {
	if fn >= m.numImportedFuncs {
		if i := fn - m.numImportedFuncs; int(i) < len(m.funcs) {
			return m.funcs[i], true
		}
		return 0, false
	}
	for _, im := range m.imports {
		if im.Kind == KindFunc {
			if fn == 0 {
				return im.TypeIndex, true
			}
			fn--
		}
	}
	return 0, false
}

// Export returns the export with the name.
func (m *Module) Export(name string) (Export, bool) {
	for _, e := range m.exports {
		if e.Name == name {
			return e, true
		}
	}
	return Export{}, false
}
