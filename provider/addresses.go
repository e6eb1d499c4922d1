package provider

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

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
// addresses of a running instance as the daemon reports them, for the A and
// AAAA records of a node.
type addresses struct {
	c   *api.Client
	err error // the remote could not be opened
}

func newAddresses() datasource.DataSource {
	c, err := incusClient()
	return &addresses{c: c, err: err}
}

var _ datasource.DataSource = (*addresses)(nil)

func (d *addresses) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_incus_addresses"
}

func (d *addresses) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The global addresses of an Incus instance as the daemon reports them (its network state), without " +
			"the loopback interface, loopback and link-local addresses.",
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
	if d.err != nil {
		resp.Diagnostics.AddError("incus remote", d.err.Error())
		return
	}
	label := "incus instance " + m.Project.ValueString() + "/" + m.Instance.ValueString()
	st, err := d.c.InstanceState(ctx, m.Project.ValueString(), m.Instance.ValueString())
	if err != nil {
		resp.Diagnostics.AddError(label+": addresses", fmt.Sprintf("%s: network state: %v", label, err))
		return
	}
	v4, v6 := globalAddresses(st.Network)
	l4, diags := types.ListValueFrom(ctx, types.StringType, v4)
	resp.Diagnostics.Append(diags...)
	l6, diags := types.ListValueFrom(ctx, types.StringType, v6)
	resp.Diagnostics.Append(diags...)
	m.IPv4, m.IPv6 = l4, l6
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
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
