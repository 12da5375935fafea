package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		level, format string
		want          zapcore.Level
		err           error
	}{
		{"debug", "console", zapcore.DebugLevel, nil},
		{"info", "json", zapcore.InfoLevel, nil},
		{"warn", "console", zapcore.WarnLevel, nil},
		{"error", "json", zapcore.ErrorLevel, nil},
		{"", "json", 0, ErrBadLevel},
		{"INFO", "json", 0, ErrBadLevel},
		{"trace", "json", 0, ErrBadLevel},
		{"fatal", "json", 0, ErrBadLevel},
		{"info", "", 0, ErrBadFormat},
		{"info", "text", 0, ErrBadFormat},
		{"info", "JSON", 0, ErrBadFormat},
	} {
		var buf bytes.Buffer
		log, al, err := New(tc.level, tc.format, &buf)
		if !errors.Is(err, tc.err) {
			t.Errorf("New(%q, %q) error = %v, want %v", tc.level, tc.format, err, tc.err)
			continue
		}
		if err != nil {
			if log != nil || !strings.Contains(err.Error(), "want one of") {
				t.Errorf("New(%q, %q): logger %v, error %q should list the accepted values", tc.level, tc.format, log, err)
			}
			continue
		}
		if al.Level() != tc.want {
			t.Errorf("New(%q): level %v", tc.level, al.Level())
		}
		log.Debug("d")
		log.Error("e")
		if got := strings.Count(buf.String(), "\n"); got != map[bool]int{true: 2, false: 1}[tc.want == zapcore.DebugLevel] {
			t.Errorf("New(%q): %d lines written: %q", tc.level, got, buf.String())
		}
	}
	if _, _, err := New("info", "json", nil); err == nil {
		t.Error("nil writer accepted")
	}
}

func TestNewJSONAndAtomicLevel(t *testing.T) {
	var buf bytes.Buffer
	log, al, err := New("warn", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("dropped")
	log.Warn("kept", zap.String("key", "ha.promoted"))
	al.SetLevel(zapcore.InfoLevel)
	log.Info("now kept")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	if m["level"] != "warn" || m["msg"] != "kept" || m["key"] != "ha.promoted" || m["ts"] == nil {
		t.Errorf("json line: %v", m)
	}
	buf.Reset()
	log, _, _ = New("info", "console", &buf)
	log.Info("hello", zap.String("key", "k"))
	if s := buf.String(); !strings.Contains(s, "\tINFO\thello\t") || !strings.Contains(s, `"key": "k"`) {
		t.Errorf("console line: %q", s)
	}
}

func TestSanitizeCN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"ctl-1.example.com", 64, "ctl-1.example.com"},
		{"", 64, ""},
		{"evil\nFATAL forged line", 64, "evil?FATAL forged line"},
		{"a\r\nb", 64, "a??b"},
		{"tab\there", 64, "tab?here"},
		{"nul\x00byte", 64, "nul?byte"},
		{"esc\x1b[31mred", 64, "esc?[31mred"},
		{"del\x7f", 64, "del?"},
		{"é", 64, "??"},         // two UTF-8 bytes
		{"日本", 64, "??????"},    // three bytes each
		{"\xff\xfe", 64, "??"},  // invalid UTF-8
		{"~ !", 64, "~ !"},      // printable bounds
		{"abcdef", 3, "abc"},    // truncated
		{"abcdef", 6, "abcdef"}, // exactly max
		{"ab\ncdef", 3, "ab?"},  // truncated and replaced
		{"abc", 0, ""},          // no room
		{"abc", -1, ""},         //
		{strings.Repeat("x", 100), 64, strings.Repeat("x", 64)},
	} {
		if got := SanitizeCN(tc.in, tc.max); got != tc.want {
			t.Errorf("SanitizeCN(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
