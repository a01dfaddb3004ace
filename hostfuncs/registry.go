package hostfuncs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/invopop/jsonschema"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/jsonvalid"
)

// Handler runs a tool on the host. args is a JSON object that already passed the tool's parameter schema; the
// result must be JSON (it is decoded in Python, so a dict stays a dict).
type Handler func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// Tool is one tool the sandboxed code may call.
type Tool struct {
	// Name is a Python identifier, unique in its Registry.
	Name string
	// Description becomes the Python docstring and the model's documentation.
	Description string
	// Parameters is the JSON Schema of the arguments: an object whose properties are the parameters, in the
	// order they appear (that order gives the positional order in Python). Nil means no parameters.
	Parameters json.RawMessage
	// Result is the JSON Schema of the result, when known (it types the Python return annotation).
	Result json.RawMessage
	// Effect marks the tool read-only, mutating or irreversible for governance (zero: treated as irreversible).
	Effect governance.Effect
	// Cost is the tool's cost in budget units per call.
	Cost int64
	// Handler runs the tool.
	Handler Handler

	err error // why Func could not make this tool; Register returns it
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// pythonKeywords may not be tool or parameter names.
var pythonKeywords = map[string]bool{"False": true, "None": true, "True": true, "and": true, "as": true,
	"assert": true, "async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true, "from": true,
	"global": true, "if": true, "import": true, "in": true, "is": true, "lambda": true, "nonlocal": true,
	"not": true, "or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true,
	"with": true, "yield": true}

// reserved names of the generated module: its public functions and exception classes.
var reserved = map[string]bool{"list_tools": true, "call": true, "help": true, "ToolException": true,
	"ToolDenied": true, "ApprovalDenied": true, "ApprovalTimeout": true, "BudgetExceeded": true,
	"ToolLimitExceeded": true, "ToolError": true, "InvalidToolArguments": true, "UnknownTool": true}

// ErrInvalidTool reports a tool that cannot be registered; the message names the problem.
var ErrInvalidTool = errors.New("hostfuncs: invalid tool")

// Registry holds the tools of a sandbox. It is safe for concurrent use; register tools before handing it to a
// Sandbox (the Python module is generated when the Sandbox is created).
type Registry struct {
	mu    sync.RWMutex // orders Register; order is guarded by it
	order []string
	// byName holds the entries by name, read without the lock by the lookups of every call: a registry only
	// grows and an entry never changes, so Register replaces the map with a larger copy.
	byName atomic.Pointer[map[string]*entry]
}

type entry struct {
	Tool
	params []param
	schema *generalSchema
	fast   *fastSchema // the same schema checked in one pass, when it uses only the structural keywords
}

type param struct {
	Name     string
	Schema   map[string]any
	Required bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Register adds a tool after checking its name, schema and handler.
func (r *Registry) Register(t Tool) error {
	if t.err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidTool, t.Name, t.err)
	}
	if !identRE.MatchString(t.Name) || pythonKeywords[t.Name] || reserved[t.Name] || t.Name[0] == '_' {
		return fmt.Errorf("%w: name %q is not a usable Python identifier", ErrInvalidTool, t.Name)
	}
	if t.Handler == nil {
		return fmt.Errorf("%w: %s has no handler", ErrInvalidTool, t.Name)
	}
	if len(t.Parameters) == 0 {
		t.Parameters = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	}
	params, err := parseParams(t.Parameters)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidTool, t.Name, err)
	}
	sch, err := compileGeneral(t.Parameters)
	if err != nil {
		return fmt.Errorf("%w: %s: parameter schema: %w", ErrInvalidTool, t.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entry(t.Name) != nil {
		return fmt.Errorf("%w: %s is registered twice", ErrInvalidTool, t.Name)
	}
	byName := map[string]*entry{t.Name: {Tool: t, params: params, schema: sch, fast: compileFast(t.Parameters)}}
	if old := r.byName.Load(); old != nil {
		maps.Copy(byName, *old)
	}
	r.byName.Store(&byName)
	r.order = append(r.order, t.Name)
	return nil
}

// MustRegister is Register that panics on error, for static tool sets.
func (r *Registry) MustRegister(ts ...Tool) *Registry {
	for _, t := range ts {
		if err := r.Register(t); err != nil {
			panic(err)
		}
	}
	return r
}

// Tools returns the registered tools in registration order.
func (r *Registry) Tools() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.entry(n).Tool)
	}
	return out
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	e := r.entry(name)
	if e == nil {
		return Tool{}, false
	}
	return e.Tool, true
}

func (r *Registry) entry(name string) *entry {
	if m := r.byName.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// entryBytes is entry for a name as the guest sends it, without converting it to a string.
func (r *Registry) entryBytes(name []byte) *entry {
	if m := r.byName.Load(); m != nil {
		return (*m)[string(name)]
	}
	return nil
}

// Names lists the tool names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.order...)
}

// Validate checks args (a JSON object) against the tool's parameter schema.
func (r *Registry) Validate(name string, args json.RawMessage) error {
	e := r.entry(name)
	if e == nil {
		return fmt.Errorf("hostfuncs: unknown tool %q", name)
	}
	if !jsonvalid.Valid(args) {
		return fmt.Errorf("hostfuncs: %s: arguments are not JSON", name)
	}
	return e.validJSON(args)
}

// validJSON checks args, which are valid JSON (the caller checked), against the tool's parameter schema.
func (e *entry) validJSON(args json.RawMessage) error {
	var err error
	if e.fast != nil {
		err = e.fast.validate(args)
	} else {
		err = e.schema.validate(args)
	}
	if err != nil {
		return fmt.Errorf("hostfuncs: %s: invalid arguments: %w", e.Name, err)
	}
	return nil
}

// parseParams reads the properties of an object schema in document order.
func parseParams(schema json.RawMessage) ([]param, error) {
	var top struct {
		Type       any             `json:"type"`
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, fmt.Errorf("parameter schema: %w", err)
	}
	if top.Type != nil && top.Type != "object" {
		return nil, fmt.Errorf("parameter schema must be an object schema, has type %v", top.Type)
	}
	required := map[string]bool{}
	for _, n := range top.Required {
		required[n] = true
	}
	var params []param
	if len(top.Properties) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(top.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("parameter schema: properties must be an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parameter schema: %w", err)
		}
		name := tok.(string)
		var raw any
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("parameter schema: property %s: %w", name, err)
		}
		var s map[string]any
		switch v := raw.(type) {
		case map[string]any:
			s = v
		case bool: // JSON Schema's boolean forms: true accepts any value (Func derives it for an `any` field)
			if s = map[string]any{}; !v {
				s["not"] = map[string]any{}
			}
		default:
			return nil, fmt.Errorf("parameter schema: property %s: a schema is an object or a boolean, not %s", name, bytes.TrimSpace([]byte(fmt.Sprint(raw))))
		}
		if !identRE.MatchString(name) || pythonKeywords[name] || name[0] == '_' {
			return nil, fmt.Errorf("parameter %q is not a usable Python identifier", name)
		}
		params = append(params, param{Name: name, Schema: s, Required: required[name]})
	}
	// Python needs required parameters before optional ones; keep document order within each group.
	sort.SliceStable(params, func(i, j int) bool { return params[i].Required && !params[j].Required })
	return params, nil
}

// Func makes a Tool from a typed Go function. The parameter schema is derived from In (a struct: its json tags
// name the parameters, `jsonschema:"required"` / `jsonschema:"description=..."` tags refine them; fields without
// omitempty are required); the result is JSON-encoded Out.
//
// An interface type (such as any) as In accepts any JSON object; as Out it leaves the result untyped. A type
// that JSON cannot carry (channels, functions, complex numbers, unsafe pointers, also inside In or Out) makes a
// Tool that Register refuses with ErrInvalidTool; Func itself never panics.
func Func[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) Tool {
	params, perr := typeSchema(reflect.TypeFor[In](), true)
	res, rerr := typeSchema(reflect.TypeFor[Out](), false)
	t := Tool{
		Name:        name,
		Description: description,
		Parameters:  params,
		Result:      res,
		err:         errors.Join(perr, rerr),
	}
	t.Handler = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("decoding arguments: %w", err)
		}
		o, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(o)
	}
	return t
}

// typeSchema returns the JSON Schema of t: for a parameter type (input) an object schema, with an interface
// type accepting any object; for a result type, nil for an interface type.
func typeSchema(t reflect.Type, input bool) (_ json.RawMessage, err error) {
	what := "result type"
	if input {
		what = "parameter type"
	}
	if bad := unencodable(t, map[reflect.Type]bool{}); bad != nil {
		return nil, fmt.Errorf("%s %v cannot be carried by JSON (it holds a %v)", what, t, bad)
	}
	if t.Kind() == reflect.Interface {
		if input {
			return json.RawMessage(`{"type":"object"}`), nil
		}
		return nil, nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s %v: no JSON Schema: %v", what, t, p)
		}
	}()
	ref := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	sch := ref.ReflectFromType(t)
	if input {
		sch.Version = ""
	}
	b, err := json.Marshal(sch)
	if err != nil {
		return nil, fmt.Errorf("%s %v: %w", what, t, err)
	}
	return b, nil
}

// unencodable returns the first type reachable from t (through pointers, slices, arrays, maps and exported
// struct fields) that encoding/json cannot encode, or nil.
func unencodable(t reflect.Type, seen map[reflect.Type]bool) reflect.Type {
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return t
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return unencodable(t.Elem(), seen)
	case reflect.Map:
		if bad := unencodable(t.Key(), seen); bad != nil {
			return bad
		}
		return unencodable(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if bad := unencodable(f.Type, seen); bad != nil {
				return bad
			}
		}
	}
	return nil
}

// StringTool is the shape of langchaingo's tools.Tool (string in, string out); any langchaingo tool satisfies it
// without this package importing langchaingo.
type StringTool interface {
	Name() string
	Description() string
	Call(ctx context.Context, input string) (string, error)
}

// FromLangchain adapts a langchaingo tool: Python sees name(input: str) -> str.
func FromLangchain(t StringTool, effect governance.Effect) Tool {
	return Tool{
		Name:        t.Name(),
		Description: t.Description(),
		Parameters:  json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"the tool's input"}},"required":["input"],"additionalProperties":false}`),
		Result:      json.RawMessage(`{"type":"string"}`),
		Effect:      effect,
		Handler: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct {
				Input string `json:"input"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			out, err := t.Call(ctx, in.Input)
			if err != nil {
				return nil, err
			}
			return json.Marshal(out)
		},
	}
}
