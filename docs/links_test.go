// Package docs holds the user reference; its test checks that every relative link of
// the README, docs/*.md and docs/design/*.md leads to a file of the repository and, with a #fragment,
// to a heading of it.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// link is a Markdown inline link's target.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading is a Markdown ATX heading.
var heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)

func TestLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	design, _ := filepath.Glob(filepath.Join(root, "docs", "design", "*.md"))
	files = append(append(files, design...), filepath.Join(root, "README.md"))
	if len(files) < 2 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, root+"/")
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
			}
			if rel, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(rel, "..") {
				continue // outside the repository (SPEC.md beside it)
			}
			body, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", name, target, err)
				continue
			}
			if frag != "" && !hasAnchor(string(body), frag) {
				t.Errorf("%s: link %s: no heading with anchor #%s", name, target, frag)
			}
		}
	}
}

// hasAnchor tells whether doc has a heading whose GitHub anchor is frag: lower case,
// punctuation but "-" and "_" dropped, spaces as "-".
func hasAnchor(doc, frag string) bool {
	for _, m := range heading.FindAllStringSubmatch(doc, -1) {
		if anchor(m[1]) == frag {
			return true
		}
	}
	return false
}

func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The anchors GitHub gives the headings this reference links to.
func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"After a crash (the per-node journal)":  "after-a-crash-the-per-node-journal",
		"Speed: what `go run ./bench` measures": "speed-what-go-run-bench-measures",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}
