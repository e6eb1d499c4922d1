package api_test

import (
	"bytes"
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// Issue 12 item 4: a file pushed into an instance through the files API, its
// missing parents created, read back with its owner and mode, overwritten with
// another mode, and deleted.
func TestFiles(t *testing.T) {
	bed := testbed.Require(t)
	c := api.New("")
	t.Cleanup(c.Close)
	project := testProject(t, c)
	name := randomName("sy-files-")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.SetState(ctx, project, name, "stop", true)
		_ = c.DeleteInstance(ctx, project, name)
	})
	err := c.CreateInstance(ctx, project, api.InstancesPost{Name: name, Start: true,
		Source: api.InstanceSource{Type: "image", Alias: bed.Image}, InstancePut: api.InstancePut{Profiles: []string{"default"}}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	const dir, file = "/var/lib/sy-test/a/b", "/var/lib/sy-test/a/b/secret"
	if _, err := c.File(ctx, project, name, file); !api.IsNotFound(err) {
		t.Fatalf("File before the push: %v, want not found", err)
	}
	root := api.FileMeta{UID: 0, GID: 0, Mode: 0o700}
	if err := c.MkdirAll(ctx, project, name, dir, root); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	if err := c.MkdirAll(ctx, project, name, dir, root); err != nil {
		t.Fatalf("mkdir of existing directories: %v", err)
	}
	for _, d := range []string{"/var/lib/sy-test", "/var/lib/sy-test/a", dir} {
		f, err := c.File(ctx, project, name, d)
		if err != nil || f.Type != api.FileTypeDirectory || f.Mode != 0o700 || f.UID != 0 || f.GID != 0 {
			t.Errorf("%s: %+v %v, want a directory 0700 root", d, f, err)
		}
	}
	if f, err := c.File(ctx, project, name, "/var/lib"); err != nil || f.Mode != 0o755 {
		t.Errorf("/var/lib changed: %+v %v", f, err)
	}

	if f, err := c.Stat(ctx, project, name, dir); err != nil || f.Type != api.FileTypeDirectory || f.Content != nil {
		t.Errorf("Stat %s: %+v %v", dir, f, err)
	}
	content := []byte("token-1\n")
	if err := c.PushFile(ctx, project, name, file, content, api.FileMeta{Mode: 0o600}); err != nil {
		t.Fatalf("push: %v", err)
	}
	f, err := c.File(ctx, project, name, file)
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != api.FileTypeFile || f.Mode != 0o600 || f.UID != 0 || f.GID != 0 || !bytes.Equal(f.Content, content) {
		t.Errorf("pushed: %+v, want a file 0600 root with %q", f, content)
	}
	// The instance's own view: stat run in it.
	var out bytes.Buffer
	code, err := c.Exec(ctx, name, project, api.ExecRequest{Command: []string{"stat", "-c", "%a %u %g %s", file}}, nil, &out, nil)
	if err != nil || code != 0 || out.String() != "600 0 0 8\n" {
		t.Errorf("stat in the instance: %d %q %v", code, out.String(), err)
	}

	// Overwritten: shorter content, another mode and owner (the daemon keeps an
	// existing file's, so PushFile replaces the file).
	if err := c.PushFile(ctx, project, name, file, []byte("x"), api.FileMeta{UID: 1, GID: 2, Mode: 0o640}); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if f, err = c.File(ctx, project, name, file); err != nil || string(f.Content) != "x" || f.Mode != fs.FileMode(0o640) || f.UID != 1 || f.GID != 2 {
		t.Errorf("overwritten: %+v %v", f, err)
	}

	// Overwritten again with the same owner and mode: in place.
	if err := c.PushFile(ctx, project, name, file, []byte("yz"), api.FileMeta{UID: 1, GID: 2, Mode: 0o640}); err != nil {
		t.Fatalf("overwrite in place: %v", err)
	}
	if f, err = c.File(ctx, project, name, file); err != nil || string(f.Content) != "yz" || f.Mode != 0o640 || f.UID != 1 {
		t.Errorf("overwritten in place: %+v %v", f, err)
	}
	if err := c.PushFile(ctx, project, name, dir, []byte("x"), root); err == nil {
		t.Error("a file pushed over a directory")
	}

	if err := c.MkdirAll(ctx, project, name, file+"/c", root); err == nil {
		t.Error("mkdir under a file accepted")
	}
	if err := c.PushFile(ctx, project, name, "relative/x", nil, root); err == nil {
		t.Error("relative path accepted")
	}
	if err := c.DeleteFile(ctx, project, name, file); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Stat(ctx, project, name, file); !api.IsNotFound(err) {
		t.Errorf("Stat after delete: %v, want not found", err)
	}
	if err := c.DeleteFile(ctx, project, name, file); !api.IsNotFound(err) {
		t.Errorf("second delete: %v, want not found", err)
	}
	if _, err := c.File(ctx, project, "no-such-"+name, file); !api.IsNotFound(err) {
		t.Errorf("File of a missing instance: %v, want not found", err)
	}
}
