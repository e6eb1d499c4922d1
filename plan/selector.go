package plan

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/definition"
)

// A term is one word of --on: a node name, a glob over names (web*), a tag (@edge), each
// negated by a leading ! (an exclusion).
type term struct {
	text    string // as given, for messages
	exclude bool
	tag     string // @tag: the tag; empty otherwise
	glob    string // a name or a glob
}

// literal tells whether the term names one node outright: such a term must name an
// enabled node, as --node's names must.
func (t term) literal() bool {
	return t.tag == "" && !strings.ContainsAny(t.glob, `*?[\`)
}

func (t term) match(name string, tags []string) bool {
	if t.tag != "" {
		return slices.Contains(tags, t.tag)
	}
	ok, _ := path.Match(t.glob, name) // the pattern was checked by parseTerm
	return ok
}

// parseTerms reads --on's values: each a comma-separated list of terms.
func parseTerms(values []string) ([]term, error) {
	var out []term
	for _, v := range values {
		for _, word := range strings.Split(v, ",") {
			t, err := parseTerm(strings.TrimSpace(word))
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	return out, nil
}

func parseTerm(word string) (term, error) {
	rest, exclude := strings.CutPrefix(word, "!")
	t := term{text: word, exclude: exclude}
	switch {
	case rest == "":
		return t, fmt.Errorf("%q selects nothing: give a node name, a glob (web*) or a tag (@edge), ! to exclude", word)
	case strings.HasPrefix(rest, "@"):
		t.tag = rest[1:]
		if !definition.IsTag(t.tag) {
			return t, fmt.Errorf("%q: %q is not a tag name", word, t.tag)
		}
	default:
		if _, err := path.Match(rest, ""); err != nil {
			return t, fmt.Errorf("%q: not a glob: %w", word, err)
		}
		t.glob = rest
	}
	return t, nil
}
