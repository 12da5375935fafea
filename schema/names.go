package schema

import (
	"errors"
	"fmt"
)

// The one name rule (issue 20): queue, host, resource and schedule names
// are what operators type, what logs and metrics labels carry and what a
// terminal shows, so they may hold no byte that a shell, a path, a log
// line or a terminal gives a meaning to. The config codec (Validate) and
// the check of every client request (wire.CheckRequest) apply it.
const (
	// MaxNameBytes bounds a name.
	MaxNameBytes = 128
	// NameRule says the rule in the words of every refusal.
	NameRule = "names are 1 to 128 bytes of A-Z a-z 0-9 . _ -, starting with a letter or digit"
)

// ErrBadName wraps every refusal of CheckName; its text is the rule.
var ErrBadName = errors.New(NameRule)

// CheckName applies the name rule to name, the value of field (a field
// name for the message, e.g. "name" or "queue"). The error names the
// field, the name (escaped) and the first byte at fault with its offset.
func CheckName(field, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s is empty; %w", field, ErrBadName)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%s %.40q... is %d bytes; %w", field, name, len(name), ErrBadName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if alnum(c) || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		return fmt.Errorf("%s %q: byte %s at offset %d is not allowed; %w", field, name, describeByte(c), i, ErrBadName)
	}
	return nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// describeByte shows c for a message: its hex value, and the character
// when it is printable ASCII.
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("0x%02x %q", c, rune(c))
	}
	return fmt.Sprintf("0x%02x", c)
}
