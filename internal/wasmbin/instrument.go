package wasmbin

import "fmt"

// ABI names the instrumentation uses. They repeat hostfuncs/abi.go to keep this package free of
// dependencies; TestABIConstants checks that they match.
const (
	TickModule      = "wasmbox_v1"
	TickName        = "tick"
	InterruptExport = "wasmbox_interrupt"
	FuelExport      = "wasmbox_fuel"
	StackPointer    = "__stack_pointer"
	DefaultInterval = 10000
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
	Functions            int    `json:"functions"` // defined functions, the helper not included
	Loops                int    `json:"loops"`     // loops instrumented
	SizeBefore           int    `json:"size_before"`
	SizeAfter            int    `json:"size_after"`
	TickFunc             uint32 `json:"tick_func"`
	InterruptFunc        uint32 `json:"interrupt_func"`
	HelperFunc           uint32 `json:"helper_func"`
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

// Instrument applies the hard-deadline rewrite: after every loop header it inserts CheckSequence, which
// decrements the new exported mutable i32 global wasmbox_fuel (initialised to the interval) and, when it
// reaches zero, calls an appended helper function. The helper calls the import wasmbox_v1.tick () -> i32,
// calls the exported wasmbox_interrupt () if the result r is negative and uses -r, uses the interval if the
// result is zero, and stores the result in the counter. No branch depth, function or global index changes:
// the module must already import tick, since adding an import would renumber every function.
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

	// The helper function and the instrumented bodies.
	st.Functions = len(m.funcs)
	st.HelperFunc = m.numImportedFuncs + uint32(len(m.funcs))
	m.setSection(secFunction, encodeVec(append(m.funcRaw, appendULEB(nil, uint64(voidIdx)))))
	seq := CheckSequence(st.FuelGlobal, st.HelperFunc)
	bodies := make([][]byte, 0, len(m.bodies)+1)
	for _, b := range m.bodies {
		var cuts []int // offsets in b.Code after which seq goes
		err := b.Scan(func(in Instr) error {
			if in.Op == OpLoop {
				cuts = append(cuts, in.End-b.Offset)
			}
			return nil
		})
		if err != nil {
			return nil, st, err
		}
		if len(cuts) == 0 {
			bodies = append(bodies, b.raw)
			continue
		}
		st.Loops += len(cuts)
		code, prev := make([]byte, 0, len(b.Code)+len(cuts)*len(seq)), 0
		for _, c := range cuts {
			code = append(append(code, b.Code[prev:c]...), seq...)
			prev = c
		}
		code = append(code, b.Code[prev:]...)
		bodies = append(bodies, append(appendULEB(nil, uint64(len(code))), code...))
	}
	helper := helperBody(st.TickFunc, st.InterruptFunc, st.FuelGlobal, interval)
	bodies = append(bodies, append(appendULEB(nil, uint64(len(helper))), helper...))
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
