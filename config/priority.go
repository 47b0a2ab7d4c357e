package config

import (
	"encoding/json"
	"errors"
	"strings"

	"gopkg.in/yaml.v3"
)

// priorityForms lists the accepted spellings, for error messages.
const priorityForms = `want true, false or "SOURCE=VALUE", e.g. "header:X-Priority=high"`

// Priority is a route's `prioritized`: false (the zero Priority), true
// (every call), or "SOURCE=VALUE": the calls whose source (see Sources)
// gives that value. A prioritized call that a qps reject rule would refuse
// waits up to the route's occupyTimeoutMs for room instead (docs/rules.md).
type Priority struct {
	All    bool   // every call is prioritized
	Source Source // else, when set, the calls whose Source gives Value
	Value  string
}

// On reports whether any call of the route may be prioritized.
func (p Priority) On() bool { return p.All || !p.Source.IsZero() }

// String returns p as written: "false", "true" or "SOURCE=VALUE".
func (p Priority) String() string {
	switch {
	case p.All:
		return "true"
	case p.Source.IsZero():
		return "false"
	}
	return p.Source.String() + "=" + p.Value
}

// parsePriority reads a string form; the message has no package prefix.
func parsePriority(s string) (Priority, string) {
	switch strings.TrimSpace(s) {
	case "true":
		return Priority{All: true}, ""
	case "false", "":
		return Priority{}, ""
	}
	src, val, ok := strings.Cut(s, "=")
	if !ok {
		return Priority{}, "invalid prioritized " + quote(s) + " (" + priorityForms + ")"
	}
	if val == "" {
		return Priority{}, "invalid prioritized " + quote(s) + ": missing VALUE after \"=\" (" + priorityForms + ")"
	}
	source, msg := parseSource(src)
	if msg != "" {
		return Priority{}, "invalid prioritized " + quote(s) + ": " + msg
	}
	if form := sourceValue(source, val); form != "" && form != val {
		// The ip and host sources give one canonical form of a value: any
		// other spelling would prioritize no call.
		return Priority{}, "invalid prioritized " + quote(s) + ": the " + string(source.Kind) + " source gives " + quote(form) + ", never " + quote(val)
	}
	return Priority{Source: source, Value: val}, ""
}

// UnmarshalYAML reads true, false or a "SOURCE=VALUE" string.
func (p *Priority) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("config: expected true, false or a string, got " + describe(n) + " (" + priorityForms + ")")
	}
	if n.Tag == "!!bool" {
		var b bool
		if err := n.Decode(&b); err != nil {
			return errors.New("config: " + err.Error())
		}
		*p = Priority{All: b}
		return nil
	}
	if n.Tag != "!!str" && n.Tag != "!!null" {
		return errors.New("config: expected true, false or a string, got " + describe(n) + " (" + priorityForms + ")")
	}
	v, msg := parsePriority(n.Value)
	if msg != "" {
		return errors.New("config: " + msg)
	}
	*p = v
	return nil
}

// MarshalYAML writes p as a bool, or its "SOURCE=VALUE" string.
func (p Priority) MarshalYAML() (any, error) {
	if p.Source.IsZero() {
		return p.All, nil
	}
	return p.String(), nil
}

// MarshalJSON writes p as a bool, or its "SOURCE=VALUE" string.
func (p Priority) MarshalJSON() ([]byte, error) {
	if p.Source.IsZero() {
		return json.Marshal(p.All)
	}
	return json.Marshal(p.String())
}

// UnmarshalJSON reads a bool or a string as UnmarshalYAML does.
func (p *Priority) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*p = Priority{}
		return nil
	}
	var all bool
	if json.Unmarshal(b, &all) == nil {
		*p = Priority{All: all}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("config: prioritized must be true, false or a string")
	}
	v, msg := parsePriority(s)
	if msg != "" {
		return errors.New("config: " + msg)
	}
	*p = v
	return nil
}
