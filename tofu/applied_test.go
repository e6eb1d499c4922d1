package tofu

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestApplied reads the groups' applied submissions from a state OpenTofu 1.10.6
// wrote for the resource addApplied makes (testdata/applied.tfstate: a dynamic input,
// held with its type), and writes them back as that resource.
func TestApplied(t *testing.T) {
	raw, err := os.ReadFile("testdata/applied.tfstate")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"web": {"aa11", "bb22"}, "db": {"cc33"}}
	got, err := Applied(raw)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Applied: %v, %v; want %v", got, err, want)
	}
	if got, err := Applied(nil); err != nil || len(got) != 0 {
		t.Errorf("no state: %v, %v", got, err)
	}
	cfg := &Config{}
	addApplied(cfg, want)
	b, _ := json.Marshal(struct {
		Resource *ResourceBlocks `json:"resource"`
	}{cfg.Resource})
	if string(b) != `{"resource":{"terraform_data":{"switchyard_submissions":{"input":{"db":["cc33"],"web":["aa11","bb22"]}}}}}` {
		t.Errorf("the resource: %s", b)
	}
}
