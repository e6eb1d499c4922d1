package provider

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// addressesModel is switchyard_incus_addresses's data.
type addressesModel struct {
	Instance types.String `tfsdk:"instance"`
	Project  types.String `tfsdk:"project"`
	IPv4     types.List   `tfsdk:"ipv4"`
	IPv6     types.List   `tfsdk:"ipv6"`
}

// addresses is the switchyard_incus_addresses data source: the global
// addresses of a running instance's Incus NICs as the daemon reports them, for
// the A and AAAA records of a node.
type addresses struct {
	c   *api.Client
	err error // the remote could not be opened
}

func newAddresses() datasource.DataSource { return &addresses{} }

// Configure reaches the run's Incus remote.
func (d *addresses) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	_, d.c, d.err = incusOf(req.ProviderData, &resp.Diagnostics)
}

var _ datasource.DataSource = (*addresses)(nil)

func (d *addresses) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_incus_addresses"
}

func (d *addresses) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The global addresses of an Incus instance as the daemon reports them (its network state) on the NICs " +
			"Incus attached to it (by MAC address; not the loopback interface, nor bridges or tunnels made inside the instance), without " +
			"loopback and link-local addresses, once they stayed the same for 2 s; an error when it has none after 30 s.",
		Attributes: map[string]schema.Attribute{
			"instance": schema.StringAttribute{Required: true, Description: "the instance's name"},
			"project":  schema.StringAttribute{Required: true, Description: "the instance's Incus project"},
			"ipv4": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				Description: "the instance's global IPv4 addresses, sorted"},
			"ipv6": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				Description: "the instance's global IPv6 addresses, sorted"},
		},
	}
}

func (d *addresses) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m addressesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !usableIncus(d.c, d.err, &resp.Diagnostics) {
		return
	}
	label := "incus instance " + m.Project.ValueString() + "/" + m.Instance.ValueString()
	v4, v6, err := d.settled(ctx, m.Project.ValueString(), m.Instance.ValueString(), addressesDeadline)
	if err != nil {
		resp.Diagnostics.AddError(label+": addresses", fmt.Sprintf("%s: %v", label, err))
		return
	}
	l4, diags := types.ListValueFrom(ctx, types.StringType, v4)
	resp.Diagnostics.Append(diags...)
	l6, diags := types.ListValueFrom(ctx, types.StringType, v6)
	resp.Diagnostics.Append(diags...)
	m.IPv4, m.IPv6 = l4, l6
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// The addresses are published once they settled: the same for addressesSettle (IPv6
// SLAAC, DAD and a DHCP lease come at their own pace after boot), within
// addressesDeadline. A node with none by then is an error, never an empty RRset.
const (
	addressesSettle   = 2 * time.Second
	addressesDeadline = 30 * time.Second
	addressesPoll     = 500 * time.Millisecond
)

// settled reads the instance's addresses on the NICs Incus attached until they have
// been the same, and not empty, for addressesSettle; after wait it returns the last
// read, or an error when that is still empty. Each read is bounded by ctx and the
// client's own timeouts.
func (d *addresses) settled(ctx context.Context, project, name string, wait time.Duration) (v4, v6 []string, err error) {
	deadline := time.Now().Add(wait)
	var last string
	var since time.Time
	for {
		inst, err := d.c.Instance(ctx, project, name)
		if err != nil {
			return nil, nil, fmt.Errorf("instance: %w", err)
		}
		st, err := d.c.InstanceState(ctx, project, name)
		if err != nil {
			return nil, nil, fmt.Errorf("network state: %w", err)
		}
		v4, v6 = globalAddresses(attachedNICs(inst.Config, st.Network))
		key := strings.Join(v4, " ") + "|" + strings.Join(v6, " ")
		if key != last {
			last, since = key, time.Now()
		}
		found := len(v4)+len(v6) > 0
		switch {
		case found && (time.Since(since) >= addressesSettle || time.Now().After(deadline)):
			return v4, v6, nil
		case time.Now().After(deadline):
			return nil, nil, fmt.Errorf("no global address on the instance's Incus NICs after %s: "+
				"its A and AAAA records are not published empty", wait)
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("addresses: %w", ctx.Err())
		case <-time.After(addressesPoll):
		}
	}
}

// attachedNICs are the interfaces of network that Incus attached to the instance (a
// nic device): those with the MAC address the daemon recorded for one of its devices
// (volatile.<device>.hwaddr). Interfaces made inside the instance (a container
// runtime's bridge, a VPN, a veth pair) are not the node's address for others. The
// state's host_name does not tell them apart: for a veth pair made inside, Incus
// names whatever host interface has its peer's ifindex (recorded in
// testdata/incus-state-p2p.json). An instance Incus attached no NIC to has no
// address but the ones made inside it: all of them are its own.
func attachedNICs(config map[string]string, network map[string]api.InstanceNetwork) map[string]api.InstanceNetwork {
	hwaddrs := map[string]bool{}
	for k, v := range config {
		if strings.HasPrefix(k, "volatile.") && strings.HasSuffix(k, ".hwaddr") && v != "" {
			hwaddrs[strings.ToLower(v)] = true
		}
	}
	if len(hwaddrs) == 0 {
		return network
	}
	out := map[string]api.InstanceNetwork{}
	for name, nic := range network {
		if nic.Hwaddr != "" && hwaddrs[strings.ToLower(nic.Hwaddr)] {
			out[name] = nic
		}
	}
	return out
}

// globalAddresses are the IPv4 and IPv6 addresses of the interfaces, sorted
// and without duplicates, leaving out the loopback interface and loopback,
// link-local, unspecified and multicast addresses.
func globalAddresses(network map[string]api.InstanceNetwork) (v4, v6 []string) {
	seen := map[netip.Addr]bool{}
	var addrs []netip.Addr
	for name, nic := range network {
		if name == "lo" || nic.Type == "loopback" {
			continue
		}
		for _, a := range nic.Addresses {
			ip, err := netip.ParseAddr(strings.TrimSpace(a.Address))
			if err != nil {
				continue
			}
			ip = ip.WithZone("").Unmap()
			if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() ||
				ip.IsUnspecified() || seen[ip] {
				continue
			}
			seen[ip] = true
			addrs = append(addrs, ip)
		}
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
	v4, v6 = []string{}, []string{}
	for _, ip := range addrs {
		if ip.Is4() {
			v4 = append(v4, ip.String())
		} else {
			v6 = append(v6, ip.String())
		}
	}
	return v4, v6
}
