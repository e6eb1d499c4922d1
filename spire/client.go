package spire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	agentv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/agent/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Client talks to a SPIRE server's API over its unix socket, where local
// callers are admins. It is safe for concurrent use.
type Client struct {
	addr   string
	conn   *grpc.ClientConn
	agents agentv1.AgentClient
	entry  entryv1.EntryClient
	health grpc_health_v1.HealthClient
}

// Dial makes a client of the server API at addr, "unix:///path/api.sock". It
// does not talk to the server: the first call does. A host:port address would
// need the server's trust bundle and an admin SVID (mTLS), which switchyard
// does not manage yet, so it is refused.
func Dial(ctx context.Context, addr string) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, ok := strings.CutPrefix(addr, "unix://")
	switch {
	case !ok && addr != "" && !strings.Contains(addr, "://"):
		return nil, fmt.Errorf("spireServer %s: not supported yet, give the server's unix socket (unix:///...)", addr)
	case !ok || !strings.HasPrefix(path, "/"):
		return nil, fmt.Errorf("spireServer %q: want unix:///<path of the server's API socket>", addr)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("spire server %s: %w", addr, err)
	}
	return &Client{
		addr:   addr,
		conn:   conn,
		agents: agentv1.NewAgentClient(conn),
		entry:  entryv1.NewEntryClient(conn),
		health: grpc_health_v1.NewHealthClient(conn),
	}, nil
}

// Addr is the server's address as given to Dial.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Healthy asks the server's health service whether it serves.
func (c *Client) Healthy(ctx context.Context) error {
	resp, err := c.health.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("spire server %s: health: %w", c.addr, err)
	}
	if resp.Status != grpc_health_v1.HealthCheckResponse_SERVING {
		return fmt.Errorf("spire server %s: health: %s", c.addr, resp.Status)
	}
	return nil
}

// Entry is a registration entry as switchyard manages it.
type Entry struct {
	ID        string
	SpiffeID  string
	ParentID  string
	Selectors []string // "type:value", e.g. "systemd:id:<unit>"
}

// Equal tells whether two entries say the same; selectors are a set.
func (e Entry) Equal(o Entry) bool {
	a, b := slices.Clone(e.Selectors), slices.Clone(o.Selectors)
	slices.Sort(a)
	slices.Sort(b)
	return e.ID == o.ID && e.SpiffeID == o.SpiffeID && e.ParentID == o.ParentID && slices.Equal(slices.Compact(a), slices.Compact(b))
}

func (e Entry) proto() (*types.Entry, error) {
	id, err := parseID(e.SpiffeID)
	if err != nil {
		return nil, err
	}
	parent, err := parseID(e.ParentID)
	if err != nil {
		return nil, err
	}
	if len(e.Selectors) == 0 {
		return nil, errors.New("no selector")
	}
	p := &types.Entry{
		Id:       e.ID,
		SpiffeId: &types.SPIFFEID{TrustDomain: id.td, Path: id.path},
		ParentId: &types.SPIFFEID{TrustDomain: parent.td, Path: parent.path},
	}
	for _, s := range e.Selectors {
		typ, value, err := parseSelector(s)
		if err != nil {
			return nil, err
		}
		p.Selectors = append(p.Selectors, &types.Selector{Type: typ, Value: value})
	}
	return p, nil
}

func fromProto(p *types.Entry) Entry {
	e := Entry{ID: p.GetId(), SpiffeID: protoID(p.GetSpiffeId()), ParentID: protoID(p.GetParentId())}
	for _, s := range p.GetSelectors() {
		e.Selectors = append(e.Selectors, s.GetType()+":"+redact(s.GetValue()))
	}
	slices.Sort(e.Selectors)
	return e
}

// protoID is id as a string. The agent ID join-token attestation gives holds the
// token: it is shown as RedactedToken instead.
func protoID(id *types.SPIFFEID) string {
	if id == nil {
		return ""
	}
	path := id.GetPath()
	if strings.HasPrefix(path, joinTokenParent) {
		path = joinTokenParent + RedactedToken
	}
	return spiffeID{td: id.GetTrustDomain(), path: path}.String()
}

// redact hides the join token in a selector value (an alias entry selects the
// token's agent ID: "spiffe_id:spiffe://<td>/spire/agent/join_token/<token>").
func redact(value string) string {
	if i := strings.Index(value, joinTokenParent); i >= 0 {
		return value[:i] + joinTokenParent + RedactedToken
	}
	return value
}

// RedactedToken stands for a join token in the IDs the client returns.
const RedactedToken = "REDACTED"

// entryMask is what switchyard reads and writes of an entry.
var entryMask = &types.EntryMask{SpiffeId: true, ParentId: true, Selectors: true}

// CreateJoinToken creates a join token, valid for ttl, whose agent is aliased
// to agentID: SPIRE creates the entry join-token-ID -> agentID, so workload
// entries name agentID as their parent and the token is never needed again.
// The token is a secret: it is returned and appears in no error.
func (c *Client) CreateJoinToken(ctx context.Context, agentID string, ttl time.Duration) (string, error) {
	id, err := parseID(agentID)
	if err != nil {
		return "", fmt.Errorf("spire server %s: join token for agent %s: %w", c.addr, agentID, err)
	}
	secs := int64(ttl / time.Second)
	if secs < 1 || secs > 1<<31-1 {
		return "", fmt.Errorf("spire server %s: join token for agent %s: ttl %s out of range (1s to 68 years)", c.addr, agentID, ttl)
	}
	tok, err := c.agents.CreateJoinToken(ctx, &agentv1.CreateJoinTokenRequest{
		Ttl:     int32(secs),
		AgentId: &types.SPIFFEID{TrustDomain: id.td, Path: id.path},
	})
	if err != nil {
		return "", fmt.Errorf("spire server %s: join token for agent %s: %w", c.addr, agentID, err)
	}
	if tok.GetValue() == "" {
		return "", fmt.Errorf("spire server %s: join token for agent %s: empty token", c.addr, agentID)
	}
	return tok.GetValue(), nil
}

// joinTokenParent is the path prefix of the agent IDs join-token attestation
// gives; the token follows it, so these IDs are never shown.
const joinTokenParent = "/spire/agent/join_token/"

// AgentAliases are the IDs of the alias entries SPIRE made for agentID's join
// tokens (parent under /spire/agent/join_token/).
func (c *Client) AgentAliases(ctx context.Context, agentID string) ([]string, error) {
	id, err := parseID(agentID)
	if err != nil {
		return nil, fmt.Errorf("spire server %s: agent %s: %w", c.addr, agentID, err)
	}
	var ids []string
	req := &entryv1.ListEntriesRequest{
		Filter:     &entryv1.ListEntriesRequest_Filter{BySpiffeId: &types.SPIFFEID{TrustDomain: id.td, Path: id.path}},
		OutputMask: &types.EntryMask{ParentId: true},
	}
	for {
		resp, err := c.entry.ListEntries(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("spire server %s: entries of agent %s: %w", c.addr, agentID, err)
		}
		for _, e := range resp.GetEntries() {
			if p := e.GetParentId(); p.GetTrustDomain() == id.td && strings.HasPrefix(p.GetPath(), joinTokenParent) {
				ids = append(ids, e.GetId())
			}
		}
		if resp.GetNextPageToken() == "" {
			return ids, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// DeleteAgent deletes the alias entries SPIRE made for agentID's join tokens,
// so that a token not used yet no longer gives that identity. An agent that
// attested with one keeps its own record: nothing else is deleted.
func (c *Client) DeleteAgent(ctx context.Context, agentID string) error {
	ids, err := c.AgentAliases(ctx, agentID)
	if err != nil {
		return err
	}
	if err := c.deleteEntries(ctx, ids); err != nil {
		return fmt.Errorf("spire server %s: agent %s: %w", c.addr, agentID, err)
	}
	return nil
}

// deleteEntries deletes entries by ID; one already gone is fine.
func (c *Client) deleteEntries(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	resp, err := c.entry.BatchDeleteEntry(ctx, &entryv1.BatchDeleteEntryRequest{Ids: ids})
	if err != nil {
		return fmt.Errorf("delete entries: %w", err)
	}
	var errs []error
	for _, r := range resp.GetResults() {
		if code := codes.Code(r.GetStatus().GetCode()); code != codes.OK && code != codes.NotFound {
			errs = append(errs, fmt.Errorf("delete entry %s: %s: %s", r.GetId(), code, r.GetStatus().GetMessage()))
		}
	}
	return errors.Join(errs...)
}

// Get reads entry id; false when there is none.
func (c *Client) Get(ctx context.Context, id string) (Entry, bool, error) {
	p, err := c.entry.GetEntry(ctx, &entryv1.GetEntryRequest{Id: id, OutputMask: entryMask})
	if status.Code(err) == codes.NotFound {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("spire server %s: entry %s: %w", c.addr, id, err)
	}
	return fromProto(p), true, nil
}

// Ensure makes entry e exist as given, under its own ID: it creates it, or
// updates the entry of that ID when it says something else. A second call
// creates nothing (created false).
func (c *Client) Ensure(ctx context.Context, e Entry) (created bool, err error) {
	fail := func(what string, err error) error {
		return fmt.Errorf("spire server %s: entry %s (%s): %s: %w", c.addr, e.ID, e.SpiffeID, what, err)
	}
	if e.ID == "" {
		return false, fail("create", errors.New("no entry ID"))
	}
	p, err := e.proto()
	if err != nil {
		return false, fail("create", err)
	}
	// A similar entry (same SPIFFE ID, parent and selectors) under another ID
	// answers ALREADY_EXISTS too, and an existing ID with other content fails
	// as a database conflict: reading first tells the cases apart.
	have, ok, err := c.Get(ctx, e.ID)
	if err != nil {
		return false, err
	}
	if ok {
		if have.Equal(e) {
			return false, nil
		}
		return false, c.update(ctx, p, fail)
	}
	resp, err := c.entry.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{p}, OutputMask: entryMask})
	if err != nil {
		return false, fail("create", err)
	}
	if len(resp.GetResults()) != 1 {
		return false, fail("create", fmt.Errorf("%d results for one entry", len(resp.GetResults())))
	}
	r := resp.GetResults()[0]
	switch code := codes.Code(r.GetStatus().GetCode()); {
	case code == codes.OK:
		return true, nil
	case code == codes.AlreadyExists && r.GetEntry().GetId() == e.ID:
		// Created by a concurrent call between the read and the create.
		return false, nil
	case code == codes.AlreadyExists:
		return false, fail("create", fmt.Errorf("the same entry exists under another ID, %s (made outside switchyard?)", r.GetEntry().GetId()))
	default:
		return false, fail("create", fmt.Errorf("%s: %s", code, r.GetStatus().GetMessage()))
	}
}

func (c *Client) update(ctx context.Context, p *types.Entry, fail func(string, error) error) error {
	resp, err := c.entry.BatchUpdateEntry(ctx, &entryv1.BatchUpdateEntryRequest{
		Entries: []*types.Entry{p}, InputMask: entryMask, OutputMask: entryMask})
	if err != nil {
		return fail("update", err)
	}
	if len(resp.GetResults()) != 1 {
		return fail("update", fmt.Errorf("%d results for one entry", len(resp.GetResults())))
	}
	if st := resp.GetResults()[0].GetStatus(); codes.Code(st.GetCode()) != codes.OK {
		return fail("update", fmt.Errorf("%s: %s", codes.Code(st.GetCode()), st.GetMessage()))
	}
	return nil
}

// Delete deletes entry id; an entry already gone is fine.
func (c *Client) Delete(ctx context.Context, id string) error {
	if err := c.deleteEntries(ctx, []string{id}); err != nil {
		return fmt.Errorf("spire server %s: %w", c.addr, err)
	}
	return nil
}

// List lists the entries whose parent is parentID ("": all entries).
func (c *Client) List(ctx context.Context, parentID string) ([]Entry, error) {
	req := &entryv1.ListEntriesRequest{OutputMask: entryMask}
	if parentID != "" {
		id, err := parseID(parentID)
		if err != nil {
			return nil, fmt.Errorf("spire server %s: entries: %w", c.addr, err)
		}
		req.Filter = &entryv1.ListEntriesRequest_Filter{ByParentId: &types.SPIFFEID{TrustDomain: id.td, Path: id.path}}
	}
	var out []Entry
	for {
		resp, err := c.entry.ListEntries(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("spire server %s: entries: %w", c.addr, err)
		}
		for _, p := range resp.GetEntries() {
			out = append(out, fromProto(p))
		}
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}
