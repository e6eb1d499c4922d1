package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// File types of the files API (the X-Incus-type header).
const (
	FileTypeFile      = "file"
	FileTypeDirectory = "directory"
	FileTypeSymlink   = "symlink"
)

// FileMeta is the owner and permission bits of a file in an instance.
type FileMeta struct {
	UID, GID int64
	Mode     fs.FileMode // permission bits only (0600, 0755, ...)
}

// File is a file of an instance as the files API tells it.
type File struct {
	FileMeta
	Type    string // FileTypeFile, FileTypeDirectory, FileTypeSymlink
	Content []byte // a file's content (a directory: nothing)
}

// maxFile bounds what File reads of a file.
const maxFile = 64 << 20

func filePath(name, p, project string) string {
	return withProject(instancePath(name, "files")+"?path="+url.QueryEscape(p), project)
}

// checkFilePath refuses a path the API would resolve somewhere unexpected.
func checkFilePath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return fmt.Errorf("file path %q: want a clean absolute path", p)
	}
	return nil
}

// fileRequest sends one request to the files API; an error answer (a JSON
// envelope) is an *Error, a transport failure a *DialError. The caller closes
// the answer's body.
func (c *Client) fileRequest(ctx context.Context, method, target string, hdr http.Header, body []byte) (*http.Response, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.httpBase+target, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &DialError{err}
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var r response
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r) != nil || r.Error == "" {
			return nil, &Error{Code: resp.StatusCode}
		}
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &Error{Code: code, Msg: r.Error}
	}
	return resp, nil
}

// post creates (or overwrites) one file or directory.
func (c *Client) postFile(ctx context.Context, project, name, p, typ string, meta FileMeta, content []byte) error {
	hdr := http.Header{}
	hdr.Set("X-Incus-type", typ)
	hdr.Set("X-Incus-uid", strconv.FormatInt(meta.UID, 10))
	hdr.Set("X-Incus-gid", strconv.FormatInt(meta.GID, 10))
	hdr.Set("X-Incus-mode", fmt.Sprintf("%04o", meta.Mode.Perm()))
	if typ == FileTypeFile {
		hdr.Set("Content-Type", "application/octet-stream")
		hdr.Set("X-Incus-write", "overwrite")
	}
	if content == nil {
		content = []byte{}
	}
	resp, err := c.fileRequest(ctx, http.MethodPost, filePath(name, p, project), hdr, content)
	if err != nil {
		return fmt.Errorf("instance %s: write %s: %w", name, p, err)
	}
	resp.Body.Close()
	return nil
}

// PushFile writes content to the file p of instance name in project ("": the
// default project), replacing it, owned by meta.UID:meta.GID with meta.Mode.
// The parent directory must exist (MkdirAll). The content appears in no error.
//
// The daemon keeps an existing file's owner and mode when it overwrites it: a
// file whose owner or mode differ is deleted first, so that a secret is never
// written into a file more open than asked.
func (c *Client) PushFile(ctx context.Context, project, name, p string, content []byte, meta FileMeta) error {
	if err := checkFilePath(p); err != nil {
		return fmt.Errorf("instance %s: %w", name, err)
	}
	have, err := c.head(ctx, project, name, p)
	switch {
	case IsNotFound(err):
	case err != nil:
		return fmt.Errorf("instance %s: write %s: %w", name, p, err)
	case have.Type != FileTypeFile:
		return fmt.Errorf("instance %s: write %s: it is a %s", name, p, have.Type)
	case have.FileMeta != FileMeta{UID: meta.UID, GID: meta.GID, Mode: meta.Mode.Perm()}:
		if err := c.DeleteFile(ctx, project, name, p); err != nil && !IsNotFound(err) {
			return err
		}
	}
	return c.postFile(ctx, project, name, p, FileTypeFile, meta, content)
}

// MkdirAll creates directory dir of instance name and every missing parent,
// each owned by meta.UID:meta.GID with meta.Mode; directories that exist are
// left as they are. A path on the way that is not a directory is an error.
func (c *Client) MkdirAll(ctx context.Context, project, name, dir string, meta FileMeta) error {
	if err := checkFilePath(dir); err != nil {
		return fmt.Errorf("instance %s: %w", name, err)
	}
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		if part == "" {
			continue
		}
		p += "/" + part
		f, err := c.head(ctx, project, name, p)
		switch {
		case err == nil && f.Type == FileTypeDirectory:
			continue
		case err == nil:
			return fmt.Errorf("instance %s: mkdir %s: %s is a %s", name, dir, p, f.Type)
		case !IsNotFound(err):
			return fmt.Errorf("instance %s: mkdir %s: %w", name, dir, err)
		}
		if err := c.postFile(ctx, project, name, p, FileTypeDirectory, meta, nil); err != nil {
			return err
		}
	}
	return nil
}

// File reads the file p of instance name: its type, owner, mode and (for a
// file) content. A missing file (or instance) is an error IsNotFound tells.
func (c *Client) File(ctx context.Context, project, name, p string) (*File, error) {
	if err := checkFilePath(p); err != nil {
		return nil, fmt.Errorf("instance %s: %w", name, err)
	}
	f, err := c.read(ctx, project, name, p, true)
	if err != nil {
		return nil, fmt.Errorf("instance %s: read %s: %w", name, p, err)
	}
	return f, nil
}

// Stat reads the type, owner and mode of the file p of instance name, not its
// content. A missing file (or instance) is an error IsNotFound tells.
func (c *Client) Stat(ctx context.Context, project, name, p string) (*File, error) {
	if err := checkFilePath(p); err != nil {
		return nil, fmt.Errorf("instance %s: %w", name, err)
	}
	f, err := c.head(ctx, project, name, p)
	if err != nil {
		return nil, fmt.Errorf("instance %s: stat %s: %w", name, p, err)
	}
	return f, nil
}

// head is File without the content.
func (c *Client) head(ctx context.Context, project, name, p string) (*File, error) {
	return c.read(ctx, project, name, p, false)
}

// readRetries are the waits before asking a read again after a server error.
// Incus serves the files API through a per-instance forkfile SFTP helper that
// stops itself after ten idle seconds; a request arriving as it stops fails with
// HTTP 500 ("read unix @->/proc/self/fd/N/forkfile.sock: ... connection reset by
// peer"), and the next request starts a new helper. A read changes nothing, so it
// is asked again.
var readRetries = []time.Duration{200 * time.Millisecond, time.Second}

func (c *Client) read(ctx context.Context, project, name, p string, content bool) (*File, error) {
	resp, err := c.fileRequest(ctx, http.MethodGet, filePath(name, p, project), nil, nil)
	for _, wait := range readRetries {
		if Code(err) < http.StatusInternalServerError {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		resp, err = c.fileRequest(ctx, http.MethodGet, filePath(name, p, project), nil, nil)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	f := &File{Type: resp.Header.Get("X-Incus-type")}
	for _, h := range []struct {
		name string
		into *int64
	}{{"X-Incus-uid", &f.UID}, {"X-Incus-gid", &f.GID}} {
		if *h.into, err = strconv.ParseInt(resp.Header.Get(h.name), 10, 64); err != nil {
			return nil, fmt.Errorf("%s: %w", h.name, err)
		}
	}
	// The daemon sends the mode in octal with a leading zero ("0600").
	mode, err := strconv.ParseUint(resp.Header.Get("X-Incus-mode"), 8, 32)
	if err != nil {
		return nil, fmt.Errorf("X-Incus-mode: %w", err)
	}
	f.Mode = fs.FileMode(mode).Perm()
	if content && f.Type == FileTypeFile {
		if f.Content, err = io.ReadAll(io.LimitReader(resp.Body, maxFile+1)); err != nil {
			return nil, err
		}
		if len(f.Content) > maxFile {
			return nil, fmt.Errorf("larger than %d bytes", maxFile)
		}
	}
	return f, nil
}

// DeleteFile deletes the file (or empty directory) p of instance name. A
// missing file is an error IsNotFound tells.
func (c *Client) DeleteFile(ctx context.Context, project, name, p string) error {
	if err := checkFilePath(p); err != nil {
		return fmt.Errorf("instance %s: %w", name, err)
	}
	resp, err := c.fileRequest(ctx, http.MethodDelete, filePath(name, p, project), nil, nil)
	if err != nil {
		return fmt.Errorf("instance %s: delete %s: %w", name, p, err)
	}
	resp.Body.Close()
	return nil
}
