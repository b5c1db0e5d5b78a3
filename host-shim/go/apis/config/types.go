// Package config reads the ComputeDomainPlacement plugin's arguments as the scheduler hands
// them to the plugin factory (pluginConfig args, YAML or JSON) into the raw JSON object the
// policy validates. It checks only that they are an object: the policy is the one validator of
// every field, host fields included (guestPath, guestCallTimeout, guestMemoryLimitMiB), with
// the one set of defaults, and its messages are shown as they are.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Decode returns the args as a JSON object: `{}` for none (nil, or an empty *runtime.Unknown),
// the JSON form of a *runtime.Unknown holding JSON or YAML otherwise.
func Decode(obj runtime.Object) ([]byte, error) {
	switch o := obj.(type) {
	case nil:
		return []byte("{}"), nil
	case *runtime.Unknown:
		if len(bytes.TrimSpace(o.Raw)) == 0 {
			return []byte("{}"), nil
		}
		raw, err := yaml.YAMLToJSON(o.Raw)
		if err != nil {
			return nil, fmt.Errorf("decoding ComputeDomainPlacementArgs: %w", err)
		}
		raw = bytes.TrimSpace(raw)
		if bytes.Equal(raw, []byte("null")) {
			return []byte("{}"), nil
		}
		var object map[string]json.RawMessage
		if err := json.Unmarshal(raw, &object); err != nil {
			return nil, fmt.Errorf("decoding ComputeDomainPlacementArgs: want an object of fields, got %s", kindOfJSON(raw))
		}
		return raw, nil
	default:
		return nil, fmt.Errorf("want args to be of type runtime.Unknown (YAML or JSON), got %T", obj)
	}
}

func kindOfJSON(raw []byte) string {
	switch raw[0] {
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
