package wasmtime

import (
	"fmt"

	"github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/wasmbox/wasmbox/internal/engine"
)

// wasiENosys is wasip1's ENOSYS, returned when a WASI function is called with no instance behind it.
const wasiENosys = 52

// defineWASI defines wasi_snapshot_preview1 in l: the engine package's functions, and proc_exit.
func defineWASI(l *wasmtime.Linker) error {
	for _, d := range engine.WASIFunctions() {
		params := make([]*wasmtime.ValType, len(d.Params))
		for k, c := range d.Params {
			params[k] = kindI32
			if c == 'I' {
				params[k] = kindI64
			}
		}
		call := d.Call
		err := l.FuncNew(engine.WASIModule, d.Name, wasmtime.NewFuncType(params, valTypes(kindI32)),
			func(c *wasmtime.Caller, a []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
				inst := callerInstance(c)
				if inst == nil || inst.wasi == nil { // no instance, or one idle between Recycle and Reuse
					return []wasmtime.Val{wasmtime.ValI32(wasiENosys)}, nil
				}
				var buf [9]uint64 // the most parameters of a WASI function (path_open)
				args := buf[:0]
				for _, v := range a {
					if v.Kind() == wasmtime.KindI64 {
						args = append(args, uint64(v.I64()))
					} else {
						args = append(args, uint64(uint32(v.I32())))
					}
				}
				return []wasmtime.Val{wasmtime.ValI32(int32(call(inst.wasi, inst.callerMemory(c), args)))}, nil
			})
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	// proc_exit ends the run with a trap; Instance.Call turns it into an ExitError.
	return l.FuncNew(engine.WASIModule, engine.WASIProcExit, wasmtime.NewFuncType(valTypes(kindI32), nil),
		func(c *wasmtime.Caller, a []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
			if inst := callerInstance(c); inst != nil {
				inst.exited, inst.exitCode = true, uint32(a[0].I32())
			}
			return nil, wasmtime.NewTrap("wasmbox: proc_exit")
		})
}

// wasiFunctionNames lists the wasi_snapshot_preview1 functions the wasmtime engine provides.
func wasiFunctionNames() []string {
	names := []string{engine.WASIProcExit}
	for _, d := range engine.WASIFunctions() {
		names = append(names, d.Name)
	}
	return names
}
