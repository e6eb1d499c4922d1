package merge

import (
	"encoding/json"
	"reflect"
)

// Settings is the method settings of a merged deployment, typed: one field per setting
// of the registry (plan/method), named by its `setting` tag. A setting the method does
// not have is the field's zero value. TestSettingsMatchRegistry keeps the fields and
// the registry in step, so a setting is never looked up by a string that may be a typo.
type Settings struct {
	Parallel int64 `setting:"parallel"`

	SSHKeyFile     string `setting:"sshKeyFile"`
	KnownHostsFile string `setting:"knownHostsFile"`
	Rollout        string `setting:"rollout"` // ssh, tf and tf-incus

	StateBackend     string `setting:"stateBackend"`
	PgConnStringFile string `setting:"pgConnStringFile"`

	Project            string `setting:"project"`
	IncusRemote        string `setting:"incusRemote"`
	IncusClientKeyFile string `setting:"incusClientKeyFile"`

	ProjectDescription string         `setting:"projectDescription"`
	ProjectConfig      map[string]any `setting:"projectConfig"`
	DNSServer          string         `setting:"dnsServer"`
	DNSTsigKeyFile     string         `setting:"dnsTsigKeyFile"`
	SpireServer        string         `setting:"spireServer"`
	SpireTrustDomain   string         `setting:"spireTrustDomain"`
	SpireTokenFile     string         `setting:"spireTokenFile"`
}

// Typed is the deployment's settings as a Settings. A value of another type than its
// field's (which the merge refuses before) leaves the field zero.
func (d *Deployment) Typed() Settings {
	var s Settings
	v := reflect.ValueOf(&s).Elem()
	for i := 0; i < v.NumField(); i++ {
		raw, ok := d.Settings[v.Type().Field(i).Tag.Get("setting")]
		if !ok {
			continue
		}
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int64:
			f.SetInt(toInt(raw))
		case reflect.String:
			str, _ := raw.(string)
			f.SetString(str)
		case reflect.Map:
			if m, ok := raw.(map[string]any); ok {
				f.Set(reflect.ValueOf(m))
			}
		}
	}
	return s
}

// toInt is an integer setting, whether it came from a default (int64) or from JSON
// (json.Number); 0 when it is not an integer.
func toInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case json.Number:
		i, _ := v.Int64()
		return i
	}
	return 0
}

// settingNames is the setting tag of every field of Settings, in field order.
func settingNames() []string {
	t := reflect.TypeOf(Settings{})
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = t.Field(i).Tag.Get("setting")
	}
	return out
}
