package merge

import (
	"reflect"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// Issue 13 item 1 (typed settings): every setting of the registry has exactly one
// field of Settings, of its type, and every field's tag is a registry setting, so a
// setting read by a misspelt name cannot compile.
func TestSettingsMatchRegistry(t *testing.T) {
	kinds := map[data.Kind]reflect.Kind{data.Integer: reflect.Int64, data.String: reflect.String, data.Object: reflect.Map}
	fields := map[string]reflect.Kind{}
	st := reflect.TypeOf(Settings{})
	for i := 0; i < st.NumField(); i++ {
		tag := st.Field(i).Tag.Get("setting")
		if _, dup := fields[tag]; dup || tag == "" {
			t.Errorf("field %s: tag %q empty or given twice", st.Field(i).Name, tag)
		}
		fields[tag] = st.Field(i).Type.Kind()
	}
	inRegistry := map[string]bool{}
	for _, m := range method.All() {
		for _, s := range m.Settings {
			inRegistry[s.Name] = true
			k, ok := fields[s.Name]
			if !ok {
				t.Errorf("%s.%s: no field of Settings", m.Name, s.Name)
				continue
			}
			if want, ok := kinds[s.Type.Kind]; !ok || k != want {
				t.Errorf("%s.%s: field of kind %s for a setting of type %s", m.Name, s.Name, k, s.Type.Kind)
			}
		}
	}
	for _, name := range settingNames() {
		if !inRegistry[name] {
			t.Errorf("Settings field tagged %q: no method has that setting", name)
		}
	}
}

func TestTypedSettings(t *testing.T) {
	def := baked()
	def.MethodSettings["tf-incus-operator"] = map[string]any{"projectConfig": map[string]any{"limits.cpu": "2"}, "dnsServer": "127.0.0.1:53"}
	d, err := Merge(def, lookup(t, "tf-incus-operator"), []byte(`{"deployment-method":{"tf-incus-operator":{"parallel":2}}}`), opts())
	if err != nil {
		t.Fatal(err)
	}
	s := d.Typed()
	if s.Parallel != 2 || s.DNSServer != "127.0.0.1:53" || s.ProjectConfig["limits.cpu"] != "2" || s.StateBackend != "local" || s.SSHKeyFile != "" {
		t.Errorf("typed settings: %+v", s)
	}
}
