package definition

import (
	"regexp"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
)

func decodeNode(v any, at field.Path) (Node, error) {
	o, err := asObject(v, at)
	if err != nil {
		return Node{}, err
	}
	if err := o.only("enable", "modules", "tags", "substituteOnNode", "ssh", "incus"); err != nil {
		return Node{}, err
	}
	var n Node
	if n.Enable, err = o.bool("enable", true); err != nil {
		return Node{}, err
	}
	if n.SubstituteOnNode, err = o.bool("substituteOnNode", true); err != nil {
		return Node{}, err
	}
	if mods, ok := o.m["modules"]; ok {
		list, ok := mods.([]any)
		if !ok {
			return Node{}, o.wrong("modules", data.Array)
		}
		for i, m := range list {
			p, err := repoPath(m, at.Key("modules").Index(i), "a tree path")
			if err != nil {
				return Node{}, err
			}
			n.Modules = append(n.Modules, p)
		}
	}
	if n.Tags, err = decodeTags(o.m["tags"], at.Key("tags")); err != nil {
		return Node{}, err
	}
	if o.has("ssh") {
		if n.SSH, err = DecodeSSH(o.m["ssh"], at.Key("ssh")); err != nil {
			return Node{}, err
		}
	}
	if o.has("incus") {
		if n.Incus, err = DecodeIncus(o.m["incus"], at.Key("incus")); err != nil {
			return Node{}, err
		}
	}
	return n, nil
}

// DecodeSSH reads a node's ssh settings (also as plan.json holds them).
func DecodeSSH(v any, at field.Path) (*SSH, error) {
	o, err := asObject(v, at)
	if err != nil {
		return nil, err
	}
	if err := o.only("host", "port", "user", "hostKey"); err != nil {
		return nil, err
	}
	s := &SSH{}
	if s.Host, err = o.string("host", ""); err != nil {
		return nil, err
	}
	if s.Host == "" || strings.ContainsAny(s.Host, " \t\n@/") {
		return nil, field.Errorf(at.Key("host"), "%q is not a host name or address", s.Host)
	}
	if s.Port, err = o.integer("port", 22); err != nil {
		return nil, err
	}
	if s.Port < 1 || s.Port > 65535 {
		return nil, field.Errorf(at.Key("port"), "port %d is not between 1 and 65535", s.Port)
	}
	if s.User, err = o.string("user", "root"); err != nil {
		return nil, err
	}
	if s.User == "" || strings.ContainsAny(s.User, " \t\n@:/") {
		return nil, field.Errorf(at.Key("user"), "%q is not a user name", s.User)
	}
	key, err := o.string("hostKey", "")
	if err != nil {
		return nil, err
	}
	if key != "" {
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(key))
		if err != nil {
			return nil, field.Errorf(at.Key("hostKey"), "not a public key (want e.g. \"ssh-ed25519 AAAA...\"): %v", err)
		}
		s.HostKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	}
	return s, nil
}

// DecodeIncus reads a node's incus settings (also as plan.json holds them).
func DecodeIncus(v any, at field.Path) (*Incus, error) {
	o, err := asObject(v, at)
	if err != nil {
		return nil, err
	}
	if err := o.only("image", "profiles", "limits", "type"); err != nil {
		return nil, err
	}
	i := &Incus{}
	if i.Image, err = o.string("image", ""); err != nil {
		return nil, err
	}
	if i.Image == "" {
		return nil, field.Errorf(at.Key("image"), "an image is required")
	}
	if i.Profiles, err = o.strings("profiles", []string{"default"}); err != nil {
		return nil, err
	}
	if i.Type, err = o.string("type", InstanceContainer); err != nil {
		return nil, err
	}
	if i.Type != InstanceContainer && i.Type != InstanceVM {
		return nil, field.Errorf(at.Key("type"), "%q is not an instance type: want %q or %q", i.Type, InstanceContainer, InstanceVM)
	}
	limits, err := o.object("limits")
	if err != nil {
		return nil, err
	}
	if err := limits.only("cpu", "memory"); err != nil {
		return nil, err
	}
	if i.Limits.CPU, err = limits.integer("cpu", 0); err != nil {
		return nil, err
	}
	if limits.has("cpu") && i.Limits.CPU < 1 {
		return nil, field.Errorf(limits.at.Key("cpu"), "at least 1 cpu")
	}
	if i.Limits.Memory, err = limits.string("memory", ""); err != nil {
		return nil, err
	}
	return i, nil
}

// tagPattern is what a node's tag may be: what --on's @tag can name.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// IsTag tells whether s may be a node's tag.
func IsTag(s string) bool { return tagPattern.MatchString(s) }

// decodeTags reads a node's tags: a list of tag names, each once.
func decodeTags(v any, at field.Path) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, field.Errorf(at, "want a list of tag names")
	}
	var tags []string
	for i, x := range list {
		tag, ok := x.(string)
		if !ok || !tagPattern.MatchString(tag) {
			return nil, field.Errorf(at.Index(i), "%v is not a tag name (letters, digits, _ . -)", x)
		}
		if slices.Contains(tags, tag) {
			return nil, field.Errorf(at.Index(i), "tag %s given twice", tag)
		}
		tags = append(tags, tag)
	}
	return tags, nil
}
