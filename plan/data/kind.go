package data

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Kind is the JSON type of a value, with integers told apart from other numbers (Nix
// has both) and tree paths from other objects.
type Kind string

const (
	Null    Kind = "null"
	Boolean Kind = "boolean"
	Integer Kind = "integer"
	Number  Kind = "number"
	String  Kind = "string"
	Array   Kind = "array"
	Object  Kind = "object"
	Path    Kind = "path"
)

// KindOf is the kind of a data value ("" for a value that is not data).
func KindOf(v any) Kind {
	switch t := v.(type) {
	case nil:
		return Null
	case bool:
		return Boolean
	case string:
		return String
	case json.Number:
		k, _ := NumberKind(t)
		return k
	case int, int64, int32:
		return Integer
	case float64:
		return Number
	case []any:
		return Array
	case map[string]any:
		return Object
	case RepoPath:
		return Path
	}
	return ""
}

// Article is the kind with its indefinite article, for messages: "an integer".
func (k Kind) Article() string {
	switch k {
	case Integer, Array, Object:
		return "an " + string(k)
	case Null:
		return "null"
	case Path:
		return `a tree path ({"_repoPath": ...})`
	case "":
		return "not data"
	}
	return "a " + string(k)
}

func parseFiniteFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("number %s is not a finite 64-bit float", s)
	}
	return f, nil
}
