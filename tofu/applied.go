package tofu

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The groups' applied submissions live in the state as the input of one
// terraform_data resource (OpenTofu's built-in: no provider of ours, and kept by
// every backend), a map of group to the submissions' sha256, oldest first.
const (
	appliedType = "terraform_data"
	appliedName = "switchyard_submissions"
	// AppliedAddress is the resource's address: a subset run targets it too.
	AppliedAddress = appliedType + "." + appliedName
)

// addApplied adds the resource holding applied to cfg.
func addApplied(cfg *Config, applied map[string][]string) {
	input := map[string][]string{}
	for g, shas := range applied {
		input[escape(g)] = escapeAll(shas)
	}
	if cfg.Resource == nil {
		cfg.Resource = &ResourceBlocks{}
	}
	cfg.Resource.Applied = map[string]*AppliedBlock{appliedName: {Input: input}}
}

// Applied reads the groups' applied submissions from a state (as state pull gives
// it); a state without them has none.
func Applied(state []byte) (map[string][]string, error) {
	out := map[string][]string{}
	if len(bytes.TrimSpace(state)) == 0 {
		return out, nil
	}
	var s struct {
		Resources []struct {
			Module, Mode, Type, Name string
			Instances                []struct {
				Attributes struct {
					// A dynamic value: the state holds it with its type.
					Input struct {
						Value map[string][]string `json:"value"`
					} `json:"input"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(state, &s); err != nil {
		return nil, fmt.Errorf("state: the applied submissions: %w", err)
	}
	for _, r := range s.Resources {
		if r.Module == "" && r.Mode == "managed" && r.Type == appliedType && r.Name == appliedName {
			for _, i := range r.Instances {
				for g, shas := range i.Attributes.Input.Value {
					out[g] = shas
				}
			}
		}
	}
	return out, nil
}
