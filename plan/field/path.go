package field

import (
	"regexp"
	"strconv"
)

// Path is a field path in the Nix attribute-path style: keys joined by dots, a key that
// is not a plain identifier quoted, list elements indexed: groups.web.nodes.web1.modules[0],
// applications."my app".settings. The zero Path is the top level.
type Path string

var bareKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_'-]*$`)

// Key is the path of the member key of the object at p.
func (p Path) Key(key string) Path {
	k := key
	if !bareKey.MatchString(key) {
		k = strconv.Quote(key)
	}
	if p == "" {
		return Path(k)
	}
	return p + "." + Path(k)
}

// Index is the path of element i of the list at p.
func (p Path) Index(i int) Path { return p + Path("["+strconv.Itoa(i)+"]") }

// String is the path as printed; the top level prints as "(top level)".
func (p Path) String() string {
	if p == "" {
		return "(top level)"
	}
	return string(p)
}
