package confyaml

import (
	"errors"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

const good = `cluster_name: c
port: 7600
queues:
  - id: 1
    name: batch
    visibility_timeout_s: 30
    max_attempts: 3
    backoff_base_s: 2
    dead_letter_retention_s: 60
hosts:
  - name: h1
`

func TestParseSample(t *testing.T) {
	data, err := os.ReadFile("../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("examples/cluster.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.GetQueues()) != 2 || c.GetQueues()[1].GetName() != "gpu" || c.GetPort() != 7600 {
		t.Fatalf("unexpected config %v", c)
	}
	// Round trip through the YAML view.
	y, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse("rendered", y)
	if err != nil {
		t.Fatalf("rendered YAML does not parse: %v\n%s", err, y)
	}
	if !proto.Equal(c, c2) {
		t.Fatalf("round trip differs:\n%v\n%v", c, c2)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		sentinel   error
		want       string // substring, usually the line
	}{
		{"no queues", "cluster_name: c\nport: 7600\nqueues: []\n", schema.ErrNoQueues, "line 3:"},
		{"port too low", strings.Replace(good, "port: 7600", "port: 80", 1), schema.ErrBadPort, "line 2:"},
		{"port missing", strings.Replace(good, "port: 7600\n", "", 1), schema.ErrBadPort, ""},
		{"reserved queue", strings.Replace(good, "name: batch", "name: lost_and_found", 1), schema.ErrReservedName, "line 5:"}, // the name: line
		{"reserved host", strings.Replace(good, "name: h1", "name: lost_and_found", 1), schema.ErrReservedName, "line 11:"},
		{"duplicate queue name", good + "", nil, ""},
		{"unknown key", strings.Replace(good, "port: 7600", "port: 7600\nprot: 1", 1), ErrYAML, "line 3"},
		{"wrong type", strings.Replace(good, "max_attempts: 3", "max_attempts: many", 1), ErrYAML, "line 7"},
		{"empty", "", ErrYAML, "empty document"},
		// yaml.v3 prints a parser error's context line 0-based; Parse
		// reports the line of the unclosed construct (issue 8 defect 7).
		{"unclosed flow sequence", "cluster_name: c\nport: 7600\nqueues: [1, 2\nhosts: []\n", ErrYAML, "line 3:"},
		{"bad indentation in a list", "cluster_name: c\nqueues:\n  - id: 1\n   name: q\n", ErrYAML, "line 3:"},
		// A tab in the indentation: the line of the tab (issue 20 finding
		// 10; yaml.v3 names the line before it).
		{"tab in an entry", "cluster_name: c\nport: 7600\nqueues:\n  - id: 1\n\t name: x\n", ErrYAML, "line 5: found a tab character"},
		{"tab deeper down", "cluster_name: c\nport: 7600\nqueues:\n  - id: 1\n    name: x\n    max_attempts: 3\n\t  priority: 1\n", ErrYAML, "line 7: found a tab character"},
		{"max_attempts 0", strings.Replace(good, "max_attempts: 3", "max_attempts: 0", 1), schema.ErrBadStamps, "line 7:"},
		{"two documents", good + "---\n" + good, ErrYAML, "more than one"},
	}
	dupQueue := good[:strings.Index(good, "hosts:")] + `  - id: 2
    name: batch
    visibility_timeout_s: 30
    max_attempts: 3
    backoff_base_s: 2
    dead_letter_retention_s: 60
`
	cases[5] = struct {
		name, yaml string
		sentinel   error
		want       string
	}{"duplicate queue name", dupQueue, schema.ErrDuplicate, "line 11:"} // its name: line, not the entry's first
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("cluster.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("want an error")
			}
			if !errors.Is(err, tc.sentinel) || !errors.Is(err, ErrYAML) {
				t.Fatalf("error %q: want errors.Is %v and ErrYAML", err, tc.sentinel)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
