package coordinates

import (
	"fmt"
	"sort"
)

// Coordinate is one declared environment variable a method's plans read.
type Coordinate struct {
	Name        string // the environment variable, e.g. HOSTING_ENV
	Description string
	Default     string // used when the variable is unset or empty
}

// Reader reads declared coordinates. The zero Reader declares nothing.
type Reader struct {
	declared map[string]Coordinate
	lookup   func(string) (string, bool)
}

// Fixed is a Reader over given values instead of the environment (tests, saved plans).
// A declared name missing from values reads its default.
func Fixed(decls []Coordinate, values map[string]string) *Reader {
	return newReader(decls, func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	})
}

func newReader(decls []Coordinate, lookup func(string) (string, bool)) *Reader {
	r := &Reader{declared: make(map[string]Coordinate, len(decls)), lookup: lookup}
	for _, c := range decls {
		if _, dup := r.declared[c.Name]; dup {
			panic(fmt.Sprintf("coordinates: %s declared twice", c.Name))
		}
		r.declared[c.Name] = c
	}
	return r
}

// Lookup is the value of a declared coordinate: the variable's value, or its default when
// the variable is unset or empty. An undeclared name panics: every environment read of
// the plan must be declared.
func (r *Reader) Lookup(name string) string {
	c, ok := r.declared[name]
	if !ok {
		panic(fmt.Sprintf("coordinates: %s is read but not declared by the method", name))
	}
	if v, ok := r.lookup(name); ok && v != "" {
		return v
	}
	return c.Default
}

// Values is every declared coordinate's value, by name.
func (r *Reader) Values() map[string]string {
	out := make(map[string]string, len(r.declared))
	for name := range r.declared {
		out[name] = r.Lookup(name)
	}
	return out
}

// Declared is the declarations, sorted by name.
func (r *Reader) Declared() []Coordinate {
	out := make([]Coordinate, 0, len(r.declared))
	for _, c := range r.declared {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
