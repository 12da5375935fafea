// Package confyaml turns the operator's cluster.yaml into a ClusterConfig
// blob and back, with errors that name the line of the offending entry.
package confyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/xce-hpc/xce/schema"
)

// ErrYAML wraps every error about the YAML input.
var ErrYAML = errors.New("invalid cluster config")

// File is the YAML layout of a cluster config.
type File struct {
	ClusterName string     `yaml:"cluster_name"`
	Port        uint32     `yaml:"port"`
	Generation  uint64     `yaml:"config_generation,omitempty"`
	Queues      []Queue    `yaml:"queues"`
	Hosts       []Host     `yaml:"hosts,omitempty"`
	Resources   []Resource `yaml:"resources,omitempty"`
}

// Queue carries the stamp defaults jobs of the queue are enqueued with.
type Queue struct {
	ID                   uint32 `yaml:"id"`
	Name                 string `yaml:"name"`
	VisibilityTimeoutS   uint32 `yaml:"visibility_timeout_s"`
	MaxAttempts          uint32 `yaml:"max_attempts"`
	BackoffBaseS         uint32 `yaml:"backoff_base_s"`
	DeadLetterRetentionS uint32 `yaml:"dead_letter_retention_s"`
	Priority             int32  `yaml:"priority,omitempty"`
	IdempotencyWindowS   uint32 `yaml:"idempotency_window_s,omitempty"`
}

// Host is a worker host.
type Host struct {
	Name        string   `yaml:"name"`
	Address     string   `yaml:"address,omitempty"`
	ResourceIDs []uint32 `yaml:"resource_ids,omitempty,flow"`
}

// Resource is a countable resource (GPUs, licences).
type Resource struct {
	ID    uint32 `yaml:"id"`
	Name  string `yaml:"name"`
	Count uint32 `yaml:"count"`
}

// Parse decodes and validates cluster.yaml. Unknown keys, wrong types and
// semantic problems (no queues, bad port, reserved or duplicate names and
// ids) are errors naming the source and line.
func Parse(name string, data []byte) (*schema.ClusterConfig, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w %s: empty document", ErrYAML, name)
		}
		return nil, fmt.Errorf("%w %s: %v", ErrYAML, name, fixLine(err))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w %s: more than one YAML document", ErrYAML, name)
	}
	c := f.ToProto()
	if err := schema.Validate(c); err != nil {
		return nil, fmt.Errorf("%w %s:%s %w", ErrYAML, name, lineOf(data, err), err)
	}
	return c, nil
}

// ToProto converts the YAML view to the protobuf message.
func (f *File) ToProto() *schema.ClusterConfig {
	c := &schema.ClusterConfig{ClusterName: f.ClusterName, Port: f.Port, ConfigGeneration: f.Generation}
	for _, q := range f.Queues {
		c.Queues = append(c.Queues, &schema.Queue{Id: q.ID, Name: q.Name, VisibilityTimeoutS: q.VisibilityTimeoutS,
			MaxAttempts: q.MaxAttempts, BackoffBaseS: q.BackoffBaseS, DeadLetterRetentionS: q.DeadLetterRetentionS, Priority: q.Priority,
			IdempotencyWindowS: q.IdempotencyWindowS})
	}
	for _, h := range f.Hosts {
		c.Hosts = append(c.Hosts, &schema.Host{Name: h.Name, Address: h.Address, ResourceIds: h.ResourceIDs})
	}
	for _, r := range f.Resources {
		c.Resources = append(c.Resources, &schema.Resource{Id: r.ID, Name: r.Name, Count: r.Count})
	}
	return c
}

// FromProto is the YAML view of a config (for `xce-config show`).
func FromProto(c *schema.ClusterConfig) *File {
	f := &File{ClusterName: c.GetClusterName(), Port: c.GetPort(), Generation: c.GetConfigGeneration()}
	for _, q := range c.GetQueues() {
		f.Queues = append(f.Queues, Queue{ID: q.GetId(), Name: q.GetName(), VisibilityTimeoutS: q.GetVisibilityTimeoutS(),
			MaxAttempts: q.GetMaxAttempts(), BackoffBaseS: q.GetBackoffBaseS(), DeadLetterRetentionS: q.GetDeadLetterRetentionS(), Priority: q.GetPriority(),
			IdempotencyWindowS: q.GetIdempotencyWindowS()})
	}
	for _, h := range c.GetHosts() {
		f.Hosts = append(f.Hosts, Host{Name: h.GetName(), Address: h.GetAddress(), ResourceIDs: h.GetResourceIds()})
	}
	for _, r := range c.GetResources() {
		f.Resources = append(f.Resources, Resource{ID: r.GetId(), Name: r.GetName(), Count: r.GetCount()})
	}
	return f
}

// Marshal renders a config as YAML.
func Marshal(c *schema.ClusterConfig) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(FromProto(c)); err != nil {
		return nil, fmt.Errorf("render YAML: %w", err)
	}
	return b.Bytes(), nil
}

// parserContext matches yaml.v3's errors that name the line of the
// construct they were parsing: it prints that mark 0-based, one line
// early (its other scanner and parser errors are 1-based). A tab that
// breaks the indentation is one of them: the scanner names the line of
// the mapping it was in, 0-based.
var parserContext = regexp.MustCompile(`^yaml: line (\d+): (did not find expected (node content|key|'-' indicator|',' or '\]'|',' or '\}'|<document start>)|found a tab character that violates indentation)`)

// fixLine is err with such a line number made 1-based.
func fixLine(err error) error {
	m := parserContext.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	msg := err.Error()
	n, convErr := strconv.Atoi(msg[m[2]:m[3]])
	if convErr != nil {
		return err
	}
	return fmt.Errorf("yaml: line %d:%s (%w)", n+1, msg[m[3]+1:], errYAMLSyntax)
}

// errYAMLSyntax marks a YAML syntax error whose line was corrected.
var errYAMLSyntax = errors.New("syntax error")

// lineOf finds the line of the entry a validation error names, or of the
// key it is about (port, queues), as " line N:"; "" if unknown.
func lineOf(data []byte, err error) string {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return ""
	}
	doc := root.Content[0]
	key := func(k string) *yaml.Node {
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if doc.Content[i].Value == k {
				return doc.Content[i+1]
			}
		}
		return nil
	}
	var ee *schema.EntryError
	var n *yaml.Node
	switch {
	case errors.As(err, &ee):
		if seq := key(ee.Section); seq != nil && ee.Index < len(seq.Content) {
			n = seq.Content[ee.Index]
			for i := 0; i+1 < len(n.Content); i += 2 { // the key the error is about
				if ee.Field != "" && n.Content[i].Value == ee.Field {
					n = n.Content[i]
					break
				}
			}
		}
	case errors.Is(err, schema.ErrBadPort):
		n = key("port")
	case errors.Is(err, schema.ErrNoQueues):
		n = key("queues")
	}
	if n == nil {
		return ""
	}
	return fmt.Sprintf(" line %d:", n.Line)
}
