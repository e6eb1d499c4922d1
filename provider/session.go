package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/transports"
	"github.com/switchyard-nix/switchyard/transports/incus"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
	"github.com/switchyard-nix/switchyard/transports/incus/clientconf"
)

// session is the run the provider serves, as its Configure read it once (the CLI's
// contract.Run and the DEPLOY_* variables), and what the resources of that run share:
// OpenTofu serves one run through one provider process, and the framework hands the
// session to every resource and data source it configures.
type session struct {
	run       contract.Run
	deploy    effects.Config
	deployErr error // a DEPLOY_* variable did not parse: every deploy is refused with it

	// outcomes is node to outcome: a stage's deploys end before the next stage's
	// start (depends_on), so the next stage reads them here.
	outcomes sync.Map
	// incus is the client of the run's Incus remote, opened once.
	incus func() (*api.Client, error)
	// cacheMu serialises the caching of images, so that the instances of one project
	// created at once copy an image once.
	cacheMu sync.Mutex
}

// newSession reads the run from getenv: the contract's variable and DEPLOY_*.
func newSession(getenv func(string) string) (*session, error) {
	run, err := contract.Decode(getenv)
	if err != nil {
		return nil, err
	}
	s := &session{run: run}
	bodyLogs.Store(newRelay(run.LogSocket))
	s.deploy, s.deployErr = effects.ConfigFromEnv(getenv)
	if s.deployErr == nil {
		s.deploy, s.deployErr = withRun(s.deploy, run)
	}
	s.incus = sync.OnceValues(func() (*api.Client, error) {
		ep, err := clientconf.OpenWithKey(run.IncusRemote, run.IncusClientKeyFile)
		if err != nil {
			return nil, err
		}
		return ep.Client(), nil
	})
	return s, nil
}

// withRun is cfg with the run's apply --mode, --reboot and --reboot-timeout, checked
// as the CLI checks them: a value the CLI would refuse refuses the run's deploys.
func withRun(cfg effects.Config, run contract.Run) (effects.Config, error) {
	mode, err := effects.ParseMode(run.Mode)
	if err != nil {
		return cfg, fmt.Errorf("%s mode: %w", contract.Env, err)
	}
	cfg.Mode, cfg.Reboot, cfg.RebootTimeout = mode, run.Reboot, time.Duration(run.RebootTimeout)
	if err := cfg.CheckReboot(); err != nil {
		return cfg, fmt.Errorf("%s reboot: %w", contract.Env, err)
	}
	return cfg, nil
}

// incusSpec reaches an instance through the run's Incus remote (the local daemon by
// default), with its client key when the run has one.
func (s *session) incusSpec(instance, project string) transports.Spec {
	return transports.Spec{Kind: transports.Incus, Incus: incus.Config{Instance: instance, Project: project,
		Remote: s.run.IncusRemote, KeyFile: s.run.IncusClientKeyFile}}
}

// journal is the deploy body's journal in the run's journal directory, or none.
func (s *session) journal() effects.Journal {
	if s.run.JournalDir != "" {
		return effects.FileJournal{Dir: s.run.JournalDir}
	}
	return nil
}

// errNotConfigured: the framework called a resource before the provider's Configure
// (it does so only for validation, which needs no session).
var errNotConfigured = errors.New("the switchyard provider is not configured")

// sessionOf is the session the framework hands a resource or data source; nil
// before the provider was configured.
func sessionOf(data any, diags *diag.Diagnostics) *session {
	if data == nil {
		return nil
	}
	s, ok := data.(*session)
	if !ok {
		diags.AddError("switchyard provider", fmt.Sprintf("unexpected provider data %T", data))
	}
	return s
}

// configured is embedded by the resources: their Configure keeps the session.
type configured struct{ s *session }

func (c *configured) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if s := sessionOf(req.ProviderData, &resp.Diagnostics); s != nil {
		c.s = s
	}
}

// session is the configured session, or an error diagnostic when there is none.
func (c *configured) session(diags *diag.Diagnostics) *session {
	if c.s == nil {
		diags.AddError("switchyard provider", errNotConfigured.Error())
	}
	return c.s
}

// incusOf is the run's Incus client for a resource's or data source's Configure:
// nil and no error before the provider was configured (usable then says so).
func incusOf(data any, diags *diag.Diagnostics) (*session, *api.Client, error) {
	s := sessionOf(data, diags)
	if s == nil {
		return nil, nil, nil
	}
	c, err := s.incus()
	return s, c, err
}

// usableIncus reports a remote that could not be opened, or no configured provider.
func usableIncus(c *api.Client, err error, diags *diag.Diagnostics) bool {
	switch {
	case err != nil:
		diags.AddError("incus remote", err.Error())
		return false
	case c == nil:
		diags.AddError("switchyard provider", errNotConfigured.Error())
		return false
	}
	return true
}
