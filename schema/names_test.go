package schema

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		name string
		want string // part of the error; "" for none
	}{
		{"batch", ""},
		{"q000001-xxxxxxxx", ""},
		{"lost_and_found", ""},
		{"node001.rack-2", ""},
		{"A", ""},
		{strings.Repeat("x", MaxNameBytes), ""},
		{"", "queue is empty"},
		{strings.Repeat("x", MaxNameBytes+1), "is 129 bytes"},
		{"a/b", `queue "a/b": byte 0x2f '/' at offset 1 is not allowed`},
		{"a\x00b", `queue "a\x00b": byte 0x00 at offset 1 is not allowed`},
		{"\x1b[31mred", `queue "\x1b[31mred": byte 0x1b at offset 0 is not allowed`},
		{"a b", `byte 0x20 ' ' at offset 1`},
		{"-flag", `byte 0x2d '-' at offset 0`},
		{".", `byte 0x2e '.' at offset 0`},
		{"ünï", `byte 0xc3 at offset 0`},
		{"a\nb", `"a\nb": byte 0x0a at offset 1`},
	} {
		err := CheckName("queue", c.name)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrBadName)):
			t.Errorf("%q: %v, want ErrBadName with %q", c.name, err, c.want)
		case c.want != "" && !strings.Contains(err.Error(), NameRule):
			t.Errorf("%q: %v does not state the rule", c.name, err)
		}
	}
}
