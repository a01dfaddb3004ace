package wasmbin

import (
	"fmt"
	"math"
)

// ABI names the instrumentation uses. They repeat hostfuncs/abi.go to keep this package free of
// dependencies; TestABIConstants checks that they match.
const (
	TickModule      = "wasmbox_v1"
	TickName        = "tick"
	InterruptExport = "wasmbox_interrupt"
	FuelExport      = "wasmbox_fuel"
	StackPointer    = "__stack_pointer"
	DefaultInterval = 10000

	// BulkShift sets what a bulk memory operation costs: one unit of the counter (one loop iteration) per
	// 1<<BulkShift bytes copied or filled. At 256 bytes a unit, the default interval is 2.5 MiB of copying, a
	// tick every 0.1 ms on memory already touched and every few ms on fresh pages, which fault on first write.
	BulkShift = 8
	// BulkChunk is the largest single memory.copy or memory.fill the instrumented module runs: a longer one is
	// split into chunks of this size, each charged before it runs, so one instruction cannot outlast the
	// deadline (a 900 MB copy to fresh pages takes seconds).
	BulkChunk = 1 << 20
)

// InstrumentOptions configure Instrument. The zero value is the default.
type InstrumentOptions struct {
	// Interval is the counter's reset value: tick is called every Interval loop iterations (default
	// DefaultInterval).
	Interval int32
	// NoExportStackPointer keeps __stack_pointer unexported. By default Instrument exports it (if it is a
	// defined mutable global that no export names yet), since the host snapshots exported mutable globals.
	NoExportStackPointer bool
}

// InstrumentStats describe what Instrument did.
type InstrumentStats struct {
	Functions  int `json:"functions"` // defined functions, the helper not included
	Loops      int `json:"loops"`     // loops instrumented
	SizeBefore int `json:"size_before"`
	SizeAfter  int `json:"size_after"`
	// BulkCopies and BulkFills count the memory.copy and memory.fill instructions replaced by BulkSequence;
	// BulkShort those left as they are, since a constant length below 1<<BulkShift costs nothing.
	BulkCopies           int    `json:"bulk_copies"`
	BulkFills            int    `json:"bulk_fills"`
	BulkShort            int    `json:"bulk_short"`
	TickFunc             uint32 `json:"tick_func"`
	InterruptFunc        uint32 `json:"interrupt_func"`
	HelperFunc           uint32 `json:"helper_func"`
	CopyFunc             uint32 `json:"copy_func"` // $bulk_copy, 0 without copies
	FillFunc             uint32 `json:"fill_func"` // $bulk_fill, 0 without fills
	FuelGlobal           uint32 `json:"fuel_global"`
	StackPointerExported bool   `json:"stack_pointer_exported"` // exported by this run
	// UnexportedMutableGlobals counts the defined mutable globals still not exported (a snapshot misses them).
	UnexportedMutableGlobals int `json:"unexported_mutable_globals"`
}

// CheckSequence returns the bytes Instrument inserts after every loop's block type, for the fuel global and
// the helper function with the given indices:
//
//	global.get $fuel; i32.const 1; i32.sub; global.set $fuel
//	global.get $fuel; i32.eqz; if (empty) call $tick_slow end
func CheckSequence(fuel, helper uint32) []byte {
	g := appendULEB(nil, uint64(fuel))
	b := append(append([]byte{0x23}, g...), 0x41, 0x01, 0x6b, 0x24)
	b = append(append(append(b, g...), 0x23), g...)
	b = append(b, 0x45, 0x04, 0x40, 0x10)
	return append(appendULEB(b, uint64(helper)), 0x0b)
}

// helperBody is the code (locals and expression) of $tick_slow:
//
//	(local $r i32)
//	call $tick; local.tee $r; i32.const 0; i32.lt_s
//	if  call $wasmbox_interrupt; i32.const 0; local.get $r; i32.sub; local.set $r  end
//	local.get $r; i32.const 0; i32.le_s
//	if  i32.const interval; local.set $r  end   ;; also covers -MinInt32
//	local.get $r; global.set $fuel
func helperBody(tick, interrupt, fuel uint32, interval int32) []byte {
	b := appendULEB([]byte{0x01, 0x01, byte(I32), 0x10}, uint64(tick))
	b = append(b, 0x22, 0x00, 0x41, 0x00, 0x48, 0x04, 0x40, 0x10)
	b = appendULEB(b, uint64(interrupt))
	b = append(b, 0x41, 0x00, 0x20, 0x00, 0x6b, 0x21, 0x00, 0x0b,
		0x20, 0x00, 0x41, 0x00, 0x4c, 0x04, 0x40, 0x41)
	b = appendSLEB(b, int64(interval))
	b = append(b, 0x21, 0x00, 0x0b, 0x20, 0x00, 0x24)
	return append(appendULEB(b, uint64(fuel)), 0x0b)
}

// chargeSequence charges the length in local n to the counter before a bulk operation:
//
//	global.get $fuel; local.get n; i32.const BulkShift; i32.shr_u; i32.sub; global.set $fuel
//	global.get $fuel; i32.const 0; i32.le_s; if (empty) call $tick_slow end
//
// The counter is at least 1 before (every check that takes it to 0 or below calls $tick_slow, which stores a
// positive value) and the charge is at most BulkChunk>>BulkShift, so it cannot wrap.
func chargeSequence(fuel, helper, n uint32) []byte {
	g := appendULEB(nil, uint64(fuel))
	b := appendULEB(append(append([]byte{0x23}, g...), 0x20), uint64(n))
	b = append(append(append(b, 0x41, BulkShift, 0x76, 0x6b, 0x24), g...), 0x23)
	b = append(append(b, g...), 0x41, 0x00, 0x4c, 0x04, 0x40, 0x10)
	return append(appendULEB(b, uint64(helper)), 0x0b)
}

// BulkSequence returns the bytes Instrument puts in place of a memory.copy (or with fill, a memory.fill) in a
// function whose scratch i32 locals start at index d, for the fuel global, the helper $tick_slow and the
// function $bulk_copy (or $bulk_fill):
//
//	local.set d+2; local.set d+1; local.set d          ;; n, src or value, dst
//	local.get d+2; i32.const BulkChunk; i32.le_u
//	if    <charge n>; local.get d; local.get d+1; local.get d+2; memory.copy|fill
//	else  local.get d; local.get d+1; local.get d+2; call $bulk
//	end
//
// The common short operation is charged inline; a long one is left to $bulk, which runs it in charged chunks.
func BulkSequence(fill bool, d, fuel, helper, bulk uint32) []byte {
	get := func(b []byte, op byte, i uint32) []byte { return appendULEB(append(b, op), uint64(d+i)) }
	args := func(b []byte) []byte { return get(get(get(b, 0x20, 0), 0x20, 1), 0x20, 2) }
	b := get(get(get(nil, 0x21, 2), 0x21, 1), 0x21, 0)
	b = append(appendSLEB(append(get(b, 0x20, 2), 0x41), BulkChunk), 0x4d, 0x04, 0x40)
	b = args(append(b, chargeSequence(fuel, helper, d+2)...))
	if fill {
		b = append(b, 0xfc, 0x0b, 0x00)
	} else {
		b = append(b, 0xfc, 0x0a, 0x00, 0x00)
	}
	b = append(appendULEB(append(args(append(b, 0x05)), 0x10), uint64(bulk)), 0x0b)
	return b
}

// bulkBody is the code of $bulk_copy (fill false) or $bulk_fill (fill true), of type (i32 i32 i32) -> (),
// which replace memory.copy (dst, src, n) and memory.fill (dst, value, n):
//
//	(local $c i32)
//	local.get $n; i32.const BulkChunk; i32.le_u
//	if  <charge n>; local.get 0; local.get 1; local.get $n; memory.copy|fill; return  end
//	;; out of bounds: run the instruction whole, which traps before it writes anything
//	<dst+n > memory size> [or <src+n > memory size>]
//	if  local.get 0; local.get 1; local.get $n; memory.copy|fill; return  end
//	;; copy: when dst > src, copy the chunks from the end, as memmove does, so an overlap reads no byte
//	;; already overwritten
//	[local.get 0; local.get 1; i32.gt_u
//	 if  loop  $c = min(n, BulkChunk); $n -= $c; call $self(dst+$n, src+$n, $c); br_if ($n) 0  end
//	 else]
//	  loop  $c = min(n, BulkChunk); call $self(dst, src|value, $c); dst += $c; [src += $c;] $n -= $c; br_if ($n) 0  end
//	[end]
//
// Each chunk goes through the fast path, so it is charged (and may tick) before it runs.
func bulkBody(self, fuel, helper uint32, fill bool) []byte {
	op := []byte{0xfc, 0x0a, 0x00, 0x00}
	if fill {
		op = []byte{0xfc, 0x0b, 0x00}
	}
	chunk := appendSLEB([]byte{0x41}, BulkChunk) // i32.const BulkChunk
	call := appendULEB([]byte{0x10}, uint64(self))
	whole := append(append([]byte{0x20, 0x00, 0x20, 0x01, 0x20, 0x02}, op...), 0x0f) // the op; return
	// local.get x; i64.extend_i32_u; local.get $n; i64.extend_i32_u; i64.add;
	// memory.size; i64.extend_i32_u; i64.const 16; i64.shl; i64.gt_u
	beyond := func(x byte) []byte {
		return []byte{0x20, x, 0xad, 0x20, 0x02, 0xad, 0x7c, 0x3f, 0x00, 0xad, 0x42, 0x10, 0x86, 0x56}
	}
	// $c = select(BulkChunk, $n, $n > BulkChunk)
	minChunk := append(append(append(append([]byte(nil), chunk...), 0x20, 0x02, 0x20, 0x02), chunk...),
		0x4b, 0x1b, 0x21, 0x03)

	b := []byte{0x01, 0x01, byte(I32)} // (local $c i32)
	b = append(append(append(b, 0x20, 0x02), chunk...), 0x4d, 0x04, 0x40)
	b = append(append(append(b, chargeSequence(fuel, helper, 2)...), whole...), 0x0b)
	b = append(b, beyond(0x00)...)
	if !fill {
		b = append(append(b, beyond(0x01)...), 0x72) // i32.or
	}
	b = append(append(append(b, 0x04, 0x40), whole...), 0x0b)
	if !fill {
		b = append(b, 0x20, 0x00, 0x20, 0x01, 0x4b, 0x04, 0x40, 0x03, 0x40)
		b = append(b, minChunk...)
		b = append(b, 0x20, 0x02, 0x20, 0x03, 0x6b, 0x21, 0x02) // $n -= $c
		b = append(b, 0x20, 0x00, 0x20, 0x02, 0x6a, 0x20, 0x01, 0x20, 0x02, 0x6a, 0x20, 0x03)
		b = append(append(b, call...), 0x20, 0x02, 0x0d, 0x00, 0x0b, 0x05)
	}
	b = append(append(b, 0x03, 0x40), minChunk...)
	b = append(append(b, 0x20, 0x00, 0x20, 0x01, 0x20, 0x03), call...)
	b = append(b, 0x20, 0x00, 0x20, 0x03, 0x6a, 0x21, 0x00) // dst += $c
	if !fill {
		b = append(b, 0x20, 0x01, 0x20, 0x03, 0x6a, 0x21, 0x01) // src += $c
	}
	b = append(b, 0x20, 0x02, 0x20, 0x03, 0x6b, 0x22, 0x02, 0x0d, 0x00, 0x0b) // $n -= $c; br_if 0
	if !fill {
		b = append(b, 0x0b)
	}
	return append(b, 0x0b)
}

// Instrument applies the hard-deadline rewrite: after every loop header it inserts CheckSequence, which
// decrements the new exported mutable i32 global wasmbox_fuel (initialised to the interval) and, when it
// reaches zero, calls an appended helper function. The helper calls the import wasmbox_v1.tick () -> i32,
// calls the exported wasmbox_interrupt () if the result r is negative and uses -r, uses the interval if the
// result is zero, and stores the result in the counter.
//
// A loop header is not enough where one instruction does a loop's work: every memory.copy and memory.fill
// whose length is not a constant below 1<<BulkShift becomes BulkSequence, which charges the length to the
// counter (one unit per 1<<BulkShift bytes, calling the helper when the counter reaches zero or below) before
// the instruction runs, using three i32 locals added to the function. An operation longer than BulkChunk goes
// to an appended function of type (i32 i32 i32) -> () (the type is appended if the module lacks it) that runs
// it in chunks of at most BulkChunk bytes, each charged before it is written. Results, overlapping copies and
// out-of-bounds traps are those of the instruction. (memory.grow is not charged: growing only maps pages;
// writing them is.)
//
// No branch depth, function or global index changes: the module must already import tick, since adding an
// import would renumber every function.
func Instrument(wasm []byte, opts InstrumentOptions) ([]byte, InstrumentStats, error) {
	st := InstrumentStats{SizeBefore: len(wasm)}
	interval := opts.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	if interval < 0 {
		return nil, st, fmt.Errorf("wasmbin: interval %d must be positive", interval)
	}
	m, err := Decode(wasm)
	if err != nil {
		return nil, st, err
	}

	tick, found := uint32(0), false
	for _, im := range m.imports {
		if im.Kind != KindFunc {
			continue
		}
		if im.Module == TickModule && im.Name == TickName {
			if !m.types[im.TypeIndex].equal(FuncType{Results: []ValType{I32}}) {
				return nil, st, fmt.Errorf("wasmbin: import %s.%s must have type () -> i32", TickModule, TickName)
			}
			st.TickFunc, found = tick, true
			break
		}
		tick++
	}
	if !found {
		return nil, st, fmt.Errorf("wasmbin: the module does not import %s.%s () -> i32 (the interpreter must "+
			"declare it: adding an import would renumber every function)", TickModule, TickName)
	}
	e, ok := m.Export(InterruptExport)
	if !ok || e.Kind != KindFunc || e.Index >= m.numImportedFuncs+uint32(len(m.funcs)) {
		return nil, st, fmt.Errorf("wasmbin: the module does not export the function %s", InterruptExport)
	}
	voidIdx, _ := m.funcTypeIndex(e.Index) // also the helper's type
	if !m.types[voidIdx].equal(FuncType{}) {
		return nil, st, fmt.Errorf("wasmbin: export %s must have type () -> ()", InterruptExport)
	}
	st.InterruptFunc = e.Index
	if _, ok := m.Export(FuelExport); ok {
		return nil, st, fmt.Errorf("wasmbin: the module already exports %s (instrumented twice?)", FuelExport)
	}

	// The counter global and its export.
	st.FuelGlobal = m.numImportedGlobals + uint32(len(m.globals))
	globals := make([][]byte, 0, len(m.globals)+1)
	for _, g := range m.globals {
		globals = append(globals, g.raw)
	}
	fuelInit := append(appendSLEB([]byte{byte(I32), 1, 0x41}, int64(interval)), 0x0b)
	m.setSection(secGlobal, encodeVec(append(globals, fuelInit)))

	exports := make([][]byte, 0, len(m.exports)+2)
	exported := map[uint32]bool{}
	for _, e := range m.exports {
		exports = append(exports, e.raw)
		if e.Kind == KindGlobal {
			exported[e.Index] = true
		}
	}
	exportGlobal := func(name string, idx uint32) {
		exports = append(exports, appendULEB(append(appendName(nil, name), byte(KindGlobal)), uint64(idx)))
		exported[idx] = true
	}
	exportGlobal(FuelExport, st.FuelGlobal)
	if sp, ok := m.stackPointer(exported); ok && !opts.NoExportStackPointer {
		if _, taken := m.Export(StackPointer); !taken {
			exportGlobal(StackPointer, sp)
			st.StackPointerExported = true
		}
	}
	for _, g := range m.globals {
		if g.Mutable && !exported[g.Index] {
			st.UnexportedMutableGlobals++
		}
	}
	m.setSection(secExport, encodeVec(exports))

	// Where the checks go: after every loop's block type, and in place of every memory.copy and memory.fill.
	type edit struct {
		at, end int // offsets in the body's Code: the bytes [at, end) are replaced
		op      Opcode
	}
	edits := make([][]edit, len(m.bodies))
	bulkIn := make([]bool, len(m.bodies)) // the body gets scratch locals
	for i, b := range m.bodies {
		var prev Instr
		err := b.Scan(func(in Instr) error {
			defer func() { prev = in }()
			switch in.Op {
			case OpLoop:
				edits[i] = append(edits[i], edit{in.End - b.Offset, in.End - b.Offset, OpLoop})
				st.Loops++
			case OpMemoryCopy, OpMemoryFill:
				if in.Arg != 0 || in.Arg2 != 0 {
					return fmt.Errorf("wasmbin: offset %#x: a bulk memory operation on memory %d (one memory "+
						"supported)", in.Offset, max(in.Arg, in.Arg2))
				}
				if prev.Op == 0x41 && int64(prev.Arg) >= 0 && int64(prev.Arg) < 1<<BulkShift {
					st.BulkShort++ // a constant length that costs nothing: no change
					return nil
				}
				edits[i] = append(edits[i], edit{in.Offset - b.Offset, in.End - b.Offset, in.Op})
				bulkIn[i] = true
				if in.Op == OpMemoryCopy {
					st.BulkCopies++
				} else {
					st.BulkFills++
				}
			}
			return nil
		})
		if err != nil {
			return nil, st, err
		}
	}

	// The helper functions: $tick_slow, then $bulk_copy and $bulk_fill if the module has such instructions.
	st.Functions = len(m.funcs)
	st.HelperFunc = m.numImportedFuncs + uint32(len(m.funcs))
	funcRaw := append(append(make([][]byte, 0, len(m.funcRaw)+3), m.funcRaw...), appendULEB(nil, uint64(voidIdx)))
	next := st.HelperFunc + 1
	if st.BulkCopies+st.BulkFills > 0 {
		bulkType := m.addFuncType(FuncType{Params: []ValType{I32, I32, I32}})
		if st.BulkCopies > 0 {
			st.CopyFunc, next = next, next+1
			funcRaw = append(funcRaw, appendULEB(nil, uint64(bulkType)))
		}
		if st.BulkFills > 0 {
			st.FillFunc = next
			funcRaw = append(funcRaw, appendULEB(nil, uint64(bulkType)))
		}
	}
	m.setSection(secFunction, encodeVec(funcRaw))

	check := CheckSequence(st.FuelGlobal, st.HelperFunc)
	bodies := make([][]byte, 0, len(m.bodies)+3)
	for i, b := range m.bodies {
		if len(edits[i]) == 0 {
			bodies = append(bodies, b.raw)
			continue
		}
		code, prev := make([]byte, 0, len(b.Code)+len(edits[i])*64), 0
		var copySeq, fillSeq []byte
		if bulkIn[i] {
			// three scratch i32 locals after the others: the local declarations get one more entry
			var d uint32
			var err error
			if code, d, prev, err = m.addLocals(code, b, 3); err != nil {
				return nil, st, err
			}
			copySeq = BulkSequence(false, d, st.FuelGlobal, st.HelperFunc, st.CopyFunc)
			fillSeq = BulkSequence(true, d, st.FuelGlobal, st.HelperFunc, st.FillFunc)
		}
		for _, e := range edits[i] {
			code = append(code, b.Code[prev:e.at]...)
			switch e.op {
			case OpLoop:
				code = append(code, check...)
			case OpMemoryCopy:
				code = append(code, copySeq...)
			case OpMemoryFill:
				code = append(code, fillSeq...)
			}
			prev = e.end
		}
		code = append(code, b.Code[prev:]...)
		bodies = append(bodies, append(appendULEB(nil, uint64(len(code))), code...))
	}
	helpers := [][]byte{helperBody(st.TickFunc, st.InterruptFunc, st.FuelGlobal, interval)}
	if st.BulkCopies > 0 {
		helpers = append(helpers, bulkBody(st.CopyFunc, st.FuelGlobal, st.HelperFunc, false))
	}
	if st.BulkFills > 0 {
		helpers = append(helpers, bulkBody(st.FillFunc, st.FuelGlobal, st.HelperFunc, true))
	}
	for _, h := range helpers {
		bodies = append(bodies, append(appendULEB(nil, uint64(len(h))), h...))
	}
	m.setSection(secCode, encodeVec(bodies))

	out := m.Encode()
	st.SizeAfter = len(out)
	return out, st, nil
}

// stackPointer finds an unexported __stack_pointer: the defined mutable i32 global the name section calls
// so or, without global names, the only unexported defined mutable i32 global (wasm-ld's stack pointer).
func (m *Module) stackPointer(exported map[uint32]bool) (uint32, bool) {
	isCandidate := func(idx uint32) bool {
		i := int(idx) - int(m.numImportedGlobals)
		return i >= 0 && i < len(m.globals) && m.globals[i].Mutable && m.globals[i].Type == I32
	}
	if names, ok := m.globalNames(); ok {
		for idx, name := range names {
			if name == StackPointer && isCandidate(idx) && !exported[idx] {
				return idx, true
			}
		}
		return 0, false
	}
	found, n := uint32(0), 0
	for _, g := range m.globals {
		if isCandidate(g.Index) && !exported[g.Index] {
			found, n = g.Index, n+1
		}
	}
	return found, n == 1
}

// globalNames reads the global names subsection (id 7) of the "name" custom section, if there is one.
func (m *Module) globalNames() (map[uint32]string, bool) {
	for _, s := range m.Sections {
		if s.ID != secCustom || s.Name != "name" {
			continue
		}
		r := &reader{b: s.Payload}
		if _, err := r.name(); err != nil {
			return nil, false
		}
		for !r.done() {
			id, _ := r.byte()
			size, err := r.u32()
			if err != nil {
				return nil, false
			}
			sub, err := r.bytes(size)
			if err != nil {
				return nil, false
			}
			if id != 7 {
				continue
			}
			names := map[uint32]string{}
			sr := &reader{b: sub}
			_, err = vec(sr, func(int) error {
				idx, err := sr.u32()
				if err != nil {
					return err
				}
				names[idx], err = sr.name()
				return err
			})
			return names, err == nil
		}
	}
	return nil, false
}

// addFuncType returns the index of the function type, appending it to the type section if it is not there
// (at the end, so no type index changes).
func (m *Module) addFuncType(ft FuncType) uint32 {
	for i, t := range m.types {
		if t.equal(ft) {
			return uint32(i)
		}
	}
	var payload []byte
	if s := m.section(secType); s != nil {
		r := &reader{b: s.Payload}
		n, _ := r.u32() // decoded before
		payload = append(appendULEB(nil, uint64(n)+1), s.Payload[r.pos:]...)
	} else {
		payload = appendULEB(nil, 1)
	}
	m.setSection(secType, append(payload, ft.encode()...))
	m.types = append(m.types, ft)
	return uint32(len(m.types) - 1)
}

// addLocals appends to code the local declarations of body b with n more i32 locals, returning the index of
// the first new local and the offset in b.Code where the expression starts.
func (m *Module) addLocals(code []byte, b Body, n uint32) ([]byte, uint32, int, error) {
	ft, _ := m.FuncType(b.Func)
	idx := uint64(len(ft.Params))
	r := &reader{b: b.Code[:b.Expr]}
	groups, _ := r.u32() // Decode read these declarations already
	from := r.pos
	for !r.done() {
		c, _ := r.u32()
		r.pos++ // the type
		idx += uint64(c)
	}
	if idx+uint64(n) > math.MaxUint32 || groups == math.MaxUint32 {
		return nil, 0, 0, fmt.Errorf("wasmbin: function %d: too many locals to add %d", b.Func, n)
	}
	code = append(appendULEB(code, uint64(groups)+1), b.Code[from:b.Expr]...)
	code = append(appendULEB(code, uint64(n)), byte(I32))
	return code, uint32(idx), b.Expr, nil
}
