package wasmbin

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
)

// RewriteForSnapshot rewrites a module to start from a captured memory image:
//   - it removes the data and data count sections (an error names the first function that uses memory.init
//     or data.drop);
//   - it sets the minimum size of the module's single memory, defined or imported, to memoryMinPages
//     (0 keeps it);
//   - it replaces the initialisers of the exported globals named in globals (export name → value, the raw
//     bits for floats) with constants;
//   - it removes the exports named in dropExports (e.g. "_initialize");
//   - when an instance of the result can be put back in its starting state from outside (ResetGlobals), it adds
//     the custom section ResetSection that says how.
//
// Every other part stays byte-identical.
func RewriteForSnapshot(wasm []byte, globals map[string]uint64, memoryMinPages uint32,
	dropExports []string) ([]byte, error) {
	m, err := Decode(wasm)
	if err != nil {
		return nil, err
	}
	tableWrites := false
	err = m.ScanCode(func(fn uint32, in Instr) error {
		switch in.Op {
		case OpTableSet, OpTableGrow, OpTableFill, OpTableCopy, OpTableInit, OpElemDrop:
			tableWrites = true
		}
		if in.Op == OpMemoryInit || in.Op == OpDataDrop {
			name := map[Opcode]string{OpMemoryInit: "memory.init", OpDataDrop: "data.drop"}[in.Op]
			return fmt.Errorf("wasmbin: function %d uses %s at offset %#x: the data section cannot be removed",
				fn, name, in.Offset)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.removeSection(secData)
	m.removeSection(secDataCount)

	if memoryMinPages != 0 {
		if err := m.setMemoryMin(memoryMinPages); err != nil {
			return nil, err
		}
	}

	// Globals, in index order so that errors are deterministic.
	names := make([]string, 0, len(globals))
	for name := range globals {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) > 0 {
		raws := make([][]byte, len(m.globals))
		for i, g := range m.globals {
			raws[i] = g.raw
		}
		for _, name := range names {
			e, ok := m.Export(name)
			if !ok || e.Kind != KindGlobal {
				return nil, fmt.Errorf("wasmbin: no exported global %q", name)
			}
			i := int(e.Index) - int(m.numImportedGlobals)
			if i < 0 || i >= len(m.globals) {
				return nil, fmt.Errorf("wasmbin: exported global %q is imported or out of range", name)
			}
			g := m.globals[i]
			init, err := constExpr(g.Type, globals[name])
			if err != nil {
				return nil, fmt.Errorf("wasmbin: global %q: %w", name, bare{err})
			}
			raws[i] = append(append([]byte(nil), g.raw[:len(g.raw)-len(g.Init)]...), init...)
		}
		m.setSection(secGlobal, encodeVec(raws))
	}

	if len(dropExports) > 0 {
		drop := map[string]bool{}
		for _, name := range dropExports {
			if _, ok := m.Export(name); !ok {
				return nil, fmt.Errorf("wasmbin: no export %q to drop", name)
			}
			drop[name] = true
		}
		var raws [][]byte
		for _, e := range m.exports {
			if !drop[e.Name] {
				raws = append(raws, e.raw)
			}
		}
		m.setSection(secExport, encodeVec(raws))
	}
	if names, ok := m.resettable(tableWrites, dropExports); ok {
		payload := appendName(nil, ResetSection)
		payload = appendULEB(payload, uint64(len(names)))
		for _, n := range names {
			payload = appendName(payload, n)
		}
		m.Sections = append(m.Sections, &Section{ID: secCustom, Name: ResetSection, Payload: payload})
	}
	return m.Encode(), nil
}

// ResetSection names the custom section RewriteForSnapshot adds when an instance of the rewritten module can be
// returned to the state it had when instantiated without instantiating again. Its payload is a vector of
// names: the exports of every mutable global. What it asserts, checked over the whole module when it is
// written:
//   - linear memory is the module's own single memory (not imported): resetting it to the image it was
//     allocated from resets it entirely, and there is no data section to apply;
//   - no instruction can change a table (table.set, table.grow, table.fill, table.copy, table.init, elem.drop)
//     and no table is imported, so tables keep what instantiation put in them;
//   - every mutable global is the module's own and exported under the listed names, so each can be set back
//     to its initial value; immutable globals cannot change.
//
// Linear memory, tables and globals are all the state a WebAssembly instance has.
const ResetSection = "wasmbox.reset"

// resettable reports whether the module (after the rewrite) qualifies for ResetSection, and the export names of
// its mutable globals.
func (m *Module) resettable(tableWrites bool, dropped []string) ([]string, bool) {
	if tableWrites || len(m.memories) != 1 {
		return nil, false
	}
	for _, im := range m.imports {
		if im.Kind == KindMemory || im.Kind == KindTable || (im.Kind == KindGlobal && im.Global.Mutable) {
			return nil, false
		}
	}
	gone := map[string]bool{}
	for _, n := range dropped {
		gone[n] = true
	}
	var names []string
	for _, g := range m.globals {
		if !g.Mutable {
			continue
		}
		name := ""
		for _, e := range m.exports {
			if e.Kind == KindGlobal && e.Index == g.Index && !gone[e.Name] {
				name = e.Name
				break
			}
		}
		if name == "" {
			return nil, false
		}
		names = append(names, name)
	}
	return names, true
}

// ResetGlobals reads the section ResetSection of a module: the export names of its mutable globals, and
// whether the section is there. It reads only the section headers up to that section, not the module.
func ResetGlobals(wasm []byte) ([]string, bool) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:8], header) {
		return nil, false
	}
	r := &reader{b: wasm, pos: 8}
	for !r.done() {
		id, err := r.byte()
		if err != nil {
			return nil, false
		}
		size, err := r.u32()
		if err != nil {
			return nil, false
		}
		payload, err := r.bytes(size)
		if err != nil {
			return nil, false
		}
		if id != secCustom {
			continue
		}
		sr := &reader{b: payload}
		if name, err := sr.name(); err != nil || name != ResetSection {
			continue
		}
		n, err := sr.u32()
		if err != nil || uint64(n) > uint64(len(payload)) {
			return nil, false
		}
		names := make([]string, 0, n)
		for range n {
			name, err := sr.name()
			if err != nil {
				return nil, false
			}
			names = append(names, name)
		}
		if !sr.done() {
			return nil, false
		}
		return names, true
	}
	return nil, false
}

func (m *Module) setMemoryMin(pages uint32) error {
	set := func(l Limits) (Limits, error) {
		if l.HasMax && pages > l.Max {
			return l, fmt.Errorf("wasmbin: memory min %d pages above the maximum %d", pages, l.Max)
		}
		if pages > 65536 {
			return l, fmt.Errorf("wasmbin: memory min %d pages above 4 GiB", pages)
		}
		l.Min = pages
		return l, nil
	}
	var memImports []int
	for i, im := range m.imports {
		if im.Kind == KindMemory {
			memImports = append(memImports, i)
		}
	}
	switch {
	case len(memImports)+len(m.memories) != 1:
		return fmt.Errorf("wasmbin: the module has %d memories, want 1", len(memImports)+len(m.memories))
	case len(m.memories) == 1:
		l, err := set(m.memories[0])
		if err != nil {
			return err
		}
		m.setSection(secMemory, encodeVec([][]byte{l.encode(nil)}))
	default:
		raws := make([][]byte, len(m.imports))
		for i, im := range m.imports {
			raws[i] = im.raw
		}
		im := m.imports[memImports[0]]
		l, err := set(im.Limits)
		if err != nil {
			return err
		}
		raws[memImports[0]] = l.encode(append([]byte(nil), im.raw[:im.descAt+1]...))
		m.setSection(secImport, encodeVec(raws))
	}
	return nil
}

// constExpr returns a constant expression of the type with the value v (raw bits for floats).
func constExpr(t ValType, v uint64) ([]byte, error) {
	switch t {
	case I32:
		return append(appendSLEB([]byte{0x41}, int64(int32(uint32(v)))), 0x0b), nil
	case I64:
		return append(appendSLEB([]byte{0x42}, int64(v)), 0x0b), nil
	case F32:
		return append(binary.LittleEndian.AppendUint32([]byte{0x43}, uint32(v)), 0x0b), nil
	case F64:
		return append(binary.LittleEndian.AppendUint64([]byte{0x44}, v), 0x0b), nil
	}
	return nil, fmt.Errorf("wasmbin: cannot set a %s global", t)
}
