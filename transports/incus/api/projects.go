package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// ProjectPut is the part of a project that PUT /1.0/projects/<name> replaces.
type ProjectPut struct {
	Description string            `json:"description"`
	Config      map[string]string `json:"config"`
}

// ProjectsPost is the body of POST /1.0/projects.
type ProjectsPost struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Config      map[string]string `json:"config"`
}

// Project is a project as GET /1.0/projects/<name> tells it.
type Project struct {
	ProjectPut
	Name   string   `json:"name"`
	UsedBy []string `json:"used_by"`
}

func projectPath(name string) string { return "/1.0/projects/" + url.PathEscape(name) }

// CreateProject creates a project.
func (c *Client) CreateProject(ctx context.Context, req ProjectsPost) error {
	_, err := c.call(ctx, http.MethodPost, "/1.0/projects", req, "")
	return err
}

// Project reads project name. A missing project is an error IsNotFound tells.
func (c *Client) Project(ctx context.Context, name string) (*Project, error) {
	p, _, err := c.projectETag(ctx, name)
	return p, err
}

func (c *Client) projectETag(ctx context.Context, name string) (*Project, string, error) {
	r, err := c.do(ctx, http.MethodGet, projectPath(name), nil)
	if err != nil {
		return nil, "", err
	}
	var p Project
	if err := json.Unmarshal(r.Metadata, &p); err != nil {
		return nil, "", fmt.Errorf("incus API: project %s not understood: %w", name, err)
	}
	if p.Config == nil {
		p.Config = map[string]string{}
	}
	return &p, r.etag, nil
}

// UpdateProject replaces the description and config of project name with what
// update makes of them: it reads the project, calls update on its ProjectPut
// and PUTs the result, guarded by the ETag of the read so that a concurrent
// change is not overwritten silently. The config handed to update holds the
// keys the daemon set itself (the features.* defaults), which PUT would
// otherwise drop.
func (c *Client) UpdateProject(ctx context.Context, name string, update func(*ProjectPut)) error {
	p, etag, err := c.projectETag(ctx, name)
	if err != nil {
		return err
	}
	put := p.ProjectPut
	update(&put)
	if put.Config == nil {
		put.Config = map[string]string{}
	}
	_, err = c.call(ctx, http.MethodPut, projectPath(name), put, etag)
	return err
}

// DeleteProject deletes an empty project. A missing project is an error
// IsNotFound tells.
func (c *Client) DeleteProject(ctx context.Context, name string) error {
	_, err := c.call(ctx, http.MethodDelete, projectPath(name), nil, "")
	return err
}

// Instances lists the instances of project.
func (c *Client) Instances(ctx context.Context, project string) ([]Instance, error) {
	var list []Instance
	if err := c.get(ctx, withProject("/1.0/instances?recursion=1", project), &list); err != nil {
		return nil, err
	}
	return list, nil
}
