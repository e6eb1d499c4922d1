package data

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/field"
)

// NotDataKey marks a value the Nix side found not to be data: nix/definition.nix
// writes { __switchyard_not_data = "a function"; } in place of a function, a
// derivation, a string with store context or a path outside the tree.
const NotDataKey = "__switchyard_not_data"

// Lift turns parsed JSON (Parse) into data: {"_repoPath": "p"} becomes RepoPath (checked
// lexically), a not-data marker is refused, and a number must be an integer Nix can hold
// (64 bits) or a finite float. at is the path of v in its source.
func Lift(v any, at field.Path) (any, error) {
	switch t := v.(type) {
	case nil, bool, string:
		return t, nil
	case json.Number:
		if _, err := NumberKind(t); err != nil {
			return nil, field.Errorf(at, "%v", err)
		}
		return t, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			l, err := Lift(e, at.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = l
		}
		return out, nil
	case map[string]any:
		if what, ok := t[NotDataKey]; ok {
			return nil, field.Errorf(at, "not data: %v", what)
		}
		if rp, ok := t[RepoPathKey]; ok {
			s, isString := rp.(string)
			if len(t) != 1 || !isString {
				return nil, field.Errorf(at, "a tree path is an object with exactly one key %q holding a string", RepoPathKey)
			}
			p, err := CleanRepoPath(s)
			if err != nil {
				return nil, field.Errorf(at, "%v", err)
			}
			return p, nil
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			l, err := Lift(e, at.Key(k))
			if err != nil {
				return nil, err
			}
			out[k] = l
		}
		return out, nil
	case RepoPath:
		return t, nil
	}
	return nil, field.Errorf(at, "not data: %T", v)
}

// ParseData is Parse then Lift.
func ParseData(b []byte) (any, error) {
	v, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return Lift(v, "")
}

// NumberKind says whether a JSON number is an Integer (no fraction or exponent, within
// 64 bits) or a Number (a finite float), or why it is neither.
func NumberKind(n json.Number) (Kind, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if _, err := n.Int64(); err != nil {
			return "", fmt.Errorf("integer %s does not fit in 64 bits", s)
		}
		return Integer, nil
	}
	if _, err := parseFiniteFloat(s); err != nil {
		return "", err
	}
	return Number, nil
}
