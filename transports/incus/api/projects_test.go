package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// A project with images of its own against the real daemon (issue 12 item 2):
// read and update it, copy the default project's image into it (the export
// streamed into the upload), list and delete it there while the default
// project keeps it, list the project's instances (none), delete the project.
func TestProjectImages(t *testing.T) {
	bed := testbed.Require(t)
	c := api.New("")
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := randomName("switchyard-test-")
	if err := c.CreateProject(ctx, api.ProjectsPost{Name: name, Description: "switchyard api test",
		Config: map[string]string{"features.images": "true", "features.profiles": "false"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if imgs, err := c.Images(ctx, name); err == nil {
			for _, img := range imgs {
				_ = c.DeleteImage(ctx, name, img.Fingerprint)
			}
		}
		if err := c.DeleteProject(ctx, name); err != nil && !api.IsNotFound(err) {
			t.Errorf("delete project %s: %v", name, err)
		}
	})
	if err := c.UpdateProject(ctx, name, func(p *api.ProjectPut) { p.Config["user.x"] = "1"; p.Description = "d" }); err != nil {
		t.Fatal(err)
	}
	p, err := c.Project(ctx, name)
	if err != nil || p.Name != name || p.Description != "d" || p.Config["user.x"] != "1" || p.Config["features.images"] != "true" {
		t.Fatalf("project: %+v, %v", p, err)
	}
	if _, err := c.Project(ctx, name+"-gone"); !api.IsNotFound(err) {
		t.Errorf("a missing project: %v", err)
	}

	alias, err := c.ImageAlias(ctx, api.DefaultProject, bed.Image)
	if err != nil {
		t.Fatal(err)
	}
	if imgs, err := c.Images(ctx, name); err != nil || len(imgs) != 0 {
		t.Fatalf("a new project's images: %v, %v", imgs, err)
	}
	start := time.Now()
	if err := c.CopyImage(ctx, api.DefaultProject, name, alias.Target); err != nil {
		t.Fatalf("copy image: %v", err)
	}
	t.Logf("image copied in %s", time.Since(start).Round(time.Millisecond))
	imgs, err := c.Images(ctx, name)
	if err != nil || len(imgs) != 1 || imgs[0].Fingerprint != alias.Target {
		t.Fatalf("the project's images after the copy: %+v, %v", imgs, err)
	}
	if err := c.CopyImage(ctx, api.DefaultProject, name, "0000000000000000"); !api.IsNotFound(err) {
		t.Errorf("copy of a missing image: %v", err)
	}
	if insts, err := c.Instances(ctx, name); err != nil || len(insts) != 0 {
		t.Errorf("instances: %v, %v", insts, err)
	}
	if err := c.DeleteImage(ctx, name, alias.Target); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Image(ctx, name, alias.Target); !api.IsNotFound(err) {
		t.Errorf("image in the project after its delete: %v", err)
	}
	if _, err := c.Image(ctx, api.DefaultProject, alias.Target); err != nil {
		t.Errorf("the default project's image after the project's copy was deleted: %v", err)
	}
	if err := c.DeleteProject(ctx, name); err != nil {
		t.Fatal(err)
	}
}
