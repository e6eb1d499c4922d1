package effects

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// linkPermanentMACs returns, per .link file of the closure, the PermanentMACAddress=
// values its [Match] section names. Files without one are left out: they do not gate.
func linkPermanentMACs(toplevel string) (map[string][]string, error) {
	files, err := filepath.Glob(filepath.Join(toplevel, "etc", "systemd", "network", "*.link"))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if macs := parseLinkMatchMACs(string(data)); len(macs) > 0 {
			out[filepath.Base(f)] = macs
		}
	}
	return out, nil
}

// parseLinkMatchMACs reads PermanentMACAddress= from the [Match] section of a
// systemd.link file: a space-separated list, repeatable, an empty assignment resets it.
func parseLinkMatchMACs(text string) []string {
	var macs []string
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "Match" || strings.TrimSpace(k) != "PermanentMACAddress" {
			continue
		}
		if strings.TrimSpace(v) == "" {
			macs = nil
			continue
		}
		for _, m := range strings.Fields(v) {
			macs = append(macs, strings.ToLower(m))
		}
	}
	return macs
}

// parsePermanentMACs reads the permanent MAC addresses from `ip -o link` output: an
// interface's permaddr when the kernel shows one (it differs from the current
// address), else its current link/ether address.
func parsePermanentMACs(ipOutput string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(ipOutput, "\n") {
		f := strings.Fields(strings.ReplaceAll(line, `\`, " "))
		addr := ""
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "link/ether":
				if addr == "" {
					addr = f[i+1]
				}
			case "permaddr":
				addr = f[i+1]
			}
		}
		if addr != "" {
			out[strings.ToLower(addr)] = true
		}
	}
	return out
}

// macGate decides the PermanentMACAddress gate: the names of the gating .link files
// when none of them matches the node, nil when the node passes.
func macGate(links map[string][]string, node map[string]bool) []string {
	if len(links) == 0 {
		return nil
	}
	var names []string
	for name, macs := range links {
		for _, m := range macs {
			if node[m] {
				return nil
			}
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
