// Package tzdb resolves IANA time zone names from a copy of the time zone
// database compiled into the binary (zoneinfo.zip, the file Go ships in
// $GOROOT/lib/time, tz release 2025c). It never reads the host's
// zoneinfo files: time.LoadLocation would, and two hosts holding different
// tz releases would then compute different fire times for one schedule.
//
// Only the primary resolves a name (when it logs a schedule's
// registration); the zone's rules travel in the WAL record and the
// snapshot, so standbys and replay use the primary's bytes whatever
// release their own binary carries. `make tzdata` refreshes the copy from
// the Go toolchain in use.
package tzdb

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

//go:embed zoneinfo.zip
var zoneinfo []byte

// ErrUnknownZone is wrapped by Lookup's error for a name the database
// does not hold.
var ErrUnknownZone = errors.New("unknown time zone")

// maxZoneBytes bounds one zone's rules (the largest in the database are
// about 3 KiB): a record carries them.
const maxZoneBytes = 16 << 10

// Lookup returns the TZif rules of zone name. "Local" and names the
// database does not hold are ErrUnknownZone: the host's zone is what a
// replica may not depend on.
func Lookup(name string) ([]byte, error) {
	if name == "" || name == "Local" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("%w %q", ErrUnknownZone, name)
	}
	zr, err := zip.NewReader(bytes.NewReader(zoneinfo), int64(len(zoneinfo)))
	if err != nil {
		return nil, fmt.Errorf("tzdb: the compiled-in database does not open: %w", err)
	}
	for _, f := range zr.File {
		if f.Name != name {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("tzdb: zone %q: %w", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxZoneBytes+1))
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("tzdb: zone %q: %w", name, err)
		}
		if len(data) > maxZoneBytes {
			return nil, fmt.Errorf("tzdb: zone %q: rules over %d bytes", name, maxZoneBytes)
		}
		if _, err := time.LoadLocationFromTZData(name, data); err != nil {
			return nil, fmt.Errorf("tzdb: zone %q: %w", name, err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownZone, name)
}
