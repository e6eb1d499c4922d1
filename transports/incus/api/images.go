package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Images lists the local images of project (a project without images of its
// own, features.images false, shows the default project's).
func (c *Client) Images(ctx context.Context, project string) ([]Image, error) {
	var list []Image
	if err := c.get(ctx, withProject("/1.0/images?recursion=1", project), &list); err != nil {
		return nil, err
	}
	return list, nil
}

// DeleteImage deletes the image of fingerprint from project and waits until it
// is gone; the daemon keeps its files while another project holds the same
// image. A missing image is an error IsNotFound tells.
func (c *Client) DeleteImage(ctx context.Context, project, fingerprint string) error {
	_, err := c.call(ctx, http.MethodDelete, withProject("/1.0/images/"+url.PathEscape(fingerprint), project), nil, "")
	return err
}

// SetImageProperties sets properties of the image of fingerprint in project,
// keeping its others (PATCH merges them).
func (c *Client) SetImageProperties(ctx context.Context, project, fingerprint string, props map[string]string) error {
	_, err := c.call(ctx, http.MethodPatch, withProject("/1.0/images/"+url.PathEscape(fingerprint), project),
		map[string]any{"properties": props}, "")
	return err
}

// CopyImage copies the image of fingerprint from project from into project to
// and waits until it is there. The export is streamed into the upload as the
// daemon sends it (a unified tarball, or the multipart form of a split image,
// which is the form the upload takes): Incus 6.0 copies an image between
// projects of one server only by pulling it from its own HTTPS address, which
// a daemon listening on its unix socket alone does not have. The image keeps
// its fingerprint; its aliases are not copied.
func (c *Client) CopyImage(ctx context.Context, from, to, fingerprint string) error {
	if c.broken != nil {
		return c.broken
	}
	exportPath := withProject("/1.0/images/"+url.PathEscape(fingerprint)+"/export", from)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.httpBase+exportPath, nil)
	if err != nil {
		return err
	}
	export, err := c.http.Do(req)
	if err != nil {
		return c.transportErr(ctx, err)
	}
	defer export.Body.Close()
	if export.StatusCode != http.StatusOK {
		_, err := c.envelope(ctx, export, http.MethodGet, exportPath)
		if err == nil {
			err = &Error{Code: export.StatusCode}
		}
		return err
	}
	uploadPath := withProject("/1.0/images", to)
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, c.httpBase+uploadPath, export.Body)
	if err != nil {
		return err
	}
	up.ContentLength = export.ContentLength
	ct := export.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	up.Header.Set("Content-Type", ct)
	up.Header.Set("X-Incus-fingerprint", fingerprint)
	resp, err := c.http.Do(up)
	if err != nil {
		return c.transportErr(ctx, err)
	}
	defer resp.Body.Close()
	r, err := c.envelope(ctx, resp, http.MethodPost, uploadPath)
	if err != nil {
		return err
	}
	return c.waitAnswer(ctx, r, http.MethodPost, uploadPath)
}

// transportErr is a failure to send a request: the context's end, else a
// *DialError.
func (c *Client) transportErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &DialError{err}
}

// envelope decodes the standard answer of resp; an error answer is an *Error.
func (c *Client) envelope(ctx context.Context, resp *http.Response, method, path string) (*response, error) {
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
	return &r, nil
}

// waitAnswer waits, when r is a background operation, until it has ended; a
// failed operation is an *Error.
func (c *Client) waitAnswer(ctx context.Context, r *response, method, path string) error {
	if r.Type != "async" {
		return nil
	}
	var op operation
	if err := json.Unmarshal(r.Metadata, &op); err != nil {
		return fmt.Errorf("incus API: %s %s: operation not understood: %w", method, path, err)
	}
	if op.ID == "" {
		op.ID = strings.TrimPrefix(r.Operation, "/1.0/operations/")
	}
	end, err := c.wait(ctx, op.ID)
	if err != nil {
		return err
	}
	if end.StatusCode != statusSuccess {
		msg := end.Err
		if msg == "" {
			msg = "operation " + end.Status
		}
		return &Error{Code: statusFailure, Msg: msg}
	}
	return nil
}
