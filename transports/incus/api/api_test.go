package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// testProject creates a throwaway project named switchyard-test-<random> that
// sees the default project's images and profiles, and deletes it (with any
// instance left in it) when t ends.
func testProject(t *testing.T, c *api.Client) string {
	t.Helper()
	name := randomName("switchyard-test-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.CreateProject(ctx, api.ProjectsPost{Name: name, Description: "switchyard api test",
		Config: map[string]string{"features.images": "false", "features.profiles": "false"}})
	if err != nil {
		t.Fatalf("create project %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.DeleteProject(ctx, name); err != nil && !api.IsNotFound(err) {
			t.Errorf("delete project %s: %v", name, err)
		}
	})
	return name
}

// No daemon: a dial error, not an API answer.
func TestNoDaemon(t *testing.T) {
	c := api.New(filepath.Join(t.TempDir(), "unix.socket"))
	_, err := c.Instance(context.Background(), "", "x")
	if !api.IsDial(err) || api.IsNotFound(err) {
		t.Fatalf("Instance with no daemon: %v, want a dial error", err)
	}
}

func TestInstanceLifecycle(t *testing.T) {
	bed := testbed.Require(t)
	c := api.New("")
	t.Cleanup(c.Close)
	project := testProject(t, c)
	name := randomName("sy-api-")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		// A failed test still leaves an empty project behind for the clean-up above.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.SetState(ctx, project, name, "stop", true)
		_ = c.DeleteInstance(ctx, project, name)
	})

	if _, err := c.Instance(ctx, project, name); !api.IsNotFound(err) {
		t.Fatalf("Instance before create: %v, want not found", err)
	}
	alias, err := c.ImageAlias(ctx, project, bed.Image)
	if err != nil || alias.Target == "" {
		t.Fatalf("image alias %s in %s: %+v %v", bed.Image, project, alias, err)
	}
	if _, err := c.ImageAlias(ctx, project, "no-such-alias-"+name); !api.IsNotFound(err) {
		t.Errorf("missing alias: %v, want not found", err)
	}
	if img, err := c.Image(ctx, project, alias.Target[:12]); err != nil || img.Fingerprint != alias.Target {
		t.Errorf("image by fingerprint prefix: %+v %v", img, err)
	}
	if _, err := c.Image(ctx, project, "0000000000"); !api.IsNotFound(err) {
		t.Errorf("missing image: %v, want not found", err)
	}

	err = c.CreateInstance(ctx, project, api.InstancesPost{Name: name,
		Source:      api.InstanceSource{Type: "image", Alias: bed.Image},
		InstancePut: api.InstancePut{Profiles: []string{"default"}, Config: map[string]string{"user.a": "1"}}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	inst, err := c.Instance(ctx, project, name)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Name != name || inst.Project != project || inst.Status != api.StatusStopped || inst.Config["user.a"] != "1" ||
		len(inst.Profiles) != 1 || inst.Profiles[0] != "default" {
		t.Errorf("created: %+v", inst)
	}
	if err := c.CreateInstance(ctx, project, api.InstancesPost{Name: name,
		Source: api.InstanceSource{Type: "image", Alias: bed.Image}}); err == nil {
		t.Errorf("a second instance of the same name created")
	}

	if err := c.SetState(ctx, project, name, "start", false); err != nil {
		t.Fatalf("start: %v", err)
	}
	if inst, err = c.Instance(ctx, project, name); err != nil || inst.Status != api.StatusRunning {
		t.Fatalf("after start: %v %+v", err, inst)
	}
	var out bytes.Buffer
	code, err := c.Exec(ctx, name, project, api.ExecRequest{Command: []string{"cat", "/proc/1/comm"}}, nil, &out, nil)
	if err != nil || code != 0 || strings.TrimSpace(out.String()) == "" {
		t.Errorf("exec: %d %v %q", code, err, out.String())
	}

	err = c.UpdateInstance(ctx, project, name, func(p *api.InstancePut) {
		delete(p.Config, "user.a")
		p.Config["user.x"] = "1"
		p.Devices["shm"] = map[string]string{"type": "disk", "source": "/dev/shm", "path": "/mnt/shm"}
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	inst, err = c.Instance(ctx, project, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inst.Config["user.a"]; ok || inst.Config["user.x"] != "1" || inst.Devices["shm"]["path"] != "/mnt/shm" {
		t.Errorf("after update: config %v devices %v", inst.Config, inst.Devices)
	}
	if inst.Config["volatile.base_image"] == "" {
		t.Errorf("update dropped the daemon's keys: %v", inst.Config)
	}
	if err := c.PatchInstance(ctx, project, name, api.InstancePut{Config: map[string]string{"user.y": "2"}}); err != nil {
		t.Fatalf("patch: %v", err)
	}
	if inst, err = c.Instance(ctx, project, name); err != nil || inst.Config["user.y"] != "2" || inst.Config["user.x"] != "1" {
		t.Errorf("after patch: %v %v", err, inst.Config)
	}

	if err := c.DeleteInstance(ctx, project, name); err == nil || api.IsNotFound(err) {
		t.Errorf("delete of a running instance: %v, want refused", err)
	}
	if err := c.SetState(ctx, project, name, "stop", true); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if inst, err = c.Instance(ctx, project, name); err != nil || inst.Status != api.StatusStopped {
		t.Fatalf("after stop: %v %+v", err, inst)
	}
	if err := c.DeleteInstance(ctx, project, name); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.Instance(ctx, project, name)
	if !api.IsNotFound(err) {
		t.Fatalf("Instance after delete: %v, want not found", err)
	}
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != 404 {
		t.Errorf("not found error %#v", err)
	}
	if err := c.DeleteInstance(ctx, project, name); !api.IsNotFound(err) {
		t.Errorf("second delete: %v, want not found", err)
	}
}
