// Package logging builds the daemon's zap logger and sanitises untrusted
// text (certificate CNs) before it reaches a log line.
package logging

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Levels and Formats are the accepted values of New's arguments.
var (
	Levels  = []string{"debug", "info", "warn", "error"}
	Formats = []string{"console", "json"}
)

// ErrBadLevel and ErrBadFormat report an unknown level or format.
var (
	ErrBadLevel  = errors.New("unknown log level")
	ErrBadFormat = errors.New("unknown log format")
)

// New returns a logger writing to w at level (debug|info|warn|error) in
// format console (human, tab-separated) or json (one object per line),
// with ISO 8601 UTC-offset timestamps, and the AtomicLevel that changes
// its level at run time (e.g. on SIGHUP). Values are case-sensitive. Entries
// at error level and above carry no stack trace (the state machine's log
// keys say where); w is wrapped with zapcore.AddSync and never closed.
func New(level, format string, w io.Writer) (*zap.Logger, zap.AtomicLevel, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, zap.AtomicLevel{}, err
	}
	if w == nil {
		return nil, zap.AtomicLevel{}, errors.New("log writer is nil")
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, zap.AtomicLevel{}, fmt.Errorf("%w %q: want one of %s", ErrBadFormat, format, strings.Join(Formats, ", "))
	}
	al := zap.NewAtomicLevelAt(lvl)
	core := zapcore.NewCore(enc, zapcore.AddSync(w), al)
	return zap.New(core), al, nil
}

// ParseLevel is one of Levels as a zap level (ErrBadLevel otherwise).
func ParseLevel(level string) (zapcore.Level, error) {
	switch level {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("%w %q: want one of %s", ErrBadLevel, level, strings.Join(Levels, ", "))
}

// SanitizeCN makes untrusted text safe for one log line (seed 002 §6.4
// sanitise_cn): every byte outside printable ASCII (0x20..0x7E) — control
// characters, newlines, DEL and each byte of a non-ASCII UTF-8 sequence —
// becomes '?', and the result is cut to at most limit bytes (limit <= 0 gives
// ""). The output is always valid ASCII.
func SanitizeCN(s string, limit int) string {
	if limit <= 0 {
		return ""
	}
	if len(s) > limit {
		s = s[:limit]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7E {
			b[i] = '?'
		}
	}
	return string(b)
}

// Fatal writes msg at zap's FatalLevel through the core, without zap's
// os.Exit: the caller ends the process with its own exit code.
func Fatal(log *zap.Logger, msg string, fields ...zap.Field) {
	ent := zapcore.Entry{Level: zapcore.FatalLevel, Time: time.Now(), LoggerName: log.Name(), Message: msg}
	if ce := log.Core().Check(ent, nil); ce != nil {
		ce.Write(fields...)
	}
}
