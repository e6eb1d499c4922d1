package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// InstancePut is the part of an instance that PUT /1.0/instances/<name> replaces.
type InstancePut struct {
	Architecture string                       `json:"architecture,omitempty"`
	Config       map[string]string            `json:"config"`
	Devices      map[string]map[string]string `json:"devices"`
	Ephemeral    bool                         `json:"ephemeral"`
	Profiles     []string                     `json:"profiles"`
	Stateful     bool                         `json:"stateful"`
	Description  string                       `json:"description"`
}

// Instance is an instance as GET /1.0/instances/<name> tells it.
type Instance struct {
	InstancePut
	Name            string                       `json:"name"`
	Project         string                       `json:"project"`
	Type            string                       `json:"type"` // "container" or "virtual-machine"
	Status          string                       `json:"status"`
	StatusCode      int                          `json:"status_code"`
	CreatedAt       time.Time                    `json:"created_at"`
	LastUsedAt      time.Time                    `json:"last_used_at"`
	Location        string                       `json:"location"`
	ExpandedConfig  map[string]string            `json:"expanded_config"`
	ExpandedDevices map[string]map[string]string `json:"expanded_devices"`
}

// DefaultProject is the project of a request that names none.
const DefaultProject = "default"

// Instance types (Instance.Type, InstancesPost.Type).
const (
	TypeContainer = "container"
	TypeVM        = "virtual-machine"
)

// Instance statuses.
const (
	StatusRunning = "Running"
	StatusStopped = "Stopped"
)

// InstanceSource is where a new instance comes from. Only a local image is
// used here: Type "image" with Alias or Fingerprint (a unique prefix does).
type InstanceSource struct {
	Type        string `json:"type"`
	Alias       string `json:"alias,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

// InstancesPost is the body of POST /1.0/instances.
type InstancesPost struct {
	InstancePut
	Name   string         `json:"name"`
	Source InstanceSource `json:"source"`
	Type   string         `json:"type,omitempty"` // default "container"
	Start  bool           `json:"start"`
}

// InstanceStatePut is the body of PUT /1.0/instances/<name>/state.
type InstanceStatePut struct {
	Action   string `json:"action"` // start, stop, restart, freeze, unfreeze
	Timeout  int    `json:"timeout"`
	Force    bool   `json:"force"`
	Stateful bool   `json:"stateful"`
}

// ImageAlias is an image alias as GET /1.0/images/aliases/<name> tells it.
type ImageAlias struct {
	Name        string `json:"name"`
	Target      string `json:"target"` // the image's fingerprint
	Type        string `json:"type"`
	Description string `json:"description"`
}

// Image is a local image as GET /1.0/images/<fingerprint> tells it.
type Image struct {
	Fingerprint  string       `json:"fingerprint"`
	Aliases      []ImageAlias `json:"aliases"`
	Architecture string       `json:"architecture"`
	Type         string       `json:"type"`
	Size         int64        `json:"size"`
	// Properties are the image's free-form properties (os, release, ...).
	Properties map[string]string `json:"properties,omitempty"`
}

func instancePath(name string, sub ...string) string {
	p := "/1.0/instances/" + url.PathEscape(name)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// call sends one request and, when the daemon answers with a background
// operation, waits until it has ended; a failed operation is an *Error.
func (c *Client) call(ctx context.Context, method, path string, body any, etag string) (*response, error) {
	r, err := c.doETag(ctx, method, path, body, etag)
	if err != nil {
		return nil, err
	}
	if r.Type != "async" {
		return r, nil
	}
	var op operation
	if err := json.Unmarshal(r.Metadata, &op); err != nil {
		return nil, fmt.Errorf("incus API: %s %s: operation not understood: %w", method, path, err)
	}
	if op.ID == "" {
		op.ID = strings.TrimPrefix(r.Operation, "/1.0/operations/")
	}
	end, err := c.wait(ctx, op.ID)
	if err != nil {
		return nil, err
	}
	if end.StatusCode != statusSuccess {
		msg := end.Err
		if msg == "" {
			msg = "operation " + end.Status
		}
		return nil, &Error{Code: statusFailure, Msg: msg}
	}
	return r, nil
}

// Instance reads instance name of project ("": the default project). A
// missing instance (or project) is an error IsNotFound tells.
func (c *Client) Instance(ctx context.Context, project, name string) (*Instance, error) {
	inst, _, err := c.instanceETag(ctx, project, name)
	return inst, err
}

func (c *Client) instanceETag(ctx context.Context, project, name string) (*Instance, string, error) {
	r, err := c.do(ctx, http.MethodGet, withProject(instancePath(name), project), nil)
	if err != nil {
		return nil, "", err
	}
	var inst Instance
	if err := json.Unmarshal(r.Metadata, &inst); err != nil {
		return nil, "", fmt.Errorf("incus API: instance %s not understood: %w", name, err)
	}
	return &inst, r.etag, nil
}

// CreateInstance creates an instance in project and waits until it exists
// (started too when req.Start).
func (c *Client) CreateInstance(ctx context.Context, project string, req InstancesPost) error {
	_, err := c.call(ctx, http.MethodPost, withProject("/1.0/instances", project), req, "")
	return err
}

// UpdateInstance replaces the profiles, config and devices of instance name
// with what update makes of them: it reads the instance, calls update on its
// InstancePut and PUTs the result, guarded by the ETag of the read so that a
// concurrent change is not overwritten silently. The config handed to update
// holds the daemon's own keys (volatile.*, image.*) too, which it should keep.
func (c *Client) UpdateInstance(ctx context.Context, project, name string, update func(*InstancePut)) error {
	inst, etag, err := c.instanceETag(ctx, project, name)
	if err != nil {
		return err
	}
	put := inst.InstancePut
	if put.Config == nil {
		put.Config = map[string]string{}
	}
	if put.Devices == nil {
		put.Devices = map[string]map[string]string{}
	}
	update(&put)
	_, err = c.call(ctx, http.MethodPut, withProject(instancePath(name), project), put, etag)
	return err
}

// PatchInstance merges put's non-empty fields into instance name (PATCH: config
// keys are added or changed, never removed).
func (c *Client) PatchInstance(ctx context.Context, project, name string, put InstancePut) error {
	body := map[string]any{}
	if put.Config != nil {
		body["config"] = put.Config
	}
	if put.Devices != nil {
		body["devices"] = put.Devices
	}
	if put.Profiles != nil {
		body["profiles"] = put.Profiles
	}
	_, err := c.call(ctx, http.MethodPatch, withProject(instancePath(name), project), body, "")
	return err
}

// SetState changes the state of instance name (action "start", "stop",
// "restart", "freeze", "unfreeze"; force for a stop that does not wait for
// the instance to shut down) and waits until the change is done.
func (c *Client) SetState(ctx context.Context, project, name, action string, force bool) error {
	req := InstanceStatePut{Action: action, Force: force, Timeout: 60}
	_, err := c.call(ctx, http.MethodPut, withProject(instancePath(name, "state"), project), req, "")
	return err
}

// DeleteInstance deletes instance name (it must be stopped) and waits until it
// is gone. A missing instance is an error IsNotFound tells.
func (c *Client) DeleteInstance(ctx context.Context, project, name string) error {
	_, err := c.call(ctx, http.MethodDelete, withProject(instancePath(name), project), nil, "")
	return err
}

// ImageAlias reads the image alias name in project. A missing alias is an
// error IsNotFound tells.
func (c *Client) ImageAlias(ctx context.Context, project, name string) (*ImageAlias, error) {
	var a ImageAlias
	if err := c.get(ctx, withProject("/1.0/images/aliases/"+url.PathEscape(name), project), &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Image reads the local image of fingerprint (a unique prefix does) in project.
// A missing image is an error IsNotFound tells.
func (c *Client) Image(ctx context.Context, project, fingerprint string) (*Image, error) {
	var img Image
	if err := c.get(ctx, withProject("/1.0/images/"+url.PathEscape(fingerprint), project), &img); err != nil {
		return nil, err
	}
	return &img, nil
}
