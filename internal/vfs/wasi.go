package vfs

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// wasip1 errno numbers (WASI snapshot 1, as wasi-libc defines them).
const (
	wasiErrnoDquot = 19
	wasiErrnoIo    = 29
	wasiErrnoMfile = 33
	wasiErrnoNospc = 51
)

// quotaFuncs are the WASI functions whose failure can be a quota failure.
var quotaFuncs = []string{
	"fd_write", "fd_pwrite", "fd_allocate", "fd_filestat_set_size",
	"path_open", "path_create_directory",
}

type ctxKey struct{}

// QuotaSource is what NewContext carries: an *FS or an *OpenLimit, each of
// which remembers its last limit failure for the WASI wrappers.
type QuotaSource interface{ takeQuota() sys.Errno }

// NewContext returns a copy of ctx carrying srcs, so that the WASI functions
// exported by ExportWASI report their limit failures to the guest as ENOSPC,
// EDQUOT and EMFILE instead of EIO (the first source that recorded a limit
// failure wins). Pass it (or a context derived from it) to
// InstantiateModule / api.Function.Call for the guest that has them mounted.
func NewContext(ctx context.Context, srcs ...QuotaSource) context.Context {
	return context.WithValue(ctx, ctxKey{}, srcs)
}

// FromContext returns the first FS carried by ctx, or nil.
func FromContext(ctx context.Context) *FS {
	srcs, _ := ctx.Value(ctxKey{}).([]QuotaSource)
	for _, s := range srcs {
		if f, ok := s.(*FS); ok {
			return f
		}
	}
	return nil
}

var wasiDefs struct {
	once sync.Once
	defs map[string]api.FunctionDefinition
	err  error
}

// loadWASIDefs gets wazero's own WASI host functions by compiling its host
// module once in a throwaway runtime (its Go functions are stateless).
func loadWASIDefs() (map[string]api.FunctionDefinition, error) {
	wasiDefs.once.Do(func() {
		ctx := context.Background()
		r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		defer r.Close(ctx)
		b := r.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
		wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
		cm, err := b.Compile(ctx)
		if err != nil {
			wasiDefs.err = err
			return
		}
		wasiDefs.defs = cm.ExportedFunctions()
		for _, name := range quotaFuncs {
			d, ok := wasiDefs.defs[name]
			if !ok {
				wasiDefs.err = fmt.Errorf("wazero exports no WASI function %q", name)
				return
			}
			if _, ok := d.GoFunction().(api.GoModuleFunction); !ok {
				wasiDefs.err = fmt.Errorf("WASI function %q is a %T, not an api.GoModuleFunction", name, d.GoFunction())
				return
			}
		}
	})
	return wasiDefs.defs, wasiDefs.err
}

// ExportWASI exports wazero's wasi_snapshot_preview1 functions into b
// (normally a builder for wasi_snapshot_preview1.ModuleName), with the
// functions that can fail on a quota (fd_write, fd_pwrite, fd_allocate,
// fd_filestat_set_size, path_open, path_create_directory) wrapped: when such
// a call returns EIO and the FS in the call's context (NewContext) has just
// failed on a limit, the result becomes wasip1 ENOSPC (51), EDQUOT (19) or
// EMFILE (33), so CPython raises OSError(errno.ENOSPC/EDQUOT/EMFILE). Everything else is wazero's
// implementation unchanged. Functions exported into b afterwards override
// these, as with wasi_snapshot_preview1.NewFunctionExporter.
func ExportWASI(b wazero.HostModuleBuilder) error {
	defs, err := loadWASIDefs()
	if err != nil {
		return fmt.Errorf("vfs: export WASI: %w", err)
	}
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	for _, name := range quotaFuncs {
		d := defs[name]
		b.NewFunctionBuilder().
			WithGoModuleFunction(wrapQuota(d.GoFunction().(api.GoModuleFunction)), d.ParamTypes(), d.ResultTypes()).
			WithParameterNames(d.ParamNames()...).
			WithResultNames(d.ResultNames()...).
			WithName(name).
			Export(name)
	}
	return nil
}

func wrapQuota(orig api.GoModuleFunction) api.GoModuleFunction {
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		orig.Call(ctx, mod, stack)
		if uint32(stack[0]) != wasiErrnoIo {
			return
		}
		srcs, _ := ctx.Value(ctxKey{}).([]QuotaSource)
		for _, f := range srcs {
			switch f.takeQuota() {
			case ENOSPC:
				stack[0] = wasiErrnoNospc
			case EDQUOT:
				stack[0] = wasiErrnoDquot
			case EMFILE:
				stack[0] = wasiErrnoMfile
			default:
				continue
			}
			return
		}
	})
}

// InstantiateWASI instantiates wasi_snapshot_preview1 in r with ExportWASI's
// functions; use it instead of wasi_snapshot_preview1.Instantiate.
func InstantiateWASI(ctx context.Context, r wazero.Runtime) (api.Closer, error) {
	b := r.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	if err := ExportWASI(b); err != nil {
		return nil, err
	}
	m, err := b.Instantiate(ctx)
	if err != nil {
		return nil, fmt.Errorf("vfs: instantiate WASI: %w", err)
	}
	return m, nil
}
