package wasmbin

import (
	"fmt"
	"strings"
)

// Opcode is an instruction's opcode: the opcode byte, or for the 0xFC prefix 0xFC00 plus the sub-opcode.
type Opcode uint32

// Opcodes the rewrites look for.
const (
	OpBlock      Opcode = 0x02
	OpLoop       Opcode = 0x03
	OpIf         Opcode = 0x04
	OpEnd        Opcode = 0x0b
	OpMemoryInit Opcode = 0xfc08
	OpDataDrop   Opcode = 0xfc09
	OpMemoryCopy Opcode = 0xfc0a
	OpMemoryFill Opcode = 0xfc0b
	OpTableSet   Opcode = 0x26
	OpTableInit  Opcode = 0xfc0c
	OpElemDrop   Opcode = 0xfc0d
	OpTableCopy  Opcode = 0xfc0e
	OpTableGrow  Opcode = 0xfc0f
	OpTableFill  Opcode = 0xfc11
)

// Instr is one decoded instruction.
type Instr struct {
	Op     Opcode
	Offset int // file offset of the opcode
	End    int // file offset just past the immediates
	// Arg is the first immediate if it is an index (label, function, type, local, global, table, memory,
	// data or element) or an integer constant (i32/i64 .const, sign-extended to 64 bits).
	Arg uint64
	// Arg2 is the second index of an instruction with two (call_indirect's table, memory.copy's source
	// memory, memory.init's memory, table.init's table, table.copy's source table).
	Arg2 uint64
}

// immediate kinds
const (
	immNone     = iota
	immBlock    // block type
	immIdx      // one u32
	immIdx2     // two u32
	immBrTable  // vec(labelidx) labelidx
	immSelectT  // vec(valtype)
	immMemarg   // align offset
	immI32      // s32
	immI64      // s64
	immF32      // 4 bytes
	immF64      // 8 bytes
	immRefType  // reftype byte
	immBad      // not supported
	immPrefixFC // 0xFC sub-opcode
)

// immKinds maps single-byte opcodes to their immediates.
var immKinds = func() (k [256]byte) {
	for i := range k {
		k[i] = immBad
	}
	set := func(from, to int, kind byte) {
		for op := from; op <= to; op++ {
			k[op] = kind
		}
	}
	set(0x00, 0x01, immNone)    // unreachable nop
	set(0x02, 0x04, immBlock)   // block loop if
	set(0x05, 0x05, immNone)    // else
	set(0x0b, 0x0b, immNone)    // end
	set(0x0c, 0x0d, immIdx)     // br br_if
	set(0x0e, 0x0e, immBrTable) // br_table
	set(0x0f, 0x0f, immNone)    // return
	set(0x10, 0x10, immIdx)     // call
	set(0x11, 0x11, immIdx2)    // call_indirect typeidx tableidx
	set(0x1a, 0x1b, immNone)    // drop select
	set(0x1c, 0x1c, immSelectT) // select t*
	set(0x20, 0x26, immIdx)     // local.get/set/tee global.get/set table.get/set
	set(0x28, 0x3e, immMemarg)  // loads and stores
	set(0x3f, 0x40, immIdx)     // memory.size memory.grow
	set(0x41, 0x41, immI32)
	set(0x42, 0x42, immI64)
	set(0x43, 0x43, immF32)
	set(0x44, 0x44, immF64)
	set(0x45, 0xc4, immNone) // numeric, sign extension
	set(0xd0, 0xd0, immRefType)
	set(0xd1, 0xd1, immNone) // ref.is_null
	set(0xd2, 0xd2, immIdx)  // ref.func
	set(0xfc, 0xfc, immPrefixFC)
	return k
}()

// immFC gives the immediates of the 0xFC sub-opcodes 0..17.
var immFC = [...]byte{
	immNone, immNone, immNone, immNone, immNone, immNone, immNone, immNone, // trunc_sat
	immIdx2, immIdx, immIdx2, immIdx, // memory.init data.drop memory.copy memory.fill
	immIdx2, immIdx, immIdx2, immIdx, immIdx, immIdx, // table.init elem.drop table.copy table.grow/size/fill
}

// scanExpr decodes instructions from r up to and including the end that closes the expression, calling
// visit (if not nil) for each instruction, the final end included.
func scanExpr(r *reader, visit func(Instr) error) error {
	depth := 0
	for {
		in := Instr{Offset: r.base + r.pos}
		c, err := r.byte()
		if err != nil {
			return err
		}
		in.Op = Opcode(c)
		kind := immKinds[c]
		if kind == immPrefixFC {
			sub, err := r.u32()
			if err != nil {
				return err
			}
			if int(sub) >= len(immFC) {
				return fmt.Errorf("wasmbin: offset %#x: unknown opcode 0xfc %d", in.Offset, sub)
			}
			in.Op, kind = Opcode(0xfc00+sub), immFC[sub]
		}
		switch kind {
		case immBad:
			if c == 0xfd {
				return fmt.Errorf("wasmbin: offset %#x: unsupported opcode 0xfd (SIMD)", in.Offset)
			}
			return fmt.Errorf("wasmbin: offset %#x: unknown opcode %#02x", in.Offset, c)
		case immBlock:
			bt, err := r.sleb(33)
			if err != nil {
				return err
			}
			if bt < 0 && (bt < -0x40 || bt != -0x40 && !validValType(byte(bt&0x7f))) {
				return r.errf("bad block type %d", bt)
			}
			in.Arg = uint64(bt)
			depth++
		case immIdx, immIdx2:
			v, err := r.u32()
			if err != nil {
				return err
			}
			in.Arg = uint64(v)
			if kind == immIdx2 {
				v, err := r.u32()
				if err != nil {
					return err
				}
				in.Arg2 = uint64(v)
			}
		case immBrTable:
			n, err := r.u32()
			for i := uint64(0); err == nil && i <= uint64(n); i++ {
				_, err = r.u32()
			}
			if err != nil {
				return err
			}
		case immSelectT:
			n, err := r.u32()
			if err != nil {
				return err
			}
			ts, err := r.bytes(n)
			if err != nil {
				return err
			}
			for _, t := range ts {
				if !validValType(t) {
					return r.errf("bad value type %#x", t)
				}
			}
		case immMemarg:
			if _, err := r.u32(); err != nil {
				return err
			}
			if _, err := r.u32(); err != nil {
				return err
			}
		case immI32, immI64:
			bits := uint(32)
			if kind == immI64 {
				bits = 64
			}
			v, err := r.sleb(bits)
			if err != nil {
				return err
			}
			in.Arg = uint64(v)
		case immF32, immF64:
			n := uint32(4)
			if kind == immF64 {
				n = 8
			}
			if _, err := r.bytes(n); err != nil {
				return err
			}
		case immRefType:
			if _, err := readRefType(r); err != nil {
				return err
			}
		}
		in.End = r.base + r.pos
		if visit != nil {
			if err := visit(in); err != nil {
				return err
			}
		}
		if in.Op == OpEnd {
			if depth == 0 {
				return nil
			}
			depth--
		}
	}
}

// ScanCode decodes the instructions of every function body in order, calling visit (if not nil) for each.
// An unknown or unsupported opcode is an error that names the function and the file offset.
func (m *Module) ScanCode(visit func(fn uint32, in Instr) error) error {
	for _, b := range m.bodies {
		var v func(Instr) error
		if visit != nil {
			v = func(in Instr) error { return visit(b.Func, in) }
		}
		if err := b.Scan(v); err != nil {
			return err
		}
	}
	return nil
}

// Scan decodes the instructions of the body, calling visit (if not nil) for each.
func (b Body) Scan(visit func(Instr) error) error {
	r := &reader{b: b.Code, pos: b.Expr, base: b.Offset}
	err := scanExpr(r, visit)
	if err == nil && !r.done() {
		err = r.errf("%d bytes after the final end", len(r.b)-r.pos)
	}
	if err != nil {
		return fmt.Errorf("wasmbin: function %d: %w", b.Func, bare{err})
	}
	return nil
}

// bare drops the "wasmbin: " prefix of a wrapped error.
type bare struct{ error }

func (e bare) Error() string { return strings.TrimPrefix(e.error.Error(), "wasmbin: ") }
func (e bare) Unwrap() error { return e.error }
