package merge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// TestAnchorsTreeOnly: every anchor of every method is refused from a submission,
// naming deployment-method.<method>.<key> (SPEC 6.9), and the kinds are SPEC's list.
func TestAnchorsTreeOnly(t *testing.T) {
	anchors := map[string]bool{"knownHostsFile": true, "stateBackend": true, "project": true, "incusRemote": true,
		"projectConfig": true, "dnsServer": true, "spireServer": true, "spireTrustDomain": true}
	for _, m := range method.All() {
		for _, s := range m.Settings {
			if got := s.Kind == method.Anchor; got != anchors[s.Name] {
				t.Errorf("%s.%s: kind %s", m.Name, s.Name, s.Kind)
			}
			if s.Kind != method.Anchor {
				continue
			}
			v := `"x"`
			switch {
			case s.Type.Kind == "object":
				v = `{"restricted":"false"}`
			case len(s.Type.Enum) > 0:
				v = `"` + s.Type.Enum[len(s.Type.Enum)-1] + `"`
			}
			in := `{"deployment-method":{"` + m.Name + `":{"` + s.Name + `":` + v + `}}}`
			refused(t, m.Name, in, "deployment-method."+m.Name+"."+s.Name, "set by the tree only")
		}
	}
}

// TestCredentialConfined: a submitted credential is a regular file of the deployer's
// user, mode 0600 or stricter, whose real path lies under a credential directory; the
// refusal names the setting and never the path.
func TestCredentialConfined(t *testing.T) {
	dir := fixture.creds
	stage := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("secret"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	outside := filepath.Join(t.TempDir(), "key")
	os.WriteFile(outside, []byte("secret"), 0o600)
	linkOut := filepath.Join(dir, "link-out")
	os.Symlink(outside, linkOut)
	linkIn := filepath.Join(dir, "link-in")
	os.Symlink(fixture.key, linkIn)
	// Another user's file takes root to stage: unprivileged (as the flake's check runs
	// the unit tier) that case skips.
	others := stage("others", 0o600)
	otherReason := "owned by uid 65534"
	if os.Geteuid() != 0 || os.Chown(others, 65534, 65534) != nil {
		otherReason = ""
	}
	sub := filepath.Join(dir, "sub")
	os.MkdirAll(sub, 0o700)
	for _, tc := range []struct{ name, file, reason string }{
		{"a deployer file outside every credential directory", "/etc/shadow", "not under a credential directory"},
		{"a file of another directory", outside, "not under a credential directory"},
		{"a symlink in the directory to a file outside", linkOut, "not under a credential directory"},
		{"a relative path", "creds/key", "not an absolute path"},
		{"a file readable by the group", stage("group", 0o640), "mode 0640 gives group or others access"},
		{"a file readable by all", stage("world", 0o644), "mode 0644"},
		{"a file of another user", others, otherReason},
		{"a directory", sub, "not a regular file"},
		{"a missing file", filepath.Join(dir, "missing"), "no such file"},
		{"the directory itself", dir, "not under a credential directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.reason == "" {
				t.Skip("unprivileged: no file of another user can be staged")
			}
			in := `{"deployment-method":{"tf":{"pgConnStringFile":"` + tc.file + `"}}}`
			err := refused(t, "tf", in, "deployment-method.tf.pgConnStringFile", tc.reason)
			if err != nil && tc.file != "creds/key" && strings.Contains(err.Error(), tc.file) {
				t.Errorf("the refusal names the credential's path: %v", err)
			}
		})
	}
	in := `{"deployment-method":{"tf":{"pgConnStringFile":"` + linkIn + `"}}}`
	if _, err := Merge(baked(), lookup(t, "tf"), []byte(in), opts()); err != nil {
		t.Errorf("a symlink to a staged file in the directory: %v", err)
	}
	if _, err := Merge(baked(), lookup(t, "tf"), []byte(in), Options{}); err == nil || !strings.Contains(err.Error(), "no credential directory is configured") {
		t.Errorf("no credential directory: %v", err)
	}
	def := baked()
	def.MethodSettings["tf"] = map[string]any{"pgConnStringFile": outside}
	if _, err := Merge(def, lookup(t, "tf"), []byte(`{"deployment-method":{"tf":{}}}`), opts()); err != nil {
		t.Errorf("the tree's own credential path is the operator's: %v", err)
	}
}

// TestTreePathsConfined: a submitted tree path lies under its baked path's directory
// and where nixos_conf looks (SPEC 6.9).
func TestTreePathsConfined(t *testing.T) {
	at := "deployment-method.ssh.applications.hello.settings."
	for _, tc := range []struct{ name, settings, path, reason string }{
		{"the repository's config", `"tls":{"cert":{"_repoPath":".git/config"}}`, "tls.cert", "is not under certs/"},
		{"a file beside the baked directory", `"tls":{"cert":{"_repoPath":"files/motd.txt"}}`, "tls.cert", "is not under certs/"},
		{"a nested version-control directory", `"tls":{"cert":{"_repoPath":"certs/.git/config"}}`, "tls.cert", "under .git"},
		{"a symlink into .git", `"tls":{"cert":{"_repoPath":"certs/git.pem"}}`, "tls.cert", "under .git"},
		{"the state dir under a root path", `"banner":{"_repoPath":"state/nodes/web1/plan.json"}`, "banner", "switchyard's own"},
		{"the repository under a root path", `"banner":{"_repoPath":".git/config"}`, "banner", "under .git"},
		{"a path where null was baked", `"anything":{"_repoPath":"a"}`, "anything", "takes no file of the tree"},
		{"a path inside a setting baked {}", `"extra":{"k":[{"_repoPath":"a"}]}`, "extra.k[0]", "takes no file of the tree"},
		{"a missing file", `"tls":{"cert":{"_repoPath":"certs/none.pem"}}`, "tls.cert", "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{` + tc.settings + `}}}}}}`
			refused(t, "ssh", in, at+tc.path, tc.reason)
		})
	}
	in := `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"banner":{"_repoPath":"files/motd.txt"}}}}}}}`
	if _, err := Merge(baked(), lookup(t, "ssh"), []byte(in), opts()); err != nil {
		t.Errorf("a root-level baked path takes any covered file: %v", err)
	}
}

func refused(t *testing.T, m, in, path, reason string) error {
	t.Helper()
	d, err := Merge(baked(), lookup(t, m), []byte(in), opts())
	if err == nil {
		t.Errorf("%s: merged, want a refusal at %s: %+v", in, path, d.Settings)
		return nil
	}
	fe, ok := err.(*field.Error)
	if !ok || fe.Source != "DEPLOYMENT" || string(fe.Path) != path || !strings.Contains(fe.Reason, reason) {
		t.Errorf("%s:\ngot  %v\nwant DEPLOYMENT: %s: ...%s...", in, err, path, reason)
	}
	return err
}
