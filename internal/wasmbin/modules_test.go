package wasmbin

// Test modules.

// allOpsBody is the body of "all" in kitchenSink: one or more instructions of every supported family. It runs
// without trapping. Function indices: 0 env.f, 1 wasmbox_v1.tick, 2 all, 3 seven, 4 wasmbox_interrupt.
var allOpsBody = body(locals(I32, I64, F32, F64, FuncRef),
	// control: block, loop, if/else, br, br_if, br_table
	0x02, 0x40, // block
	0x03, 0x40, //   loop
	0x41, 0x01, 0x0d, 0x01, // i32.const 1; br_if 1 (leaves the block)
	0x20, 0x00, 0x04, 0x40, // local.get 0; if
	0x01,       // nop
	0x05,       // else
	0x0c, 0x01, // br 1 (the loop)
	0x0b,                                     // end
	0x41, 0x00, 0x0e, 0x02, 0x00, 0x01, 0x01, // br_table 0 1 (default 1)
	0x0b, 0x0b, // end loop, end block
	// multi-value block type (type index 1: () -> i32 i32), and a loop with one
	0x02, 0x01, 0x41, 0x07, 0x20, 0x00, 0x0b, 0x1a, 0x1a,
	0x03, 0x01, 0x41, 0x07, 0x20, 0x00, 0x0b, 0x1a, 0x1a,
	// calls
	0x10, 0x03, 0x1a, // call seven
	0x10, 0x00, 0x1a, // call env.f
	0x41, 0x01, 0x11, 0x02, 0x00, 0x1a, // call_indirect (type 2) table 0
	0x41, 0x00, 0x11, 0x02, 0x01, 0x1a, // call_indirect (type 2) table 1
	// parametric
	0x41, 0x01, 0x41, 0x02, 0x41, 0x00, 0x1b, 0x1a, // select
	0x42, 0x01, 0x42, 0x02, 0x41, 0x00, 0x1c, 0x01, 0x7e, 0x1a, // select (result i64)
	// variables
	0x20, 0x00, 0x21, 0x00, 0x20, 0x00, 0x22, 0x00, 0x1a, // local.get/set/tee
	0x23, 0x01, 0x24, 0x01, 0x23, 0x00, 0x1a, // global.get/set
	// memory
	0x41, 0x00, 0x28, 0x02, 0x00, 0x1a, // i32.load
	0x41, 0x00, 0x42, 0x00, 0x37, 0x03, 0x08, // i64.store offset=8
	0x41, 0x00, 0x2d, 0x00, 0x00, 0x1a, // i32.load8_u
	0x41, 0x00, 0x43, 0x00, 0x00, 0x00, 0x00, 0x38, 0x02, 0x04, // f32.store
	0x3f, 0x00, 0x1a, // memory.size
	0x41, 0x00, 0x40, 0x00, 0x1a, // memory.grow
	// numeric
	0x43, 0x00, 0x00, 0x80, 0x3f, 0x21, 0x02, // f32.const 1
	0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x21, 0x03, // f64.const 1
	0x42, 0x7f, 0x21, 0x01, // i64.const -1
	0x41, 0xc0, 0xbb, 0x78, 0x41, 0x03, 0x6a, 0x1a, // i32.const -123456; i32.add
	0x20, 0x01, 0x79, 0x21, 0x01, // i64.clz
	0x20, 0x02, 0x20, 0x02, 0x92, 0x21, 0x02, // f32.add
	0x20, 0x03, 0x9f, 0x21, 0x03, // f64.sqrt
	0x20, 0x03, 0xb0, 0x21, 0x01, // i64.trunc_f64_s
	0x20, 0x01, 0xbf, 0x21, 0x03, // f64.reinterpret_i64
	// sign extension
	0x20, 0x00, 0xc0, 0x1a, 0x20, 0x00, 0xc1, 0x1a, // i32.extend8_s, i32.extend16_s
	0x20, 0x01, 0xc2, 0xc3, 0xc4, 0x21, 0x01, // i64.extend8_s, 16_s, 32_s
	// reference types
	0xd0, 0x70, 0x21, 0x04, // ref.null func
	0x20, 0x04, 0xd1, 0x1a, // ref.is_null
	0xd2, 0x03, 0x21, 0x04, // ref.func 3
	0x41, 0x00, 0x25, 0x00, 0x21, 0x04, // table.get 0
	0x41, 0x00, 0x20, 0x04, 0x26, 0x00, // table.set 0
	0xfc, 0x10, 0x00, 0x1a, // table.size 0
	0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x1a, // table.grow 0
	0x41, 0x00, 0xd0, 0x70, 0x41, 0x00, 0xfc, 0x11, 0x00, // table.fill 0
	// non-trapping float-to-int
	0x20, 0x02, 0xfc, 0x00, 0x1a, 0x20, 0x02, 0xfc, 0x01, 0x1a,
	0x20, 0x03, 0xfc, 0x02, 0x1a, 0x20, 0x03, 0xfc, 0x03, 0x1a,
	0x20, 0x02, 0xfc, 0x04, 0x21, 0x01, 0x20, 0x02, 0xfc, 0x05, 0x21, 0x01,
	0x20, 0x03, 0xfc, 0x06, 0x21, 0x01, 0x20, 0x03, 0xfc, 0x07, 0x21, 0x01,
	// bulk memory and table operations
	0x41, 0x20, 0x41, 0x00, 0x41, 0x03, 0xfc, 0x08, 0x00, 0x00, // memory.init data 0
	0xfc, 0x09, 0x00, // data.drop 0
	0x41, 0x10, 0x41, 0x00, 0x41, 0x04, 0xfc, 0x0a, 0x00, 0x00, // memory.copy
	0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0b, 0x00, // memory.fill
	0x41, 0x00, 0x41, 0x00, 0x41, 0x01, 0xfc, 0x0c, 0x01, 0x00, // table.init elem 1 table 0
	0xfc, 0x0d, 0x01, // elem.drop 1
	0x41, 0x00, 0x41, 0x01, 0x41, 0x01, 0xfc, 0x0e, 0x00, 0x01, // table.copy 0 1
	0x0f, 0x00, // return, unreachable
	0x0b)

// kitchenSink has every section, all element segment forms but 7 (binaryen 108 misreads it: see envModule),
// all data segment forms, custom sections in several places and
// padded LEBs where linkers write them. It imports env.f () -> i32, env.g (global i32) and wasmbox_v1.tick.
func kitchenSink() []byte {
	return module(
		custom("first", []byte("x")),
		sec(secType, vecOf(tVoid, functype(nil, []byte{byte(I32), byte(I32)}), tI32)),
		sec(secImport, vecOf(importFunc("env", "f", 2), importFunc(TickModule, TickName, 2),
			cat(str("env"), str("g"), []byte{byte(KindGlobal), byte(I32), 0}))),
		sec(secFunction, vecOf(u(0), u(2), u(0))),
		sec(secTable, vecOf([]byte{byte(FuncRef), 0, 2}, []byte{byte(FuncRef), 1, 2, 4})),
		sec(secMemory, vecOf([]byte{1, 1, 2})),
		sec(secGlobal, vecOf(globalI32(true, 0), []byte{byte(I64), 0, 0x42, 0x7b, 0x0b},
			[]byte{byte(I32), 1, 0x23, 0x00, 0x0b})),
		sec(secExport, vecOf(export("all", KindFunc, 2), export("memory", KindMemory, 0),
			export("g", KindGlobal, 1), export("t", KindTable, 0), export(InterruptExport, KindFunc, 4))),
		sec(secStart, u(4)),
		custom("middle"),
		sec(secElement, vecOf(
			[]byte{0, 0x41, 0, 0x0b, 2, 2, 3},                   // active, table 0, func indices
			[]byte{1, 0, 1, 3},                                  // passive, func indices
			[]byte{2, 1, 0x41, 0, 0x0b, 0, 1, 3},                // active, table 1, func indices
			[]byte{3, 0, 1, 2},                                  // declarative, func indices
			[]byte{4, 0x41, 1, 0x0b, 1, 0xd2, 3, 0x0b},          // active, table 0, expressions
			[]byte{5, 0x70, 2, 0xd2, 2, 0x0b, 0xd0, 0x70, 0x0b}, // passive, expressions
			[]byte{6, 1, 0x41, 1, 0x0b, 0x70, 1, 0xd2, 3, 0x0b}, // active, table 1, expressions
		)),
		sec(secDataCount, u(3)),
		// the code section with a padded size, like wasm-ld's
		cat([]byte{secCode}, padded(uint32(len(kitchenCode()))), kitchenCode()),
		sec(secData, vecOf(
			cat([]byte{1}, str("abc")),                      // passive
			cat([]byte{0, 0x41, 0, 0x0b}, str("hi")),        // active
			cat([]byte{2, 0, 0x41, 0x10, 0x0b}, str("xyz")), // active, explicit memory
		)),
		custom("name", subsection(1, vecOf(cat(u(2), str("all"))))),
		custom("producers", []byte{0}), // not empty: wazero fails on an empty custom section at the end
	)
}

func kitchenCode() []byte {
	return vecOf(allOpsBody,
		body(noLocals, 0x41, 0x07, 0x0b), // seven
		// wasmbox_interrupt, with a padded call index as in relocatable output: call seven; drop
		body(noLocals, cat([]byte{0x10}, padded(3), []byte{0x1a, 0x0b})...),
	)
}

// envModule satisfies kitchenSink's env imports. It has an element segment of form 7 (declarative,
// expressions) and a block with a parameter (two things binaryen 108 cannot read).
func envModule() []byte {
	return module(
		sec(secType, vecOf(tI32, tI32I2)),
		sec(secFunction, vecOf(u(0))),
		sec(secGlobal, vecOf(globalI32(false, 5))),
		sec(secExport, vecOf(export("f", KindFunc, 0), export("g", KindGlobal, 0))),
		sec(secElement, vecOf([]byte{7, 0x70, 1, 0xd2, 0, 0x0b})),
		// i32.const 42; block (i32 -> i32 i32) i32.const 1 end; drop; ref.func 0; drop
		sec(secCode, vecOf(body(noLocals, 0x41, 0x2a, 0x02, 0x01, 0x41, 0x01, 0x0b, 0x1a, 0xd2, 0x00, 0x1a, 0x0b))),
	)
}

// loopModule is the instrumentation test module. Functions: 0 wasmbox_v1.tick, 1 wasmbox_interrupt (counts
// calls in the exported global "interrupts"), 2 count(n) (a do-while loop running n times, returns n), 3 spin
// (an endless loop), 4 nested(n) (nested loops, returns sum(i*(i+1)/2 for i < n); with paramLoop the inner
// one has a type-index block type with a parameter), 5 noloop. Globals: 0 interrupts, 1 the stack pointer (named so in the name
// section unless names is false), 2 another unexported mutable i32.
func loopModule(names, paramLoop bool) []byte {
	inner := []byte{ // acc += j; j += 1; loop while j <= i
		0x03, 0x40, 0x20, 0x03, 0x20, 0x02, 0x6a, 0x21, 0x03,
		0x20, 0x02, 0x41, 0x01, 0x6a, 0x22, 0x02, 0x20, 0x01, 0x4d, 0x0d, 0x00, 0x0b}
	if paramLoop { // the same with acc on the stack, as the parameter of a loop (type 2: i32 -> i32)
		inner = []byte{0x20, 0x03, 0x03, 0x02, 0x20, 0x02, 0x6a,
			0x20, 0x02, 0x41, 0x01, 0x6a, 0x22, 0x02, 0x20, 0x01, 0x4d, 0x0d, 0x00, 0x0b, 0x21, 0x03}
	}
	var name []byte
	if names {
		name = custom("name",
			subsection(1, vecOf(cat(u(4), str("nested")))),     // function names
			subsection(7, vecOf(cat(u(1), str(StackPointer))))) // global names
	}
	return module(
		sec(secType, vecOf(tI32, tVoid, tI32I)),
		sec(secImport, vecOf(importFunc(TickModule, TickName, 0))),
		sec(secFunction, vecOf(u(1), u(2), u(1), u(2), u(1))),
		sec(secMemory, vecOf([]byte{0, 1})),
		sec(secGlobal, vecOf(globalI32(true, 0), globalI32(true, 65536), globalI32(true, 7))),
		sec(secExport, vecOf(export(InterruptExport, KindFunc, 1), export("count", KindFunc, 2),
			export("spin", KindFunc, 3), export("nested", KindFunc, 4), export("noloop", KindFunc, 5),
			export("interrupts", KindGlobal, 0), export("memory", KindMemory, 0))),
		sec(secCode, vecOf(
			body(noLocals, 0x23, 0x00, 0x41, 0x01, 0x6a, 0x24, 0x00, 0x0b),
			body(locals(I32),
				0x03, 0x40, // loop
				0x20, 0x01, 0x41, 0x01, 0x6a, 0x22, 0x01, // i += 1
				0x20, 0x00, 0x49, 0x0d, 0x00, // br_if 0 (i < n)
				0x0b, 0x20, 0x01, 0x0b),
			body(noLocals, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b),
			body(locals(I32, I32, I32), cat( // n=0, i=1, j=2, acc=3
				[]byte{0x02, 0x40, 0x03, 0x40, // block loop
					0x20, 0x01, 0x20, 0x00, 0x4f, 0x0d, 0x01, // i >= n: br_if 1
					0x41, 0x00, 0x21, 0x02}, // j = 0
				inner,
				[]byte{0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // i += 1
					0x0c, 0x00, // br 0
					0x0b, 0x0b, 0x20, 0x03, 0x0b})...),
			body(noLocals, 0x0b),
		)),
		name,
	)
}

// snapModule is the snapshot test module: a memory (1..10 pages) with "*" at 16 from a data segment,
// exported globals __stack_pointer (i32), g64 (i64), gf (f64), neg (i32), an unexported one, and the
// functions _initialize and peek () -> i32 (the byte at 16).
func snapModule() []byte {
	return module(
		sec(secType, vecOf(tVoid, tI32)),
		sec(secFunction, vecOf(u(0), u(1))),
		sec(secMemory, vecOf([]byte{1, 1, 10})),
		sec(secGlobal, vecOf(globalI32(true, 65536), []byte{byte(I64), 1, 0x42, 0, 0x0b},
			[]byte{byte(F64), 1, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b}, globalI32(true, 1), globalI32(false, 3))),
		sec(secExport, vecOf(export("memory", KindMemory, 0), export(StackPointer, KindGlobal, 0),
			export("g64", KindGlobal, 1), export("gf", KindGlobal, 2), export("neg", KindGlobal, 3),
			export("_initialize", KindFunc, 0), export("peek", KindFunc, 1))),
		sec(secDataCount, u(1)),
		sec(secCode, vecOf(body(noLocals, 0x0b), body(noLocals, 0x41, 0x10, 0x2d, 0x00, 0x00, 0x0b))),
		sec(secData, vecOf(cat([]byte{0, 0x41, 0x10, 0x0b}, str("*")))),
	)
}

// bulkPages is the memory size of bulkModule in most tests: 10 MiB, room for several chunks.
const bulkPages = 160

// bulkModule is the bulk memory test module. Functions: 0 wasmbox_v1.tick, 1 wasmbox_interrupt (counts calls in
// the exported global "interrupts"), 2 copy(dst, src, n) (one memory.copy), 3 fill(dst, value, n) (one
// memory.fill), 4 spin(n) (an endless loop copying n bytes from 0 to n), 5 short() (copies 255 bytes, then 256,
// from 0 to 1000, with constant lengths). Memory: pages, fixed.
func bulkModule(pages uint64) []byte {
	t3 := functype([]byte{byte(I32), byte(I32), byte(I32)}, nil)
	return module(
		sec(secType, vecOf(tI32, tVoid, t3, functype(i32, nil))),
		sec(secImport, vecOf(importFunc(TickModule, TickName, 0))),
		sec(secFunction, vecOf(u(1), u(2), u(2), u(3), u(1))),
		sec(secMemory, vecOf(cat([]byte{1}, u(pages), u(pages)))),
		sec(secGlobal, vecOf(globalI32(true, 0))),
		sec(secExport, vecOf(export(InterruptExport, KindFunc, 1), export("copy", KindFunc, 2),
			export("fill", KindFunc, 3), export("spin", KindFunc, 4), export("short", KindFunc, 5),
			export("interrupts", KindGlobal, 0),
			export("memory", KindMemory, 0))),
		sec(secCode, vecOf(
			body(noLocals, 0x23, 0x00, 0x41, 0x01, 0x6a, 0x24, 0x00, 0x0b),
			body(noLocals, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0xfc, 0x0a, 0x00, 0x00, 0x0b),
			body(noLocals, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0xfc, 0x0b, 0x00, 0x0b),
			// loop  local.get 0; i32.const 0; local.get 0; memory.copy; br 0  end
			body(noLocals, 0x03, 0x40, 0x20, 0x00, 0x41, 0x00, 0x20, 0x00, 0xfc, 0x0a, 0x00, 0x00, 0x0c, 0x00, 0x0b, 0x0b),
			body(locals(I64), 0x41, 0xe8, 0x07, 0x41, 0x00, 0x41, 0xff, 0x01, 0xfc, 0x0a, 0x00, 0x00,
				0x41, 0xe8, 0x07, 0x41, 0x00, 0x41, 0x80, 0x02, 0xfc, 0x0a, 0x00, 0x00, 0x0b),
		)),
	)
}
