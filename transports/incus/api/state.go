package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// InstanceAddress is one address of an instance's interface.
type InstanceAddress struct {
	Family  string `json:"family"` // "inet" or "inet6"
	Address string `json:"address"`
	Netmask string `json:"netmask"`
	Scope   string `json:"scope"` // "global", "link", "local"
}

// InstanceNetwork is one network interface of a running instance.
type InstanceNetwork struct {
	Addresses []InstanceAddress `json:"addresses"`
	HostName  string            `json:"host_name"`
	Hwaddr    string            `json:"hwaddr"`
	Mtu       int               `json:"mtu"`
	State     string            `json:"state"`
	Type      string            `json:"type"` // "loopback", "broadcast", "point-to-point", ...
}

// InstanceState is what GET /1.0/instances/<name>/state tells; Network is
// empty while the instance is stopped.
type InstanceState struct {
	Status     string                     `json:"status"`
	StatusCode int                        `json:"status_code"`
	Pid        int64                      `json:"pid"`
	Network    map[string]InstanceNetwork `json:"network"`
}

// InstanceState reads the state of instance name of project. A missing
// instance (or project) is an error IsNotFound tells.
func (c *Client) InstanceState(ctx context.Context, project, name string) (*InstanceState, error) {
	var st InstanceState
	r, err := c.do(ctx, http.MethodGet, withProject(instancePath(name, "state"), project), nil)
	if err != nil {
		return nil, err
	}
	if err := jsonUnmarshal(r.Metadata, &st, "instance "+name+" state"); err != nil {
		return nil, err
	}
	return &st, nil
}

// jsonUnmarshal decodes an answer's metadata, naming what it is in the error.
func jsonUnmarshal(data []byte, out any, what string) error {
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("incus API: %s not understood: %w", what, err)
	}
	return nil
}
