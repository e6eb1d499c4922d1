package incus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"
)

// client is a small typed client of the Incus REST API over the daemon's local
// unix socket: JSON requests with the standard response envelope, background
// operations and their websockets.
type client struct {
	socket string
	http   *http.Client
	ws     *websocket.Dialer
}

func newClient(socket string) *client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	return &client{
		socket: socket,
		http:   &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConns: 4}},
		ws:     &websocket.Dialer{NetDialContext: dial},
	}
}

// The host part of the URLs is never resolved: every connection goes to the socket.
const (
	httpBase = "http://incus"
	wsBase   = "ws://incus"
)

// response is the envelope of every API answer (type "sync", "async" or "error").
type response struct {
	Type       string          `json:"type"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation"`
	ErrorCode  int             `json:"error_code"`
	Error      string          `json:"error"`
	Metadata   json.RawMessage `json:"metadata"`
}

// operation is a background operation (the metadata of an async response and
// of /1.0/operations/<id>).
type operation struct {
	ID         string          `json:"id"`
	Class      string          `json:"class"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Metadata   json.RawMessage `json:"metadata"`
	MayCancel  bool            `json:"may_cancel"`
	Err        string          `json:"err"`
}

// Operation status codes of the API.
const (
	statusSuccess = 200
	statusFailure = 400
)

// apiError is an error answer of the API.
type apiError struct {
	Code int // HTTP status
	Msg  string
}

func (e *apiError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("incus API: HTTP %d", e.Code)
	}
	return "incus API: " + e.Msg
}

// dialError is a failure to reach the daemon (socket missing, refused, cut).
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// query adds project (when not empty) to path.
func withProject(path, project string) string {
	if project == "" {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "project=" + url.QueryEscape(project)
}

// do sends one request (body marshalled as JSON when not nil) and decodes the
// envelope; an error answer is an *apiError, a transport failure a *dialError.
func (c *client) do(ctx context.Context, method, path string, body any) (*response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, httpBase+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &dialError{err}
	}
	defer resp.Body.Close()
	var r response
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&r); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &dialError{fmt.Errorf("%s %s: answer not understood (HTTP %d): %w", method, path, resp.StatusCode, err)}
	}
	if r.Type == "error" || resp.StatusCode >= 400 {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &apiError{Code: code, Msg: r.Error}
	}
	return &r, nil
}

// get GETs path and decodes the metadata of the sync answer into out.
func (c *client) get(ctx context.Context, path string, out any) error {
	r, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Metadata, out)
}

// postAsync POSTs body to path and returns the operation it started.
func (c *client) postAsync(ctx context.Context, path string, body any) (*operation, error) {
	r, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	if r.Type != "async" {
		return nil, fmt.Errorf("incus API: POST %s: %q answer, want an operation", path, r.Type)
	}
	var op operation
	if err := json.Unmarshal(r.Metadata, &op); err != nil {
		return nil, fmt.Errorf("incus API: POST %s: operation not understood: %w", path, err)
	}
	if op.ID == "" {
		op.ID = strings.TrimPrefix(r.Operation, "/1.0/operations/")
	}
	return &op, nil
}

// wait waits, without a time limit of its own, until the operation has ended
// and returns its final state; a cancelled ctx stops the wait.
func (c *client) wait(ctx context.Context, id string) (*operation, error) {
	var op operation
	if err := c.get(ctx, "/1.0/operations/"+url.PathEscape(id)+"/wait?timeout=-1", &op); err != nil {
		return nil, err
	}
	return &op, nil
}

// websocket connects to one of an operation's websockets.
func (c *client) websocket(ctx context.Context, id, secret string) (*websocket.Conn, error) {
	u := wsBase + "/1.0/operations/" + url.PathEscape(id) + "/websocket?secret=" + url.QueryEscape(secret)
	conn, resp, err := c.ws.DialContext(ctx, u, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if resp != nil {
			defer resp.Body.Close()
			var r response
			if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r) == nil && r.Error != "" {
				return nil, &apiError{Code: resp.StatusCode, Msg: r.Error}
			}
			return nil, &apiError{Code: resp.StatusCode, Msg: "websocket: " + err.Error()}
		}
		return nil, &dialError{err}
	}
	return conn, nil
}

// close releases idle connections to the daemon.
func (c *client) close() {
	c.http.CloseIdleConnections()
}

// isDial tells whether err is a failure to reach the daemon.
func isDial(err error) bool {
	var d *dialError
	return errors.As(err, &d)
}

// apiCode is the HTTP status of an API error answer, 0 for other errors.
func apiCode(err error) int {
	var a *apiError
	if errors.As(err, &a) {
		return a.Code
	}
	return 0
}
