package hostfuncs

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// A schema's cost. The general validator checks every subschema that applies to a value: allOf, anyOf, oneOf,
// not, if/then/else and $ref apply theirs to the same value, properties and items to its members. A schema of a
// kilobyte can nest these so that one value meets exponentially many subschemas: 24 levels of
// {"anyOf":[{"$ref":"#/$defs/next"},{"$ref":"#/$defs/next"}]} apply 2^24 to an argument that matches no branch,
// minutes of host CPU inside one tool call, where no deadline reaches. The same happens across levels, when
// each branch names the same property. checkCost computes, for every path into the arguments, how many
// subschemas apply to the value at its end, and refuses a schema where that can exceed maxSchemaFan: the
// validation of any arguments then costs at most maxSchemaFan subschemas per value.
const (
	// maxSchemaFan bounds the subschemas that apply to one value of the arguments.
	maxSchemaFan = 4096
	// maxCostSteps bounds the analysis itself; a schema that needs more is refused as too complex.
	maxCostSteps = 1 << 20
)

// costGraph is a schema's subschemas, named by JSON pointer, with the keywords that lead from one to the next.
type costGraph struct {
	root  any
	steps int
	topo  map[string][]string // in-place successors, memoised
}

// inPlaceEdges are the subschemas that apply to the same value as the one at ptr.
func (g *costGraph) inPlaceEdges(ptr string) []string {
	if e, ok := g.topo[ptr]; ok {
		return e
	}
	var out []string
	obj, _ := lookup(g.root, ptr).(map[string]any)
	if ref, ok := obj["$ref"].(string); ok {
		if t, err := pointerTarget(g.root, ref); err == nil {
			out = append(out, t)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !inPlace[k] {
			continue
		}
		switch sub := obj[k].(type) {
		case []any:
			if k == "dependencies" {
				continue
			}
			for i := range sub {
				out = append(out, ptr+"/"+escapeToken(k)+"/"+strconv.Itoa(i))
			}
		case map[string]any:
			if k == "dependentSchemas" || k == "dependencies" {
				for _, name := range slices.Sorted(maps.Keys(sub)) {
					if isSchema(sub[name]) {
						out = append(out, ptr+"/"+escapeToken(k)+"/"+escapeToken(name))
					}
				}
			} else {
				out = append(out, ptr+"/"+escapeToken(k))
			}
		}
	}
	g.topo[ptr] = out
	return out
}

// Keys of the members a descending keyword reaches: a named property, any other property, a property name,
// an array element.
const (
	anyProperty = "\x00property"
	anyName     = "\x00name"
	anyElement  = "\x00element"
)

// memberEdge leads from a subschema to one it applies to a member of the value.
type memberEdge struct{ from, to string }

// descend returns, by member key, the subschemas that the one at ptr applies to members of its value.
func (g *costGraph) descend(ptr string, into map[string][]memberEdge) {
	obj, _ := lookup(g.root, ptr).(map[string]any)
	add := func(key, p string) { into[key] = append(into[key], memberEdge{from: ptr, to: p}) }
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		base := ptr + "/" + escapeToken(k)
		switch k {
		case "properties":
			props, _ := obj[k].(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(props)) {
				add("."+name, base+"/"+escapeToken(name))
			}
		case "patternProperties":
			props, _ := obj[k].(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(props)) {
				add(anyProperty, base+"/"+escapeToken(name))
			}
		case "additionalProperties", "unevaluatedProperties":
			if isSchema(obj[k]) {
				add(anyProperty, base)
			}
		case "propertyNames":
			add(anyName, base)
		case "items", "prefixItems", "additionalItems", "contains", "unevaluatedItems":
			switch sub := obj[k].(type) {
			case []any:
				for i := range sub {
					add(anyElement, base+"/"+strconv.Itoa(i))
				}
			default:
				if isSchema(sub) {
					add(anyElement, base)
				}
			}
		}
	}
}

// closure expands a level's starting subschemas (with how many times each is reached) over the in-place
// keywords, counting every path: the validator checks a subschema once per path that reaches it. It returns
// the expanded counts and their sum (saturated above maxSchemaFan).
func (g *costGraph) closure(start map[string]int) (map[string]int, int, error) {
	// Topological order of the reachable in-place subgraph (checkRefs refused its cycles).
	var order []string
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		g.steps++
		for _, q := range g.inPlaceEdges(p) {
			visit(q)
		}
		order = append(order, p)
	}
	for _, p := range slices.Sorted(maps.Keys(start)) {
		visit(p)
	}
	if g.steps > maxCostSteps {
		return nil, 0, fmt.Errorf("the schema is too complex to bound its validation (%d steps of analysis)", maxCostSteps)
	}
	counts := map[string]int{}
	for p, n := range start {
		counts[p] = n
	}
	total := 0
	for i := len(order) - 1; i >= 0; i-- {
		p := order[i]
		n := counts[p]
		total = min(total+n, maxSchemaFan+1)
		for _, q := range g.inPlaceEdges(p) {
			counts[q] = min(counts[q]+n, maxSchemaFan+1)
		}
	}
	return counts, total, nil
}

// checkCost refuses a schema under which one value of the arguments can meet more than maxSchemaFan
// subschemas, following every path into the arguments up to maxArgsNesting levels (the gate refuses deeper
// arguments).
func checkCost(root any) error {
	g := &costGraph{root: root, topo: map[string][]string{}}
	explored := map[string]int{} // a level's starting subschemas, as a signature → the shallowest depth seen
	var walk func(start map[string]int, path string, depth int) error
	walk = func(start map[string]int, path string, depth int) error {
		sig := levelSignature(start)
		if d, ok := explored[sig]; ok && d <= depth {
			return nil // explored from here at least as deep already
		}
		explored[sig] = depth
		counts, total, err := g.closure(start)
		if err != nil {
			return err
		}
		if total > maxSchemaFan {
			return fmt.Errorf("more than %d subschemas apply to the value at %q: the schema's allOf/anyOf/oneOf/$ref nest so that checking arguments could take exponential time", maxSchemaFan, "arguments"+path)
		}
		if depth >= maxArgsNesting {
			return nil
		}
		byKey := map[string][]memberEdge{}
		for _, p := range slices.Sorted(maps.Keys(counts)) {
			g.descend(p, byKey)
		}
		// A named property also meets the subschemas for any property.
		keys := slices.Sorted(maps.Keys(byKey))
		for _, key := range keys {
			next := map[string]int{}
			targets := byKey[key]
			if strings.HasPrefix(key, ".") {
				targets = append(slices.Clip(targets), byKey[anyProperty]...)
			}
			for _, e := range targets {
				// A member's subschema is reached once for every path that reached the one holding it.
				next[e.to] = min(next[e.to]+counts[e.from], maxSchemaFan+1)
			}
			label := key
			switch key {
			case anyProperty:
				label = ".*"
			case anyName:
				label = " (a property name)"
			case anyElement:
				label = "[*]"
			}
			if err := walk(next, path+label, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(map[string]int{"": 1}, "", 0)
}

// maxArgsNesting is how deep the cost analysis follows the arguments: the gate refuses arguments nested deeper.
const maxArgsNesting = 1000

func levelSignature(m map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(k)
		b.WriteByte('\x00')
		b.WriteString(strconv.Itoa(m[k]))
		b.WriteByte('\x00')
	}
	return b.String()
}

func isSchema(v any) bool {
	switch v.(type) {
	case map[string]any, bool:
		return true
	}
	return false
}
