// Package api is a small typed client of the Incus REST API, over the daemon's
// local unix socket or over HTTPS with a client certificate.
package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// DefaultSocket is the local daemon's unix socket when INCUS_DIR is not set.
const DefaultSocket = "/var/lib/incus/unix.socket"

// Socket is the local daemon's unix socket: $INCUS_DIR/unix.socket when
// INCUS_DIR is set, else DefaultSocket.
func Socket() string {
	if dir := os.Getenv("INCUS_DIR"); dir != "" {
		return filepath.Join(dir, "unix.socket")
	}
	return DefaultSocket
}

// Client is a small typed client of the Incus REST API, over the daemon's local
// unix socket (New) or over HTTPS to a remote (NewRemote): JSON requests with
// the standard response envelope, background operations and their websockets.
// It is safe for concurrent use.
type Client struct {
	where    string // the socket's path, or the remote's host:port
	httpBase string // scheme and host of the API's URLs
	wsBase   string // the same for websockets
	http     *http.Client
	ws       *websocket.Dialer
	broken   error // NewRemote's error: every request fails with it
}

// New makes a client of the daemon listening on socket ("": Socket()). It does
// not talk to the daemon: the first request does.
func New(socket string) *Client {
	if socket == "" {
		socket = Socket()
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	// The host part of the URLs is never resolved: every connection goes to the socket.
	// No connection is kept idle: incusd's unix socket listener (Incus 6.0's
	// StarttlsListener) peeks at each connection's first bytes inside Accept, so a
	// connection that stays silent stops the daemon from accepting anyone else's
	// until it closes (canonical/lxd#18705, fixed there by PR #18819). net/http keeps a
	// connection it dialed for a request that another connection served, unused and
	// silent, in the idle pool; with keep-alives off it closes it instead. A local
	// connection per request costs next to nothing.
	return &Client{
		where:    socket,
		httpBase: "http://incus",
		wsBase:   "ws://incus",
		http:     &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}},
		ws:       &websocket.Dialer{NetDialContext: dial},
	}
}

// DefaultPort is the port of an HTTPS address given without one.
const DefaultPort = "8443"

// NewRemote makes a client of the daemon at addr ("https://host[:port]" or
// "host[:port]"; port default 8443) over HTTPS, requests and websockets (wss)
// alike, with the TLS configuration tlsConf (the client certificate and how the
// server's is verified; see PinnedTLS). It does not talk to the daemon: the
// first request does. An addr HostPort refuses, or a nil tlsConf, fails every
// request.
func NewRemote(addr string, tlsConf *tls.Config) *Client {
	hostPort, err := HostPort(addr)
	if err == nil && tlsConf == nil {
		err = fmt.Errorf("incus remote %s: no TLS configuration", hostPort)
	}
	if err != nil {
		return &Client{where: addr, broken: err, http: &http.Client{}, ws: &websocket.Dialer{}}
	}
	tr := &http.Transport{
		TLSClientConfig:     tlsConf.Clone(),
		MaxIdleConns:        4,
		TLSHandshakeTimeout: 30 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &Client{
		where:    hostPort,
		httpBase: "https://" + hostPort,
		wsBase:   "wss://" + hostPort,
		http:     &http.Client{Transport: tr},
		ws: &websocket.Dialer{
			TLSClientConfig:  tlsConf.Clone(),
			HandshakeTimeout: 30 * time.Second,
			NetDialContext:   (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		},
	}
}

// HostPort is the host:port of an HTTPS address: "https://host[:port][/]" or
// "host[:port]", port default 8443.
func HostPort(addr string) (string, error) {
	s := addr
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", fmt.Errorf("incus address %q: %w", addr, err)
		}
		if u.Scheme != "https" {
			return "", fmt.Errorf("incus address %q: want https://", addr)
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return "", fmt.Errorf("incus address %q: want https://host[:port] alone", addr)
		}
		s = u.Host
	}
	if s == "" || strings.ContainsAny(s, "/?#@ \t") {
		return "", fmt.Errorf("incus address %q: want https://host[:port]", addr)
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		// No port, or an IPv6 address without brackets.
		h := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		s = net.JoinHostPort(h, DefaultPort)
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", fmt.Errorf("incus address %q: %w", addr, err)
		}
	}
	return s, nil
}

// Where is the socket's path or the remote's host:port.
func (c *Client) Where() string { return c.where }

// response is the envelope of every API answer (type "sync", "async" or "error").
type response struct {
	Type       string          `json:"type"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation"`
	ErrorCode  int             `json:"error_code"`
	Error      string          `json:"error"`
	Metadata   json.RawMessage `json:"metadata"`

	etag string // the ETag header of the answer
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

// Error is an error answer of the API, or a failed background operation.
type Error struct {
	Code int // HTTP status (a failed operation: its status code, 400)
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("incus API: HTTP %d", e.Code)
	}
	return "incus API: " + e.Msg
}

// DialError is a failure to reach the daemon (socket missing, refused, cut).
type DialError struct{ Err error }

func (e *DialError) Error() string { return e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// withProject adds project (when not empty) to path.
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
// envelope; an error answer is an *Error, a transport failure a *DialError.
func (c *Client) do(ctx context.Context, method, path string, body any) (*response, error) {
	return c.doETag(ctx, method, path, body, "")
}

// doETag is do with an If-Match header when etag is not empty; the answer's
// ETag is kept in response.etag.
func (c *Client) doETag(ctx context.Context, method, path string, body any, etag string) (*response, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.httpBase+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if etag != "" {
		req.Header.Set("If-Match", etag)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &DialError{err}
	}
	defer resp.Body.Close()
	var r response
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&r); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &DialError{fmt.Errorf("%s %s: answer not understood (HTTP %d): %w", method, path, resp.StatusCode, err)}
	}
	if r.Type == "error" || resp.StatusCode >= 400 {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &Error{Code: code, Msg: r.Error}
	}
	r.etag = resp.Header.Get("ETag")
	return &r, nil
}

// get GETs path and decodes the metadata of the sync answer into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
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
func (c *Client) postAsync(ctx context.Context, path string, body any) (*operation, error) {
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
func (c *Client) wait(ctx context.Context, id string) (*operation, error) {
	var op operation
	if err := c.get(ctx, "/1.0/operations/"+url.PathEscape(id)+"/wait?timeout=-1", &op); err != nil {
		return nil, err
	}
	return &op, nil
}

// websocket connects to one of an operation's websockets.
func (c *Client) websocket(ctx context.Context, id, secret string) (*websocket.Conn, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	u := c.wsBase + "/1.0/operations/" + url.PathEscape(id) + "/websocket?secret=" + url.QueryEscape(secret)
	conn, resp, err := c.ws.DialContext(ctx, u, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if resp != nil {
			defer resp.Body.Close()
			var r response
			if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r) == nil && r.Error != "" {
				return nil, &Error{Code: resp.StatusCode, Msg: r.Error}
			}
			return nil, &Error{Code: resp.StatusCode, Msg: "websocket: " + err.Error()}
		}
		return nil, &DialError{err}
	}
	return conn, nil
}

// Close releases the idle connections to the daemon; the client stays usable.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
}

// IsDial tells whether err is a failure to reach the daemon.
func IsDial(err error) bool {
	var d *DialError
	return errors.As(err, &d)
}

// Code is the HTTP status of an API error answer, 0 for other errors.
func Code(err error) int {
	var a *Error
	if errors.As(err, &a) {
		return a.Code
	}
	return 0
}

// IsNotFound tells whether err is the API's answer that the object asked for
// (instance, project, image alias, operation) does not exist.
func IsNotFound(err error) bool {
	return Code(err) == http.StatusNotFound
}
